package fakeaws

import (
	"testing"
)

// An instance launched as Karpenter launches one carries Karpenter's tags and
// the NodeClass's, not Tailor's hash tag; once registered, the tagging
// controller's Name and karpenter.sh/nodeclaim. It comes from an instant fleet
// without a client token and a launch template of Karpenter's name.
func TestLaunchAsKarpenter(t *testing.T) {
	s := start(t, Options{})
	inv := s.InventorySnapshot()
	cluster := s.Cluster().Name
	var image string
	for _, im := range inv.Images {
		if im.Architecture == "x86_64" {
			image = im.ID
			break
		}
	}
	l := KarpenterLaunch{Cluster: cluster, NodeClaim: "default-abcde", NodePool: "default", NodeClass: "default",
		NodeClassTags: map[string]string{"team": "payments"}, InstanceType: "m5.large", SubnetID: inv.Subnets[0].ID,
		ImageID: image, SecurityGroupIDs: []string{inv.SecurityGroups[0].ID}, InstanceProfile: inv.InstanceProfiles[0].Name}
	launched := must(s.LaunchAsKarpenter(ctx(t), l)).ok(t)
	if launched.Type != "m5.large" || launched.ImageID != image || launched.SubnetID != l.SubnetID || launched.CapacityType != "on-demand" {
		t.Errorf("launched %+v", launched)
	}
	for k, want := range map[string]string{"kubernetes.io/cluster/" + cluster: "owned", "karpenter.sh/nodepool": "default",
		"karpenter.k8s.aws/ec2nodeclass": "default", "eks:eks-cluster-name": cluster, "team": "payments"} {
		if got := launched.Tags[k]; got != want {
			t.Errorf("tag %s = %q, want %q", k, got, want)
		}
	}
	for _, k := range []string{"karpenter.sh/nodeclaim", "Name", "karpenter.k8s.aws/ec2nodeclass-hash"} {
		if v, ok := launched.Tags[k]; ok {
			t.Errorf("an instance not registered yet has tag %s=%q", k, v)
		}
	}
	templates := s.LaunchTemplates()
	if len(templates) != 1 || len(templates[0].Name) < len("karpenter.k8s.aws/") || templates[0].Name[:len("karpenter.k8s.aws/")] != "karpenter.k8s.aws/" {
		t.Errorf("launch templates %+v", templates)
	}

	l.NodeClaim, l.Registered = "default-fghij", true
	registered := must(s.LaunchAsKarpenter(ctx(t), l)).ok(t)
	if registered.Tags["karpenter.sh/nodeclaim"] != "default-fghij" || registered.Tags["Name"] != registered.PrivateDNSName {
		t.Errorf("a registered instance's tags: %v", registered.Tags)
	}
	if registered.ID == launched.ID || s.Calls("ec2:CreateFleet") != 2 {
		t.Errorf("two launches without a client token must make two instances: %s, %s", launched.ID, registered.ID)
	}
}
