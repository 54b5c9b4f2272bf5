package disruption

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Every method runs the same chain, in the same order: a candidate held back by
// several checks is reported for the first of do-not-disrupt, pods that may not be
// evicted, pending pods that need it, and the budget, whichever method it is a
// candidate of; and validation refuses it for the same check.
func TestOneChainForEveryMethod(t *testing.T) {
	setups := map[BlockKind]func(c *cluster, n *scheduling.Node){
		BlockDoNotDisrupt: func(c *cluster, n *scheduling.Node) {
			n.Node.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
		},
		BlockPods: func(c *cluster, n *scheduling.Node) {
			zero := intstr.FromInt32(0)
			c.in.PDBs = []*policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
				Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}}
		},
		BlockNeeded: func(c *cluster, n *scheduling.Node) {
			c.in.Cluster.Pods = []*corev1.Pod{pod("500m", "256Mi", func(p *corev1.Pod) {
				p.Labels = map[string]string{"app": "pending"}
				p.Spec.NodeSelector = map[string]string{v1.LabelHostname: n.Node.Name}
			})}
		},
		BlockBudget: func(c *cluster, n *scheduling.Node) { c.pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "0"}} },
	}
	order := []BlockKind{BlockDoNotDisrupt, BlockPods, BlockNeeded, BlockBudget}
	methods := map[v1.DisruptionReason]func(c *cluster) *scheduling.Node{
		v1.DisruptionReasonEmpty: func(c *cluster) *scheduling.Node {
			return c.node(3, v1.CapacityTypeOnDemand, pod("100m", "64Mi", daemon))
		},
		v1.DisruptionReasonUnderutilized: func(c *cluster) *scheduling.Node {
			return c.node(15, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
		},
		v1.DisruptionReasonDrifted: func(c *cluster) *scheduling.Node {
			n := c.node(3, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
			c.claim(n).Annotations[v1.NodePoolHashAnnotationKey] = "h0"
			return n
		},
	}
	for reason, build := range methods {
		for first := range order {
			want := order[first]
			// Drift replaces the node: pods that need it do not hold drift back.
			if reason == v1.DisruptionReasonDrifted && want == BlockNeeded {
				continue
			}
			t.Run(string(reason)+"/"+string(want), func(t *testing.T) {
				c := newCluster(t)
				n := build(c)
				cmd := Decide(c.in).Command
				if cmd == nil || cmd.Reason != reason {
					t.Fatalf("unblocked, want a %s command, got %v", reason, cmd)
				}
				// This check and every later one hold the node back.
				for _, k := range order[first:] {
					setups[k](c, n)
				}
				dec := Decide(c.in)
				if dec.Command != nil {
					t.Fatalf("want nothing, got %s", dec.Command)
				}
				var got BlockKind
				for _, b := range dec.Blocked {
					if b.Node == n.Node.Name {
						got = b.Kind
					}
				}
				if got != want {
					t.Errorf("blocked by %q, want %q (the first check in the chain)", got, want)
				}
				if _, err := Validate(c.in, cmd); err == nil {
					t.Errorf("validation let the command through a %s block", want)
				}
			})
		}
	}
}
