package scheduling_test

import (
	"testing"

	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// Pods that only size nodes (Input.Demand) make the plan's nodes those of a plan of
// the whole: 20 pods of 1 cpu alone go on two nodes of 11 cpu (ten each); as part
// of 30, on nodes of 16 cpu (fifteen each) as the plan of all 30 has them, and no
// demand pod is placed.
func TestDemandSizesNewNodes(t *testing.T) {
	pool := &NodePool{NodePool: makeNodePool("default"), InstanceTypes: schedtest.SyntheticTypes(20)}
	most := func(plan *Plan) int {
		n := 0
		for _, node := range plan.NewNodes {
			n = max(n, len(node.Pods))
		}
		return n
	}
	part := pods(20, "web", "1", "1Gi")
	alone, err := Solve(&Input{Pods: part, NodePools: []*NodePool{pool}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := Solve(&Input{Pods: pods(30, "web", "1", "1Gi"), NodePools: []*NodePool{pool}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sized, err := Solve(&Input{Pods: part, NodePools: []*NodePool{pool}, Demand: []Demand{{Pod: part[0], Count: 10}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if most(alone) != 10 || most(whole) != 15 {
		t.Fatalf("alone the nodes hold up to %d pods, for the whole %d; want 10 and 15 (the case shows nothing)", most(alone), most(whole))
	}
	if most(sized) != 15 {
		t.Errorf("sized for the whole, the nodes hold up to %d pods, want 15", most(sized))
	}
	placed := len(sized.Bindings) + len(sized.Unschedulable)
	for _, n := range sized.NewNodes {
		placed += len(n.Pods)
	}
	if placed != 20 {
		t.Errorf("%d pods in the plan, want the 20 given (demand pods are not placed)", placed)
	}
	// A demand of a shape no pod to place has is ignored.
	other, err := Solve(&Input{Pods: part, NodePools: []*NodePool{pool}, Demand: []Demand{{Pod: makePod("big", "3", "1Gi"), Count: 100}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if most(other) != 10 {
		t.Errorf("a demand of another shape changed the nodes: up to %d pods, want 10", most(other))
	}
}
