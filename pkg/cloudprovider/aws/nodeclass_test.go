package aws

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
)

func TestSelectorFilters(t *testing.T) {
	got := SubnetFilters(awsv1.SubnetSelectorTerm{Tags: map[string]string{"karpenter.sh/discovery": "demo", "Name": "*"}})
	want := []ec2types.Filter{filter("tag-key", "Name"), filter("tag:karpenter.sh/discovery", "demo")}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(ec2types.Filter{})); diff != "" {
		t.Errorf("subnet tags (-want +got):\n%s", diff)
	}
	if got := SubnetFilters(awsv1.SubnetSelectorTerm{ID: "subnet-1"}); *got[0].Name != "subnet-id" {
		t.Errorf("subnet id filter: %+v", got)
	}
	got = SecurityGroupFilters(awsv1.SecurityGroupSelectorTerm{Name: "eks-cluster-sg"})
	if len(got) != 1 || *got[0].Name != "group-name" || got[0].Values[0] != "eks-cluster-sg" {
		t.Errorf("security group name filter: %+v", got)
	}
}

func TestAliasParameters(t *testing.T) {
	tests := []struct {
		alias string
		want  []string
	}{
		{"al2023@latest", []string{
			"/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/recommended/image_id",
			"/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
			"/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/arm64/standard/recommended/image_id",
			"/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/arm64/nvidia/recommended/image_id",
		}},
		{"al2023@v20250801", []string{
			"/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.34-v20250801/image_id",
			"/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/nvidia/amazon-eks-node-al2023-x86_64-nvidia-1.34-v20250801/image_id",
			"/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/arm64/standard/amazon-eks-node-al2023-arm64-standard-1.34-v20250801/image_id",
			"/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.34-v20250801/image_id",
		}},
		{"bottlerocket@v1.44.0", []string{
			"/aws/service/bottlerocket/aws-k8s-1.34/x86_64/1.44.0/image_id",
			"/aws/service/bottlerocket/aws-k8s-1.34-nvidia/x86_64/1.44.0/image_id",
			"/aws/service/bottlerocket/aws-k8s-1.34/arm64/1.44.0/image_id",
			"/aws/service/bottlerocket/aws-k8s-1.34-nvidia/arm64/1.44.0/image_id",
		}},
		// The FIPS variant has parameters of its own; the standard ones would
		// launch images without FIPS-validated crypto.
		{"bottlerocket-fips@latest", []string{
			"/aws/service/bottlerocket/aws-k8s-1.34-fips/x86_64/latest/image_id",
			"/aws/service/bottlerocket/aws-k8s-1.34-nvidia-fips/x86_64/latest/image_id",
			"/aws/service/bottlerocket/aws-k8s-1.34-fips/arm64/latest/image_id",
			"/aws/service/bottlerocket/aws-k8s-1.34-nvidia-fips/arm64/latest/image_id",
		}},
		{"windows2019@latest", []string{"/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-1.34/image_id"}},
		{"windows2022@latest", []string{"/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.34/image_id"}},
		{"windows2025@latest", []string{"/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.34/image_id"}},
	}
	for _, tt := range tests {
		t.Run(tt.alias, func(t *testing.T) {
			a, err := awsv1.ParseAlias(tt.alias)
			if err != nil {
				t.Fatal(err)
			}
			params, err := AliasParameters(a, "1.34")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range params {
				got = append(got, p.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// A Windows image is for amd64 Windows nodes of its build only.
	params, err := AliasParameters(awsv1.Alias{Family: awsv1.AMIFamilyWindows2022, Version: "latest"}, "1.34")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "windows", LabelWindowsBuild: "10.0.20348"}, true},
		{map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "linux"}, false},
		{map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "windows", LabelWindowsBuild: "10.0.17763"}, false},
		{map[string]string{v1.LabelArch: "arm64", v1.LabelOS: "windows", LabelWindowsBuild: "10.0.20348"}, false},
	} {
		if got := Matches(params[0].Requirements, tt.labels); got != tt.want {
			t.Errorf("windows2022 image for %v: %v, want %v", tt.labels, got, tt.want)
		}
	}
	if _, err := AliasParameters(awsv1.Alias{Family: awsv1.AMIFamilyAL2, Version: "latest"}, "1.34"); err == nil {
		t.Error("EKS publishes no AL2 images for 1.33 and later: the al2 alias must say it is not supported")
	}
}

