package disruption

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// A node that is not up — launching, registered but never initialized, or NotReady —
// is no candidate and no place for another node's pods, and the rest of the cluster
// is still consolidated around it. Each case has an underutilized 16-cpu node whose
// pod fits only on the empty 32-cpu node that is not up: the pod must be planned
// onto a new, cheaper node, never onto that one.
func TestNodesNotUpAreNeitherCandidatesNorDestinations(t *testing.T) {
	for name, notUp := range map[string]func(c *cluster) string{
		"registered, never initialized, not ready": func(c *cluster) string {
			n := c.node(31, v1.CapacityTypeOnDemand)
			c.uninitialize(n)
			setReady(n, corev1.ConditionFalse)
			return n.Node.Name
		},
		"registered, ready, not initialized (startup taint)": func(c *cluster) string {
			n := c.node(31, v1.CapacityTypeOnDemand)
			c.uninitialize(n)
			return n.Node.Name
		},
		"initialized, then NotReady": func(c *cluster) string {
			n := c.node(31, v1.CapacityTypeOnDemand)
			setReady(n, corev1.ConditionFalse)
			return n.Node.Name
		},
		"initialized, then Unknown (kubelet silent)": func(c *cluster) string {
			n := c.node(31, v1.CapacityTypeOnDemand)
			setReady(n, corev1.ConditionUnknown)
			return n.Node.Name
		},
		"launching, not registered": func(c *cluster) string {
			it := c.types[31]
			nc := testobj.NodeClaim("launching", testobj.ClaimLabels(v1.NodePoolLabelKey, "default"),
				testobj.ClaimRequirement(v1.LabelInstanceType, v1.NodeSelectorOpIn, it.Name),
				testobj.ClaimRequirement(v1.LabelZone, v1.NodeSelectorOpIn, "zone-a"),
				testobj.ClaimRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeOnDemand),
				testobj.ClaimRequirement(v1.LabelArch, v1.NodeSelectorOpIn, "amd64"),
				testobj.ClaimRequirement(v1.LabelOS, v1.NodeSelectorOpIn, "linux"))
			nc.Status.Allocatable, nc.Status.Capacity = it.Allocatable(), it.Capacity
			c.in.Claims = append(c.in.Claims, nc)
			c.in.Cluster.Nodes = append(c.in.Cluster.Nodes, &scheduling.Node{Node: state.LaunchingNode(nc), Launching: true})
			return "nodeclaim/launching"
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t)
			busy := c.node(15, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
			other := notUp(c)
			if got := c.in.Cluster.Nodes[len(c.in.Cluster.Nodes)-1].Node.Status.Allocatable[corev1.ResourceCPU]; got.Cmp(resource.MustParse("1")) < 0 {
				t.Fatalf("the node that is not up must have room for the pod, has %s cpu", got.String())
			}
			dec := Decide(c.in)
			cmd := dec.Command
			if cmd == nil {
				t.Fatalf("%s must not hold back the consolidation of %s (blocked: %+v)", other, busy.Node.Name, dec.Blocked)
			}
			if got := names(cmd.Candidates); !slices.Equal(got, []string{busy.Node.Name}) || cmd.Reason != v1.DisruptionReasonUnderutilized {
				t.Fatalf("want %s consolidated, got %s", busy.Node.Name, cmd)
			}
			if len(cmd.Replacements) != 1 {
				t.Fatalf("the pod may only go to a new node, not to %s: got %s", other, cmd)
			}
			if dec.Eligible[v1.DisruptionReasonEmpty] != 0 || blockedReason(dec, other) != "" {
				t.Errorf("%s is no candidate: eligible empty %d, blocked %q", other, dec.Eligible[v1.DisruptionReasonEmpty], blockedReason(dec, other))
			}
			if _, err := Validate(c.in, cmd); err != nil {
				t.Errorf("the command must hold on the same cluster: %v", err)
			}
		})
	}
}

