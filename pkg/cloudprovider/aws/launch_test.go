package aws

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// planTypes are three types: m5.large (amd64) spot and on-demand in a and b,
// m6g.large (arm64) on-demand in a, c5.large spot in c only.
func planTypes(t *testing.T) []*scheduling.InstanceType {
	t.Helper()
	cat := Catalog{Region: "us-east-1",
		Types: []ec2types.InstanceTypeInfo{
			typeInfo("m5.large", 2, 8192),
			typeInfo("m6g.large", 2, 8192, func(i *ec2types.InstanceTypeInfo) {
				i.ProcessorInfo.SupportedArchitectures = []ec2types.ArchitectureType{ec2types.ArchitectureTypeArm64}
				i.NetworkInfo.MaximumNetworkInterfaces = aws.Int32(4)
			}),
			typeInfo("c5.large", 2, 4096),
		},
		Zones: map[string][]string{"m5.large": {"us-east-1a", "us-east-1b"}, "m6g.large": {"us-east-1a"}, "c5.large": {"us-east-1c"}},
		Prices: Prices{OnDemand: map[string]float64{"m5.large": 0.096, "m6g.large": 0.077},
			Spot: map[string]map[string]float64{"m5.large": {"us-east-1a": 0.04, "us-east-1b": 0.03}, "c5.large": {"us-east-1c": 0.02}}},
	}
	types, err := BuildInstanceTypes(cat, allocatable.DefaultEKS(), resource.Quantity{})
	if err != nil {
		t.Fatal(err)
	}
	return types
}

func claimWith(reqs ...v1.NodeSelectorRequirementWithMinValues) *v1.NodeClaim {
	return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abcde", UID: types.UID("uid-1"), Labels: map[string]string{v1.NodePoolLabelKey: "default"}},
		Spec: v1.NodeClaimSpec{Requirements: reqs, NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}}}
}

func req(key string, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: v1.NodeSelectorOpIn, Values: values}
}

