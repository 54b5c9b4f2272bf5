package scheduling_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

func TestSolveSmoke(t *testing.T) {
	in := &Input{
		Pods:      pods(10, "web", "1", "1Gi"),
		NodePools: []*NodePool{{NodePool: makeNodePool("default"), InstanceTypes: schedtest.SyntheticTypes(40)}},
	}
	plan := solve(t, in)
	if len(plan.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %v", plan.Unschedulable)
	}
	t.Logf("%d nodes, cost %.4f", len(plan.NewNodes), plan.Cost())
	for _, n := range plan.NewNodes {
		t.Logf("%s %s %s/%s $%.4f pods=%d options=%d", n.Name, n.InstanceType.Name, n.Offering.Zone, n.Offering.CapacityType, n.Offering.Price, len(n.Pods), len(n.InstanceTypes))
	}
	_ = strings.Join
	_ = corev1.ResourceCPU
	_ = v1.LabelZone
}