// A NotReady node counts against its NodePool's budget, as Karpenter documents
// (allowed = budget - deleting - NotReady); a node never initialized does not count.
func TestNotReadyNodesCountAgainstBudget(t *testing.T) {
	c := newCluster(t)
	c.pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "1"}}
	empty := c.node(3, v1.CapacityTypeOnDemand)
	sick := c.node(3, v1.CapacityTypeOnDemand, pod("3", "1Gi"))
	setReady(sick, corev1.ConditionFalse)
	dec := Decide(c.in)
	if dec.Command != nil {
		t.Fatalf("a NotReady node takes the budget of 1: want nothing, got %s", dec.Command)
	}
	if got := dec.Allowed["default"][v1.DisruptionReasonEmpty]; got != 0 {
		t.Errorf("allowed = %d, want 0", got)
	}
	if got := dec.Disrupting["default"]; got != 1 {
		t.Errorf("nodes consuming the budget = %d, want 1 (the NotReady one)", got)
	}
	setReady(sick, corev1.ConditionTrue)
	c.uninitialize(sick)
	if got := Decide(c.in).Disrupting["default"]; got != 0 {
		t.Errorf("nodes consuming the budget = %d, want 0: a node not initialized and Ready takes none", got)
	}
	if cmd := Decide(c.in).Command; cmd == nil || !slices.Equal(names(cmd.Candidates), []string{empty.Node.Name}) {
		t.Fatalf("a node not initialized takes no budget: want %s deleted, got %v", empty.Node.Name, cmd)
	}
}

// Claims of a NodeClass the running provider does not launch from (Karpenter's own,
// during a cut-over) are never disrupted, by any method, nor counted in budgets;
// their nodes are still room for the pods of Tailor's nodes.
func TestForeignClaimsAreNeverCandidates(t *testing.T) {
	c := newCluster(t)
	ours := &v1.NodeClassReference{Group: "tailor.sh", Kind: "SimNodeClass", Name: "default"}
	theirs := &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	c.in.Manages = func(nc *v1.NodeClaim) bool { return nc.Spec.NodeClassRef != nil && *nc.Spec.NodeClassRef == *ours }
	c.pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "1"}}
	foreign := map[string]*scheduling.Node{
		"empty":         c.node(3, v1.CapacityTypeOnDemand),
		"underutilized": c.node(15, v1.CapacityTypeOnDemand, pod("1", "1Gi")),
		"drifted":       c.node(3, v1.CapacityTypeOnDemand, pod("3", "1Gi")),
		"expiring":      c.node(3, v1.CapacityTypeOnDemand, pod("3", "1Gi")),
		// Deleting, it would take the budget of 1 were it counted.
		"deleting": c.node(3, v1.CapacityTypeOnDemand, pod("3", "1Gi")),
	}
	for kind, n := range foreign {
		nc := c.claim(n)
		nc.Spec.NodeClassRef = theirs
		switch kind {
		case "drifted":
			nc.Annotations[v1.NodePoolHashAnnotationKey] = "h0"
		case "expiring":
			nc.Spec.ExpireAfter = v1.MustParseNillableDuration("1h")
		case "deleting":
			nc.DeletionTimestamp = &metav1.Time{Time: now}
		}
	}
	dec := Decide(c.in)
	if dec.Command != nil {
		t.Fatalf("foreign claims must never be disrupted, got %s", dec.Command)
	}
	for r, n := range dec.Eligible {
		if n != 0 {
			t.Errorf("eligible %s = %d, want 0: foreign claims are no candidates", r, n)
		}
	}
	if len(dec.Blocked) != 0 {
		t.Errorf("foreign claims are not even blocked candidates: %+v", dec.Blocked)
	}
	// One of ours, underutilized: its pod may go to the empty foreign node, and the
	// deleting foreign claim leaves the budget alone.
	mine := c.node(7, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
	c.claim(mine).Spec.NodeClassRef = ours
	cmd := Decide(c.in).Command
	if cmd == nil || !slices.Equal(names(cmd.Candidates), []string{mine.Node.Name}) || cmd.Decision() != "delete" {
		t.Fatalf("want %s deleted, its pod moving to a foreign node with room, got %v", mine.Node.Name, cmd)
	}
}
