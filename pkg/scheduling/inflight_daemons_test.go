package scheduling_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// A node in flight (its NodeClaim launched, its Node not registered) has no
// DaemonSet pods bound yet, but will have them: the room they take is not free.
// Counted free, a re-plan put pods there that found no room when the node came
// up, and each got a claim of its own (issue 26 §3: 150m and 164Mi a node on the
// fidelity suite, one or two Online Boutique pods per node in flight).
func TestDaemonSetsTakeRoomOnNodesInFlight(t *testing.T) {
	types := schedtest.SyntheticTypes(4)
	daemon := makePod("agent", "500m", "100Mi")
	tainted := makePod("gpu-agent", "500m", "100Mi", withNodeSelector("accelerator", "gpu"))
	inFlight := func(pods ...*corev1.Pod) *Node {
		n := existingNode("nodeclaim/a", "2", "8Gi", nil, pods...)
		n.Launching = true
		return n
	}
	t.Run("charged", func(t *testing.T) {
		plan := solve(t, &Input{Pods: pods(2, "web", "1", "1Gi"), Nodes: []*Node{inFlight()},
			DaemonSets: []*corev1.Pod{daemon, tainted}, NodePools: []*NodePool{pool(makeNodePool("default"), types)}})
		if len(plan.Bindings) != 1 || len(plan.NewNodes) != 1 {
			t.Errorf("%d pods on the node in flight, %d new nodes; want 1 and 1: the agent takes 500m of its 2 cpu",
				len(plan.Bindings), len(plan.NewNodes))
		}
	})
	t.Run("not twice", func(t *testing.T) {
		bound := makePod("agent-x", "500m", "100Mi")
		bound.Namespace = daemon.Namespace
		bound.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: daemon.Name}}
		plan := solve(t, &Input{Pods: pods(1, "web", "1500m", "1Gi"), Nodes: []*Node{inFlight(bound)},
			DaemonSets: []*corev1.Pod{daemon}, NodePools: []*NodePool{pool(makeNodePool("default"), types)}})
		if len(plan.Bindings) != 1 {
			t.Errorf("%d pods on the node in flight, want 1: its agent is already counted", len(plan.Bindings))
		}
	})
	t.Run("existing nodes count what is bound", func(t *testing.T) {
		plan := solve(t, &Input{Pods: pods(2, "web", "1", "1Gi"), Nodes: []*Node{existingNode("up", "2", "8Gi", nil)},
			DaemonSets: []*corev1.Pod{daemon}, NodePools: []*NodePool{pool(makeNodePool("default"), types)}})
		if len(plan.Bindings) != 2 {
			t.Errorf("%d pods on the registered node, want 2: its DaemonSet pods are whatever is bound", len(plan.Bindings))
		}
	})
}
