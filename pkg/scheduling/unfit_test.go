package scheduling_test

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// Pods that fit no instance type of any NodePool get no node, and size none: the
// plan for the other pods is the plan they would get alone. (Counted in a pool's
// demand, 50 pods asking for more cpu than any type has made every type look
// useless to the ranking, and each of 100 small pods that share one node got a
// node of its own.)
func TestUnfitPodsSizeNothing(t *testing.T) {
	onDemand := makeNodePool("default", requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeOnDemand))
	cases := []struct {
		name  string
		pods  []*corev1.Pod
		types []*InstanceType
	}{
		{"synthetic", pods(100, "web", "100m", "100Mi"), schedtest.SyntheticTypes(40)},
		{"aws catalog", pods(100, "inflate", "1", "2Gi"), awsCatalog(t)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			alone := solve(t, &Input{Pods: tc.pods, NodePools: []*NodePool{pool(onDemand, tc.types)}})
			unfit := pods(50, "huge", "1000", "1Gi")
			with := solve(t, &Input{Pods: append(append([]*corev1.Pod{}, tc.pods...), unfit...), NodePools: []*NodePool{pool(onDemand, tc.types)}})
			t.Logf("alone: %d nodes $%.4f/h; with 50 unfit pods: %d nodes $%.4f/h, %d unschedulable",
				len(alone.NewNodes), alone.Cost(), len(with.NewNodes), with.Cost(), len(with.Unschedulable))
			if len(with.Unschedulable) != 50 {
				t.Errorf("%d unschedulable, want the 50 unfit pods", len(with.Unschedulable))
			}
			if len(with.NewNodes) != len(alone.NewNodes) || math.Abs(with.Cost()-alone.Cost()) > 1e-9 {
				t.Errorf("with 50 unfit pods the plan has %d nodes at $%.4f/h; alone %d at $%.4f/h", len(with.NewNodes), with.Cost(), len(alone.NewNodes), alone.Cost())
			}
		})
	}
}

// A pod that fits only a lighter NodePool's types sizes that pool's nodes, not
// those of the heavier pool its labels would pick first.
func TestUnfitInHeavierPoolSizesTheOther(t *testing.T) {
	small := pool(makeNodePool("small", weight(10)), schedtest.SyntheticTypes(4))
	large := pool(makeNodePool("large"), schedtest.SyntheticTypes(40))
	web := pods(100, "web", "100m", "100Mi", withNodeSelector(v1.NodePoolLabelKey, "small"))
	big := pods(20, "big", "6", "1Gi") // no type of "small" has 6 cpu
	alone := solve(t, &Input{Pods: web, NodePools: []*NodePool{small, large}})
	with := solve(t, &Input{Pods: append(append([]*corev1.Pod{}, web...), big...), NodePools: []*NodePool{small, large}})
	if len(with.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %s", with.Unschedulable[0].Reason)
	}
	var webCost float64
	for _, n := range with.NewNodes {
		if n.NodePool == "small" {
			webCost += n.Offering.Price
		}
	}
	if math.Abs(webCost-alone.Cost()) > 1e-9 {
		t.Errorf("the web pods' nodes in pool small cost $%.4f/h beside the big pods, $%.4f/h alone", webCost, alone.Cost())
	}
}

// awsCatalog is the embedded AWS us-east-1 catalog as tailor simulate reads it by
// default (an EKS node's allocatable).
func awsCatalog(t testing.TB) []*InstanceType {
	c, err := catalog.EmbeddedAWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	types, err := c.InstanceTypes(allocatable.DefaultEKS())
	if err != nil {
		t.Fatal(err)
	}
	return types
}
