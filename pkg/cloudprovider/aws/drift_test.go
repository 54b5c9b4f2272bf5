package aws

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

func TestDrifted(t *testing.T) {
	amd64 := []corev1.NodeSelectorRequirement{{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{Role: "node"}, Status: awsv1.EC2NodeClassStatus{
		AMIs:           []awsv1.AMI{{ID: "ami-new", Requirements: amd64}},
		Subnets:        []awsv1.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}},
		SecurityGroups: []awsv1.SecurityGroup{{ID: "sg-1"}, {ID: "sg-2"}},
	}}
	hash := NodeClassHash(nc)
	current := InstanceFacts{ImageID: "ami-new", SubnetID: "subnet-a", SecurityGroups: []string{"sg-2", "sg-1"},
		Tags: map[string]string{TagNodeClassHash: hash}, Labels: map[string]string{v1.LabelArch: "amd64"}}
	with := func(edit func(*InstanceFacts)) InstanceFacts {
		f := current
		edit(&f)
		return f
	}
	claim := claimWith()
	annotated := claimWith()
	annotated.Annotations = map[string]string{AnnotationNodeClassHash: "12345", AnnotationNodeClassHashVersion: NodeClassHashVersion}
	oldVersion := claimWith()
	oldVersion.Annotations = map[string]string{AnnotationNodeClassHash: "12345", AnnotationNodeClassHashVersion: "v0"}
	unresolved := nc.DeepCopy()
	unresolved.Status = awsv1.EC2NodeClassStatus{}

	tests := []struct {
		name  string
		nc    *awsv1.EC2NodeClass
		claim *v1.NodeClaim
		inst  InstanceFacts
		want  cloudprovider.DriftReason
	}{
		{"matches", nc, claim, current, ""},
		{"older AMI", nc, claim, with(func(f *InstanceFacts) { f.ImageID = "ami-old" }), DriftAMI},
		{"subnet no longer selected", nc, claim, with(func(f *InstanceFacts) { f.SubnetID = "subnet-z" }), DriftSubnet},
		{"security groups differ", nc, claim, with(func(f *InstanceFacts) { f.SecurityGroups = []string{"sg-1"} }), DriftSecurityGroup},
		{"hash on the instance differs", nc, claim, with(func(f *InstanceFacts) { f.Tags = map[string]string{TagNodeClassHash: "1"} }), DriftNodeClass},
		{"hash annotation on the claim differs", nc, annotated, current, DriftNodeClass},
		{"another hash version is not compared", nc, oldVersion, with(func(f *InstanceFacts) { f.Tags = nil }), ""},
		{"an unresolved NodeClass drifts nothing", unresolved, claim, with(func(f *InstanceFacts) { f.ImageID = "ami-old" }), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Drifted(tt.nc, tt.claim, tt.inst); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
