package fakeaws

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// What Karpenter's examples select is there, found the way the provider looks.
func TestKarpenterExamplesInventory(t *testing.T) {
	s := start(t, Options{Cluster: Cluster{Name: "demo", Version: "1.34"}, Inventory: KarpenterExamples("demo", "1.34", "123456789012")})
	c := ec2Client(s)
	for _, sn := range s.InventorySnapshot().Subnets {
		if sn.VPCID != ExamplesVPC {
			t.Errorf("subnet %s in %s, want %s", sn.ID, sn.VPCID, ExamplesVPC)
		}
	}
	named := must(c.DescribeSecurityGroups(ctx(t), &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{
		flt("group-name", "k8s-node"), flt("vpc-id", ExamplesVPC)}})).ok(t)
	if len(named.SecurityGroups) != 1 {
		t.Errorf("k8s-node in %s: %d groups, want 1", ExamplesVPC, len(named.SecurityGroups))
	}
	tagged := must(c.DescribeSecurityGroups(ctx(t), &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{
		flt("tag:karpenter.sh/discovery", "demo"), flt("tag:Environment", "production"), flt("vpc-id", ExamplesVPC)}})).ok(t)
	if len(tagged.SecurityGroups) != 1 {
		t.Errorf("production groups: %d, want 1", len(tagged.SecurityGroups))
	}
	custom := must(c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{ImageIds: []string{"ami-123", "ami-456"}})).ok(t)
	if len(custom.Images) != 2 {
		t.Errorf("ami-123 and ami-456: %d images", len(custom.Images))
	}

	params := map[string]string{
		"/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.34-v20240625/image_id": "",
		"/aws/service/bottlerocket/aws-k8s-1.34-fips/x86_64/latest/image_id":                                                                   "",
		"/aws/service/bottlerocket/aws-k8s-1.34-nvidia-fips/arm64/latest/image_id":                                                             "",
		"/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-1.34/image_id":                                         "windows",
		"/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.34/image_id":                                         "windows",
		"/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.34/image_id":                                         "windows",
	}
	sc := ssm.NewFromConfig(config(s, 3))
	for name, platform := range params {
		out, err := sc.GetParameter(ctx(t), &ssm.GetParameterInput{Name: aws.String(name)})
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		im := must(c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{ImageIds: []string{aws.ToString(out.Parameter.Value)}})).ok(t)
		if len(im.Images) != 1 || string(im.Images[0].Platform) != platform {
			t.Errorf("%s names %+v, want one image of platform %q", name, im.Images, platform)
		}
	}
}

// A Windows image's kubelet registers a Windows node.
func TestKubeletOfWindowsImage(t *testing.T) {
	s, clk := startClocked(t, Options{Cluster: Cluster{Name: "demo", Version: "1.34"}, Inventory: KarpenterExamples("demo", "1.34", "123456789012"),
		PendingDelay: time.Second})
	c := ec2Client(s)
	inv := s.InventorySnapshot()
	ssmName := "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.34/image_id"
	image := inv.SSMParameters[ssmName]
	userData := strings.Replace(windowsUserData(clusterOf(s), "--max-pods=9"), "karpenter.sh/nodepool=win", "karpenter.sh/nodepool=win,node.kubernetes.io/windows-build=10.0.20348", 1)
	lt := must(c.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("windows"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image), UserData: aws.String(base64.StdEncoding.EncodeToString([]byte(userData)))},
	})).ok(t)
	must(c.CreateFleet(ctx(t), &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", SubnetId: aws.String(inv.Subnets[0].ID)}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
	})).ok(t)
	kube := fake.NewClientBuilder().Build()
	k := NewKubelet(s, kube, KubeletOptions{RegistrationDelay: time.Second})
	clk.Step(time.Second)
	if err := k.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	if err := k.Sync(ctx(t)); err != nil {
		t.Fatal(err)
	}
	nodes := &corev1.NodeList{}
	if err := kube.List(ctx(t), nodes); err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) != 1 {
		t.Fatalf("%d nodes, want 1", len(nodes.Items))
	}
	n := nodes.Items[0]
	if n.Labels[corev1.LabelOSStable] != "windows" || n.Status.NodeInfo.OperatingSystem != "windows" ||
		n.Labels["node.kubernetes.io/windows-build"] != "10.0.20348" || n.Labels["karpenter.sh/nodepool"] != "win" {
		t.Errorf("node labels %v, OS %q: want a Windows node of pool win", n.Labels, n.Status.NodeInfo.OperatingSystem)
	}
}
