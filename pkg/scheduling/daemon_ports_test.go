package scheduling_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// A DaemonSet's host port is taken only on the nodes it runs on: the instance
// types its node affinity and selector admit, in NodePools whose taints it
// tolerates. A pod that wants the same port goes to a new node of another type,
// and that node's options leave out the types the DaemonSet would run on.
func TestDaemonSetHostPortOnlyWhereItRuns(t *testing.T) {
	types := schedtest.SyntheticTypes(4) // fake-it-N has example.com/cpu=N+1
	exporters := func() []*corev1.Pod { return pods(2, "exporter", "100m", "100Mi", withHostPort(9100)) }
	onSmall := makePod("agent", "100m", "100Mi", withHostPort(9100), withNodeSelector("example.com/cpu", "1"))
	onAll := makePod("agent", "100m", "100Mi", withHostPort(9100))
	tolerating := makePod("agent", "100m", "100Mi", withHostPort(9100), withToleration("dedicated", "infra", corev1.TaintEffectNoSchedule))

	t.Run("selector leaves other types free", func(t *testing.T) {
		plan := solve(t, &Input{Pods: exporters(), DaemonSets: []*corev1.Pod{onSmall},
			NodePools: []*NodePool{pool(makeNodePool("default"), types)}})
		if len(plan.Unschedulable) != 0 {
			t.Fatalf("unschedulable: %s; want the exporters on types the agent does not run on", plan.Unschedulable[0].Reason)
		}
		if len(plan.NewNodes) != 2 {
			t.Errorf("%d new nodes, want 2 (the exporters' ports conflict with each other)", len(plan.NewNodes))
		}
		for _, n := range plan.NewNodes {
			for _, it := range n.InstanceTypes {
				if it.Name == "fake-it-0" {
					t.Errorf("node %s keeps fake-it-0 among its options, where the agent takes port 9100", n.InstanceType.Name)
				}
			}
		}
	})
	t.Run("node affinity leaves other types free", func(t *testing.T) {
		onSmallByAffinity := makePod("agent", "100m", "100Mi", withHostPort(9100), withNodeAffinity([]corev1.NodeSelectorRequirement{
			{Key: v1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"fake-it-0", "fake-it-1"}}}))
		plan := solve(t, &Input{Pods: exporters(), DaemonSets: []*corev1.Pod{onSmallByAffinity},
			NodePools: []*NodePool{pool(makeNodePool("default"), types)}})
		if len(plan.Unschedulable) != 0 {
			t.Fatalf("unschedulable: %s", plan.Unschedulable[0].Reason)
		}
		for _, n := range plan.NewNodes {
			for _, it := range n.InstanceTypes {
				if it.Name == "fake-it-0" || it.Name == "fake-it-1" {
					t.Errorf("node keeps %s among its options, where the agent takes port 9100", it.Name)
				}
			}
		}
	})
	t.Run("on every type the port is taken", func(t *testing.T) {
		plan := solve(t, &Input{Pods: exporters(), DaemonSets: []*corev1.Pod{onAll},
			NodePools: []*NodePool{pool(makeNodePool("default"), types)}})
		if len(plan.NewNodes) != 0 || len(plan.Unschedulable) != 2 {
			t.Errorf("%d new nodes, %d unschedulable; want none placed", len(plan.NewNodes), len(plan.Unschedulable))
		}
	})
	t.Run("a pool whose taint it does not tolerate", func(t *testing.T) {
		tainted := pool(makeNodePool("infra", taint("dedicated", "infra", corev1.TaintEffectNoSchedule)), types)
		ex := exporters()
		for _, p := range ex {
			withToleration("dedicated", "infra", corev1.TaintEffectNoSchedule)(p)
		}
		plan := solve(t, &Input{Pods: ex, DaemonSets: []*corev1.Pod{onAll}, NodePools: []*NodePool{tainted}})
		if len(plan.Unschedulable) != 0 {
			t.Errorf("unschedulable: %s; the agent does not run on the tainted pool's nodes", plan.Unschedulable[0].Reason)
		}
		plan = solve(t, &Input{Pods: exporters(), DaemonSets: []*corev1.Pod{tolerating}, NodePools: []*NodePool{tainted}})
		if len(plan.NewNodes) != 0 {
			t.Errorf("%d new nodes; the exporters do not tolerate the pool's taint", len(plan.NewNodes))
		}
	})
	// Pods without the port still share a node with the agent's type.
	t.Run("other pods keep every type", func(t *testing.T) {
		plan := solve(t, &Input{Pods: pods(1, "web", "100m", "100Mi"), DaemonSets: []*corev1.Pod{onSmall},
			NodePools: []*NodePool{pool(makeNodePool("default"), types)}})
		if len(plan.NewNodes) != 1 || plan.NewNodes[0].InstanceType.Name != "fake-it-0" {
			t.Errorf("new nodes %d, want one fake-it-0", len(plan.NewNodes))
		}
	})
}