func image(id, arch string, created time.Time, edits ...func(*ec2types.Image)) ec2types.Image {
	im := ec2types.Image{ImageId: aws.String(id), Name: aws.String("name-" + id), Architecture: ec2types.ArchitectureValues(arch),
		CreationDate: aws.String(created.Format(time.RFC3339))}
	for _, e := range edits {
		e(&im)
	}
	return im
}

func TestSelectAMIs(t *testing.T) {
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	deprecated := func(im *ec2types.Image) { im.DeprecationTime = aws.String(now.Add(-day).Format(time.RFC3339)) }
	got := SelectAMIs([]CandidateImage{
		{Image: image("ami-old", "x86_64", now.Add(-10*day))},
		{Image: image("ami-new", "x86_64", now.Add(-2*day))},
		{Image: image("ami-newest-deprecated", "x86_64", now.Add(-day), deprecated)},
		{Image: image("ami-arm", "arm64", now.Add(-5*day))},
	}, now)
	var ids []string
	for _, a := range got {
		ids = append(ids, a.ID)
	}
	if diff := cmp.Diff([]string{"ami-new", "ami-arm"}, ids); diff != "" {
		t.Errorf("newest non-deprecated per architecture, newest first (-want +got):\n%s", diff)
	}
	// With only a deprecated image, it is used (and marked).
	got = SelectAMIs([]CandidateImage{{Image: image("ami-d", "x86_64", now.Add(-day), deprecated)}}, now)
	if len(got) != 1 || !got[0].Deprecated {
		t.Errorf("a lone deprecated image: %+v", got)
	}
}

func TestAMIFor(t *testing.T) {
	a1, _ := awsv1.ParseAlias("al2023@latest")
	params, _ := AliasParameters(a1, "1.34")
	amis := []awsv1.AMI{
		{ID: "ami-std-amd64", Requirements: params[0].Requirements},
		{ID: "ami-nvidia-amd64", Requirements: params[1].Requirements},
		{ID: "ami-std-arm64", Requirements: params[2].Requirements},
	}
	for _, tt := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{v1.LabelArch: "amd64"}, "ami-std-amd64"},
		{map[string]string{v1.LabelArch: "arm64"}, "ami-std-arm64"},
		{map[string]string{v1.LabelArch: "amd64", LabelInstanceGPUCount: "1", LabelInstanceGPUManufacturer: "nvidia"}, "ami-nvidia-amd64"},
		{map[string]string{v1.LabelArch: "arm64", LabelInstanceGPUCount: "1", LabelInstanceGPUManufacturer: "nvidia"}, ""},
	} {
		got, _ := AMIFor(amis, tt.labels)
		if got.ID != tt.want {
			t.Errorf("%v: got %q, want %q", tt.labels, got.ID, tt.want)
		}
	}
	gt := []corev1.NodeSelectorRequirement{{Key: LabelInstanceCPU, Operator: corev1.NodeSelectorOpGt, Values: []string{"4"}}}
	if Matches(gt, map[string]string{LabelInstanceCPU: "4"}) || !Matches(gt, map[string]string{LabelInstanceCPU: "8"}) {
		t.Error("Gt must compare integers")
	}
}

