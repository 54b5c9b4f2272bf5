package scheduling_test

import (
	"math"
	"testing"

	v1 "github.com/nodetailor/tailor/api/v1"
	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// A node costs its instance and what every node pays besides (volumes, a public
// address, the operator's per-node cost): the engine minimises the sum, so a
// per-node cost makes fewer, larger nodes cheaper. Issue 26's example: 100 pods
// of 1 cpu and 1Gi on spot got 100 t3a.small, each paying an AL2023 node's 20Gi
// gp3 root volume and public IPv4 address again.
func TestNodeCostMakesFewerLargerNodes(t *testing.T) {
	spot := makeNodePool("default", requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeSpot))
	types := awsCatalog(t)
	web := pods(100, "web", "1", "1Gi")
	perNode := NodeCost{Volumes: 20 * 0.08 / 730, Addresses: 0.005}

	listPrice := solve(t, &Input{Pods: web, NodePools: []*NodePool{pool(spot, types)}})
	costed := &NodePool{NodePool: spot, InstanceTypes: types, NodeCost: perNode}
	real := solve(t, &Input{Pods: web, NodePools: []*NodePool{costed}})

	// The list-price plan as billed: each of its nodes pays the per-node cost too.
	billed := listPrice.Cost() + float64(len(listPrice.NewNodes))*perNode.Total()
	t.Logf("list price: %d nodes, $%.4f/h instances, $%.4f/h billed; per-node costs counted: %d nodes, $%.4f/h (%+v)",
		len(listPrice.NewNodes), listPrice.Cost(), billed, len(real.NewNodes), real.Cost(), real.Costs())
	if len(real.NewNodes) >= len(listPrice.NewNodes) {
		t.Errorf("with per-node costs the plan has %d nodes, the list-price plan %d: want fewer", len(real.NewNodes), len(listPrice.NewNodes))
	}
	if real.Cost() >= billed-1e-9 {
		t.Errorf("with per-node costs the plan costs $%.4f/h, no less than the list-price plan billed ($%.4f/h)", real.Cost(), billed)
	}
	split := real.Costs()
	n := float64(len(real.NewNodes))
	if math.Abs(split.Volumes-n*perNode.Volumes) > 1e-9 || math.Abs(split.Addresses-n*perNode.Addresses) > 1e-9 || split.PerNode != 0 {
		t.Errorf("split %+v, want every one of the %d nodes paying %+v", split, len(real.NewNodes), perNode)
	}
	if math.Abs(split.Total()-real.Cost()) > 1e-9 {
		t.Errorf("split totals $%.6f/h, Cost $%.6f/h", split.Total(), real.Cost())
	}
	for _, nn := range real.NewNodes {
		if nn.NodeCost != perNode || math.Abs(nn.Price()-nn.Offering.Price-perNode.Total()) > 1e-12 {
			t.Fatalf("node %s: node cost %+v, price %.6f for offering %.6f", nn.Name, nn.NodeCost, nn.Price(), nn.Offering.Price)
		}
	}
}

// Among NodePools of equal weight the cheaper one takes the pods, counting each
// pool's per-node cost: a pool whose nodes carry a licence loses to one without,
// though its instances are cheaper.
func TestNodeCostChoosesPool(t *testing.T) {
	types := schedtest.SyntheticTypes(10)
	cheap := makeNodePool("a-licensed") // sorts first by name among equal weights
	plain := makeNodePool("b-plain")
	in := &Input{Pods: pods(10, "web", "100m", "100Mi"), NodePools: []*NodePool{
		{NodePool: cheap, InstanceTypes: types, NodeCost: NodeCost{PerNode: 10}},
		{NodePool: plain, InstanceTypes: types},
	}}
	plan := solve(t, in)
	for _, n := range plan.NewNodes {
		if n.NodePool != "b-plain" {
			t.Errorf("node %s from %s, whose nodes cost $10/h more", n.Name, n.NodePool)
		}
	}
}

// The lower bound counts the per-node cost: every node pays it.
func TestLowerBoundCountsNodeCost(t *testing.T) {
	types := schedtest.SyntheticTypes(10)
	np := makeNodePool("default")
	web := pods(40, "web", "1", "1Gi")
	bare := []*NodePool{pool(np, types)}
	costed := []*NodePool{{NodePool: np, InstanceTypes: types, NodeCost: NodeCost{PerNode: 1}}}
	plan := solve(t, &Input{Pods: web, NodePools: costed})
	without, with := LowerBound(bare, plan), LowerBound(costed, plan)
	if with <= without {
		t.Errorf("lower bound with a $1/h per-node cost $%.4f/h, without $%.4f/h", with, without)
	}
	if with > plan.Cost()+1e-9 {
		t.Errorf("lower bound $%.4f/h above the plan's $%.4f/h", with, plan.Cost())
	}
}
