package aws

import (
	"slices"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

// Drift reasons, as Karpenter reports them.
const (
	DriftAMI           cloudprovider.DriftReason = "AMIDrift"
	DriftSubnet        cloudprovider.DriftReason = "SubnetDrift"
	DriftSecurityGroup cloudprovider.DriftReason = "SecurityGroupDrift"
	DriftNodeClass     cloudprovider.DriftReason = "NodeClassDrift"
)

// InstanceFacts are what drift compares of a running instance.
type InstanceFacts struct {
	ImageID        string
	SubnetID       string
	SecurityGroups []string
	// Tags hold the NodeClass hash the instance launched with.
	Tags map[string]string
	// Labels are its node's labels (instance type, arch, GPUs), to find the AMI its
	// type would get now.
	Labels map[string]string
}

// Drifted reports why an instance no longer matches its NodeClass, checked in
// Karpenter's order: the NodeClass's own settings (hash), then its AMI, subnet and
// security groups as the NodeClass resolves them now; "" when it matches. A
// NodeClass whose status is not resolved yet reports nothing, so a NodeClass
// being reconciled never drifts every node.
func Drifted(nc *awsv1.EC2NodeClass, claim *v1.NodeClaim, inst InstanceFacts) cloudprovider.DriftReason {
	if reason := hashDrift(nc, claim, inst); reason != "" {
		return reason
	}
	if len(nc.Status.AMIs) > 0 && inst.ImageID != "" {
		want, ok := AMIFor(nc.Status.AMIs, inst.Labels)
		if !ok || want.ID != inst.ImageID {
			return DriftAMI
		}
	}
	if len(nc.Status.Subnets) > 0 && inst.SubnetID != "" &&
		!slices.ContainsFunc(nc.Status.Subnets, func(s awsv1.Subnet) bool { return s.ID == inst.SubnetID }) {
		return DriftSubnet
	}
	if len(nc.Status.SecurityGroups) > 0 {
		want := make([]string, 0, len(nc.Status.SecurityGroups))
		for _, g := range nc.Status.SecurityGroups {
			want = append(want, g.ID)
		}
		have := slices.Clone(inst.SecurityGroups)
		slices.Sort(want)
		slices.Sort(have)
		if !slices.Equal(slices.Compact(want), slices.Compact(have)) {
			return DriftSecurityGroup
		}
	}
	return ""
}

// hashDrift compares the hash the claim (or, failing that, its instance) launched
// with to the NodeClass's, when both were computed by the same hash version.
func hashDrift(nc *awsv1.EC2NodeClass, claim *v1.NodeClaim, inst InstanceFacts) cloudprovider.DriftReason {
	current := NodeClassHash(nc)
	if claim.Annotations[AnnotationNodeClassHashVersion] == NodeClassHashVersion {
		if h := claim.Annotations[AnnotationNodeClassHash]; h != "" && h != current {
			return DriftNodeClass
		}
		return ""
	}
	if h := inst.Tags[TagNodeClassHash]; h != "" && h != current {
		return DriftNodeClass
	}
	return ""
}