func TestNodeClassHash(t *testing.T) {
	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{Role: "r", Tags: map[string]string{"a": "1", "b": "2"},
		SubnetSelectorTerms: []awsv1.SubnetSelectorTerm{{ID: "subnet-1"}}}}
	h := NodeClassHash(nc)
	if NodeClassHash(nc.DeepCopy()) != h {
		t.Fatal("the hash is not stable")
	}
	selectors := nc.DeepCopy()
	selectors.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: "subnet-2"}}
	if NodeClassHash(selectors) != h {
		t.Error("selector terms drift through the status, not the hash")
	}
	tags := nc.DeepCopy()
	tags.Spec.Tags["b"] = "3"
	if NodeClassHash(tags) == h {
		t.Error("a change of tags must change the hash")
	}
}

func TestApplyResolution(t *testing.T) {
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1}}
	ready := Resolution{Subnets: []awsv1.Subnet{{ID: "subnet-1", Zone: "us-east-1a"}}, SecurityGroups: []awsv1.SecurityGroup{{ID: "sg-1"}},
		AMIs: []awsv1.AMI{{ID: "ami-1"}}, InstanceProfile: "profile"}
	if !ApplyResolution(nc, ready) {
		t.Fatal("the first resolution must change the status")
	}
	if !nc.IsReady() {
		t.Fatalf("not Ready: %+v", nc.Status.Conditions)
	}
	if nc.Annotations[AnnotationNodeClassHash] != NodeClassHash(nc) {
		t.Error("the hash annotation is not set")
	}
	if ApplyResolution(nc, ready) {
		t.Error("the same resolution again must change nothing")
	}

	missing := ready
	missing.SecurityGroups = nil
	ApplyResolution(nc, missing)
	c := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady)
	if c.Status != metav1.ConditionFalse || c.Reason != "SecurityGroupsNotFound" {
		t.Errorf("Ready must name the missing security groups: %+v", c)
	}

	failed := ready
	failed.AMIsErr = fmt.Errorf("describing images: %w", &smithy.GenericAPIError{Code: "AccessDenied", Message: "not allowed", Fault: smithy.FaultClient})
	ApplyResolution(nc, failed)
	c = meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady)
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "AccessDenied") {
		t.Errorf("Ready must carry the AMI error: %+v", c)
	}
}

// A read that fails for a while (a timeout, throttling, a fault on AWS's side)
// keeps what was resolved for this generation: the NodeClass stays Ready. A
// refusal, or a failure after the selectors changed, is shown.
func TestApplyResolutionHoldsOverTransientFailures(t *testing.T) {
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1}}
	ready := Resolution{Subnets: []awsv1.Subnet{{ID: "subnet-1", Zone: "us-east-1a"}}, SecurityGroups: []awsv1.SecurityGroup{{ID: "sg-1"}},
		AMIs: []awsv1.AMI{{ID: "ami-1"}}, InstanceProfile: "profile"}
	ApplyResolution(nc, ready)
	for _, err := range []error{
		fmt.Errorf("describing subnets: %w", context.DeadlineExceeded),
		&smithy.GenericAPIError{Code: "RequestLimitExceeded", Fault: smithy.FaultClient},
		&smithy.GenericAPIError{Code: "InternalError", Fault: smithy.FaultServer},
	} {
		failed := ready
		failed.Subnets, failed.SubnetsErr = nil, err
		if ApplyResolution(nc, failed) || !nc.IsReady() || len(nc.Status.Subnets) != 1 {
			t.Errorf("%v: Ready %v, subnets %v; want the last resolution held", err, nc.IsReady(), nc.Status.Subnets)
		}
		if failed.Err() == nil {
			t.Error("the resolution does not report its failed read")
		}
	}
	// The selectors changed: what was resolved before is no longer theirs.
	nc.Generation = 2
	failed := ready
	failed.Subnets, failed.SubnetsErr = nil, context.DeadlineExceeded
	ApplyResolution(nc, failed)
	if nc.IsReady() {
		t.Error("a failed read for new selectors left the NodeClass Ready on the old ones")
	}
}
