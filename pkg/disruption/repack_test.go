package disruption

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// shapedTypes are instance types whose price is not proportional to size: two
// types of 2 cpu, one with twice the memory at nearly twice the price (as t4g.small
// and t4g.medium), and larger ones at the medium's price per cpu.
func shapedTypes() []*scheduling.InstanceType {
	types := schedtest.SyntheticTypes(4)[:4]
	shape := []struct {
		cpu, mem string
		price    float64
	}{{"2", "2Gi", 0.0168}, {"2", "4Gi", 0.0336}, {"4", "8Gi", 0.0672}, {"8", "16Gi", 0.1344}}
	for i, s := range shape {
		it := *types[i]
		it.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s.cpu), corev1.ResourceMemory: resource.MustParse(s.mem),
			corev1.ResourcePods: resource.MustParse("110")}
		it.Offerings = nil
		for _, o := range types[i].Offerings {
			if o.CapacityType == v1.CapacityTypeOnDemand {
				o.Price = s.price
				it.Offerings = append(it.Offerings, o)
			}
		}
		types[i] = &it
	}
	return types
}

// Nodes sized for pods that have gone, each still holding pods that fit no single
// cheaper node and no fewer, larger ones, are repacked onto several smaller nodes:
// no move into at most one node saves anything, six into seven saves a third.
func TestRepackOntoSeveralNodes(t *testing.T) {
	c := newCluster(t)
	c.types = shapedTypes()
	c.in.Cluster.NodePools[0].InstanceTypes = c.types
	for range 6 {
		var pods []*corev1.Pod
		for range 7 {
			pods = append(pods, pod("250m", "300Mi"))
		}
		c.node(1, v1.CapacityTypeOnDemand, pods...)
	}
	before := c.price()
	cmd := Decide(c.in).Command
	if cmd == nil || cmd.Kind != KindMulti || len(cmd.Replacements) < 2 {
		t.Fatalf("want the nodes repacked onto several cheaper ones, got %v", cmd)
	}
	if cmd.Savings < before*DefaultMinSavings {
		t.Errorf("saves $%.4f/h of $%.4f/h", cmd.Savings, before)
	}
	for _, r := range cmd.Replacements {
		for _, it := range r.InstanceTypes {
			if o, ok := it.CheapestOffering(r.Requirements); !ok || o.Price > r.Offering.Price+(before*(1-DefaultMinSavings)-(before-cmd.Savings)) {
				t.Errorf("replacement option %s would break the ceiling", it.Name)
			}
		}
	}
	c.apply(cmd)
	optimal := c.freshPlan()
	if after := c.price(); after > optimal.Cost()*1.05 {
		t.Errorf("repacked at $%.4f/h, a fresh plan costs $%.4f/h", after, optimal.Cost())
	}
	if next := Decide(c.in).Command; next != nil {
		t.Errorf("a repacked cluster is settled, got %s", next)
	}
}