func TestPlanFleet(t *testing.T) {
	subnets := []awsv1.Subnet{{ID: "subnet-a1", Zone: "us-east-1a"}, {ID: "subnet-a2", Zone: "us-east-1a"}, {ID: "subnet-b", Zone: "us-east-1b"}}
	a, _ := awsv1.ParseAlias("al2023@latest")
	params, _ := AliasParameters(a, "1.34")
	amis := []awsv1.AMI{{ID: "ami-amd64", Requirements: params[0].Requirements}, {ID: "ami-arm64", Requirements: params[2].Requirements}}
	types := planTypes(t)

	tests := []struct {
		name    string
		claim   *v1.NodeClaim
		types   []*scheduling.InstanceType
		captype string
		groups  map[string][]Override // by AMI
		wantICE bool
	}{
		{
			name:    "spot when allowed: the spot offerings in the subnets' zones, one subnet per zone",
			claim:   claimWith(req(v1.CapacityTypeLabelKey, "spot", "on-demand")),
			captype: "spot",
			groups: map[string][]Override{"ami-amd64": {
				{InstanceType: "m5.large", SubnetID: "subnet-a1", Zone: "us-east-1a", Price: 0.04},
				{InstanceType: "m5.large", SubnetID: "subnet-b", Zone: "us-east-1b", Price: 0.03},
			}},
		},
		{
			name:    "on-demand: every type, one launch template per AMI",
			claim:   claimWith(req(v1.CapacityTypeLabelKey, "on-demand")),
			captype: "on-demand",
			groups: map[string][]Override{
				"ami-arm64": {{InstanceType: "m6g.large", SubnetID: "subnet-a1", Zone: "us-east-1a", Price: 0.077}},
				"ami-amd64": {
					{InstanceType: "m5.large", SubnetID: "subnet-a1", Zone: "us-east-1a", Price: 0.096},
					{InstanceType: "m5.large", SubnetID: "subnet-b", Zone: "us-east-1b", Price: 0.096},
				},
			},
		},
		{
			name:    "the claim's zones and types narrow the overrides",
			claim:   claimWith(req(v1.LabelZone, "us-east-1b"), req(v1.LabelInstanceType, "m5.large", "m6g.large")),
			captype: "spot",
			groups:  map[string][]Override{"ami-amd64": {{InstanceType: "m5.large", SubnetID: "subnet-b", Zone: "us-east-1b", Price: 0.03}}},
		},
		{
			name:    "no subnet in the only zone of a type: nothing to launch",
			claim:   claimWith(req(v1.LabelInstanceType, "c5.large")),
			wantICE: true,
		},
		{
			name:  "offerings marked unavailable are not tried; spot gone falls back to on-demand",
			claim: claimWith(req(v1.LabelInstanceType, "m5.large")),
			types: func() []*scheduling.InstanceType {
				var out []*scheduling.InstanceType
				for _, it := range types {
					cp := *it
					cp.Offerings = nil
					for _, o := range it.Offerings {
						if o.CapacityType == "spot" {
							o.Available = false
						}
						cp.Offerings = append(cp.Offerings, o)
					}
					out = append(out, &cp)
				}
				return out
			}(),
			captype: "on-demand",
			groups: map[string][]Override{"ami-amd64": {
				{InstanceType: "m5.large", SubnetID: "subnet-a1", Zone: "us-east-1a", Price: 0.096},
				{InstanceType: "m5.large", SubnetID: "subnet-b", Zone: "us-east-1b", Price: 0.096},
			}},
		},
		{
			name:    "a requirement that admits nothing",
			claim:   claimWith(req(v1.LabelArch, "s390x")),
			wantICE: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := types
			if tt.types != nil {
				ts = tt.types
			}
			plan, err := PlanFleet(tt.claim, ts, subnets, amis, nil)
			if tt.wantICE {
				if !cloudprovider.IsInsufficientCapacity(err) {
					t.Fatalf("want InsufficientCapacityError, got %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if plan.CapacityType != tt.captype {
				t.Errorf("capacity type %s, want %s", plan.CapacityType, tt.captype)
			}
			got := map[string][]Override{}
			for _, g := range plan.Groups {
				got[g.AMI.ID] = g.Overrides
			}
			if diff := cmp.Diff(tt.groups, got); diff != "" {
				t.Errorf("overrides by AMI (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFleetInput(t *testing.T) {
	plan := FleetPlan{CapacityType: "spot", Groups: []LaunchGroup{{AMI: awsv1.AMI{ID: "ami-1"}, Overrides: []Override{{InstanceType: "m5.large", SubnetID: "subnet-a", Zone: "us-east-1a"}}}}}
	in := FleetInput(plan, []string{"lt-1"}, "uid-1", map[string]string{"b": "2", "a": "1"})
	if in.Type != ec2types.FleetTypeInstant || *in.ClientToken != "uid-1" || *in.TargetCapacitySpecification.TotalTargetCapacity != 1 {
		t.Errorf("not an instant fleet of one with the client token: %+v", in)
	}
	if in.SpotOptions == nil || in.SpotOptions.AllocationStrategy != ec2types.SpotAllocationStrategyPriceCapacityOptimized {
		t.Errorf("spot must be price-capacity-optimized: %+v", in.SpotOptions)
	}
	if in.TargetCapacitySpecification.DefaultTargetCapacityType != ec2types.DefaultTargetCapacityTypeSpot {
		t.Errorf("target capacity type %s", in.TargetCapacitySpecification.DefaultTargetCapacityType)
	}
	if *in.TagSpecifications[0].Tags[0].Key != "a" {
		t.Error("tags must be sorted")
	}
	plan.CapacityType = "on-demand"
	in = FleetInput(plan, []string{"lt-1"}, "uid-1", nil)
	if in.OnDemandOptions == nil || in.OnDemandOptions.AllocationStrategy != ec2types.FleetOnDemandAllocationStrategyLowestPrice || in.SpotOptions != nil {
		t.Errorf("on-demand must be lowest-price: %+v", in.OnDemandOptions)
	}
}

func TestReadFleet(t *testing.T) {
	plan := FleetPlan{CapacityType: "spot", Groups: []LaunchGroup{{AMI: awsv1.AMI{ID: "ami-1"}, Overrides: []Override{
		{InstanceType: "m5.large", SubnetID: "subnet-a", Zone: "us-east-1a"},
		{InstanceType: "m5.large", SubnetID: "subnet-b", Zone: "us-east-1b"},
	}}}}
	overrides := func(typ, subnet string) *ec2types.LaunchTemplateAndOverridesResponse {
		return &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{InstanceType: ec2types.InstanceType(typ), SubnetId: aws.String(subnet)}}
	}
	iceA := ec2types.CreateFleetError{ErrorCode: aws.String("InsufficientInstanceCapacity"), LaunchTemplateAndOverrides: overrides("m5.large", "subnet-a")}

	t.Run("launched after an ICE in another zone", func(t *testing.T) {
		out := &ec2.CreateFleetOutput{Errors: []ec2types.CreateFleetError{iceA}, Instances: []ec2types.CreateFleetInstance{{
			InstanceIds: []string{"i-1"}, InstanceType: "m5.large", Lifecycle: ec2types.InstanceLifecycleSpot, LaunchTemplateAndOverrides: overrides("m5.large", "subnet-b")}}}
		got, ice, err := ReadFleet(out, plan)
		if err != nil {
			t.Fatal(err)
		}
		want := Launched{InstanceID: "i-1", InstanceType: "m5.large", Zone: "us-east-1b", CapacityType: "spot", ImageID: "ami-1"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]cloudprovider.UnavailableOffering{{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}}, ice); diff != "" {
			t.Errorf("ICE (-want +got):\n%s", diff)
		}
	})
	t.Run("nothing launched for lack of capacity", func(t *testing.T) {
		_, ice, err := ReadFleet(&ec2.CreateFleetOutput{Errors: []ec2types.CreateFleetError{iceA}}, plan)
		if !cloudprovider.IsInsufficientCapacity(err) || len(ice) != 1 {
			t.Fatalf("want InsufficientCapacityError with one offering, got %v, %v", err, ice)
		}
	})
	t.Run("nothing launched for another reason", func(t *testing.T) {
		_, _, err := ReadFleet(&ec2.CreateFleetOutput{Errors: []ec2types.CreateFleetError{{ErrorCode: aws.String("InvalidParameterValue"), ErrorMessage: aws.String("bad AMI")}}}, plan)
		if err == nil || cloudprovider.IsInsufficientCapacity(err) || !strings.Contains(err.Error(), "bad AMI") {
			t.Fatalf("want the fleet's error, got %v", err)
		}
	})
}

func TestProviderID(t *testing.T) {
	id := ProviderID("us-east-1a", "i-0123456789abcdef0")
	if id != "aws:///us-east-1a/i-0123456789abcdef0" {
		t.Fatalf("provider ID %q", id)
	}
	if got, err := ParseProviderID(id); err != nil || got != "i-0123456789abcdef0" {
		t.Errorf("parse: %q, %v", got, err)
	}
	for _, bad := range []string{"", "sim:///us-east-1a/i-1", "aws:///us-east-1a/", "aws:///i"} {
		if _, err := ParseProviderID(bad); err == nil {
			t.Errorf("%q must not parse", bad)
		}
	}
}

func TestLaunchTemplate(t *testing.T) {
	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}}}
	in := LaunchTemplateInput{Cluster: "demo", NodeClass: nc, ImageID: "ami-1", UserData: "hello", SecurityGroups: []string{"sg-1"}, InstanceProfile: "p"}
	name, data := LaunchTemplate(in)
	if !strings.HasPrefix(name, "tailor.sh/demo/") {
		t.Errorf("name %q", name)
	}
	if ud, _ := base64.StdEncoding.DecodeString(*data.UserData); string(ud) != "hello" {
		t.Errorf("user data %q", ud)
	}
	if data.MetadataOptions.HttpTokens != ec2types.LaunchTemplateHttpTokensStateRequired || *data.MetadataOptions.HttpPutResponseHopLimit != 1 {
		t.Errorf("IMDSv2 with one hop by default: %+v", data.MetadataOptions)
	}
	if len(data.BlockDeviceMappings) != 1 || *data.BlockDeviceMappings[0].Ebs.VolumeSize != 20 || *data.BlockDeviceMappings[0].DeviceName != "/dev/xvda" {
		t.Errorf("default root volume: %+v", data.BlockDeviceMappings)
	}
	in.ImageID = "ami-2"
	if other, _ := LaunchTemplate(in); other == name {
		t.Error("another AMI must make another template")
	}
	public := nc.DeepCopy()
	public.Spec.AssociatePublicIPAddress = aws.Bool(true)
	in.NodeClass = public
	if _, data := LaunchTemplate(in); data.SecurityGroupIds != nil || len(data.NetworkInterfaces) != 1 || data.NetworkInterfaces[0].Groups[0] != "sg-1" {
		t.Errorf("a public address moves the groups to the interface: %+v", data)
	}
}

func TestRootVolumeSize(t *testing.T) {
	br := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMIFamily: aws.String(awsv1.AMIFamilyBottlerocket)}}
	if got := RootVolumeSize(br); got.String() != "20Gi" {
		t.Errorf("bottlerocket's kubelet volume is its data volume: %s", got.String())
	}
	// EKS's Windows images boot from /dev/sda1: a /dev/xvda mapping would be a
	// second, unused volume.
	win := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMIFamily: aws.String(awsv1.AMIFamilyWindows2022)}}
	if m := BlockDeviceMappings(win); len(m) != 1 || *m[0].DeviceName != "/dev/sda1" {
		t.Errorf("windows default mappings: %+v", m)
	}
	if got := RootVolumeSize(win); got.String() != "50Gi" {
		t.Errorf("windows root volume: %s", got.String())
	}
	size := resource.MustParse("100Gi")
	custom := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{BlockDeviceMappings: []*awsv1.BlockDeviceMapping{
		{DeviceName: aws.String("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: &size}, RootVolume: true}}}}
	if got := RootVolumeSize(custom); got.String() != "100Gi" {
		t.Errorf("rootVolume mapping: %s", got.String())
	}
}

func TestInstanceTags(t *testing.T) {
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{
		Tags: map[string]string{"team": "payments", TagNodeClaim: "spoofed"}}}
	tags := InstanceTags(claimWith(), nc, "demo")
	for k, want := range map[string]string{"team": "payments", TagNodeClaim: "default-abcde", TagNodePool: "default",
		TagNodeClass: "default", "kubernetes.io/cluster/demo": "owned", TagEKSCluster: "demo"} {
		if tags[k] != want {
			t.Errorf("tag %s = %q, want %q", k, tags[k], want)
		}
	}
}
