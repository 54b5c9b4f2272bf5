package scheduling_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// Karpenter's examples/workloads/spread-hostname-zone.yaml: 50 pods spread over
// hostnames (maxSkew 2) and zones (maxSkew 5) at once. Either spread alone places
// every pod in one plan, and so must both together: the kube-scheduler places
// them all, a round at a time, so a plan that leaves pods out only delays them.
func TestHostnameAndZoneSpreadTogether(t *testing.T) {
	sel := map[string]string{"app": "host-zone-spread"}
	for _, n := range []int{15, 16, 50} {
		in := &Input{Pods: pods(n, "spread", "1", "256M", withLabels("app", "host-zone-spread"),
			withSpread(v1.LabelHostname, 2, corev1.DoNotSchedule, sel),
			withSpread(v1.LabelZone, 5, corev1.DoNotSchedule, sel)),
			NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(20))}}
		plan := solve(t, in)
		if len(plan.Unschedulable) != 0 {
			t.Errorf("%d pods: %d unschedulable, e.g. %v", n, len(plan.Unschedulable), plan.Unschedulable[0])
		}
		perZone, perNode := map[string]int{}, map[string]int{}
		for _, node := range plan.NewNodes {
			perZone[node.Offering.Zone] += len(node.Pods)
			perNode[node.Name] = len(node.Pods)
		}
		for name, count := range perNode {
			if count > 2 {
				t.Errorf("%d pods: node %s has %d of them, hostname maxSkew is 2", n, name, count)
			}
		}
		low, high := n, 0
		for _, zone := range []string{"zone-a", "zone-b", "zone-c"} {
			low, high = min(low, perZone[zone]), max(high, perZone[zone])
		}
		if high-low > 5 {
			t.Errorf("%d pods: per zone %v, zone maxSkew is 5", n, perZone)
		}
		t.Logf("%d pods: per zone %v, %d nodes", n, perZone, len(plan.NewNodes))
	}
}
