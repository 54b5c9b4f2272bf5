package disruption

import (
	"math"
	"testing"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Consolidation counts what each node costs besides its instance: two 2-cpu nodes
// merge into one 4-cpu node of the same instance price when each node also pays
// a per-node cost, since one node pays it once. Without the cost nothing is saved.
func TestConsolidationCountsNodeCost(t *testing.T) {
	for _, perNode := range []float64{0, 0.05} {
		c := newCluster(t)
		c.in.Cluster.NodePools[0].NodeCost = scheduling.NodeCost{PerNode: perNode}
		c.node(1, v1.CapacityTypeOnDemand, pod("1500m", "1Gi"))
		c.node(1, v1.CapacityTypeOnDemand, pod("1500m", "1Gi"))
		cmd := Decide(c.in).Command
		if perNode == 0 {
			if cmd != nil {
				t.Errorf("without per-node cost: %s of %v, saving $%.4f/h; want none (one 4-cpu node costs what two 2-cpu do)", cmd.Kind, names(cmd.Candidates), cmd.Savings)
			}
			continue
		}
		if cmd == nil || len(cmd.Candidates) != 2 || len(cmd.Replacements) != 1 {
			t.Fatalf("with a $%.2f/h per-node cost: %+v, want both nodes onto one", perNode, cmd)
		}
		if r := cmd.Replacements[0]; r.NodeCost.PerNode != perNode || math.Abs(cmd.Savings-perNode) > 1e-9 {
			t.Errorf("replacement node cost %+v, savings $%.4f/h; want the one node's $%.2f/h saved", r.NodeCost, cmd.Savings, perNode)
		}
	}
}

// A single node is replaced only when the replacement, which pays the per-node
// cost too, saves the minimum of the whole: a 4-cpu node holding a 2.5-cpu pod
// would go to a 3-cpu node, 25% cheaper by instance, but with a per-node cost
// three times the instance price's saving the move saves under 10%.
func TestSingleReplacementPaysNodeCost(t *testing.T) {
	for _, tc := range []struct {
		perNode float64
		replace bool
	}{{0, true}, {0.2, false}} {
		c := newCluster(t)
		c.in.Cluster.NodePools[0].NodeCost = scheduling.NodeCost{PerNode: tc.perNode}
		c.node(3, v1.CapacityTypeOnDemand, pod("2500m", "1Gi"))
		cmd := Decide(c.in).Command
		if got := cmd != nil && len(cmd.Replacements) == 1; got != tc.replace {
			t.Errorf("per-node cost $%.2f/h: command %+v, want a replacement: %v", tc.perNode, cmd, tc.replace)
		}
	}
}
