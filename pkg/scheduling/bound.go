package scheduling

import (
	"math"

	corev1 "k8s.io/api/core/v1"
)

// LowerBound is a price per hour no plan for the pods on the plan's new nodes can
// beat. It is the larger of two bounds:
//   - resources: the cheapest fractional mix of instance types whose allocatable
//     covers the pods' total cpu and memory (the linear relaxation of bin packing,
//     solved exactly: with two constraints an optimum uses at most two types);
//   - spreading: pods that must each have a node of their own (required
//     anti-affinity on the hostname against one another) each need at least the
//     cheapest node that fits them.
func LowerBound(pools []*NodePool, plan *Plan) float64 {
	// Each pool's types and offerings as its requirements allow them: a pool of
	// on-demand capacity is not bounded by spot prices.
	types := map[string][]*InstanceType{}
	nodeCost := map[string]float64{} // every node pays it, so the bound does
	for _, np := range pools {
		types[np.NodePool.Name] = allowedTypes(np)
		nodeCost[np.NodePool.Name] = np.NodeCost.Total()
	}
	idx := NewResourceIndex()
	total := map[string]Resources{}
	var order []string
	alone := 0.0
	fitting := map[string][]pricedAlloc{} // each pool's types, read once
	for _, n := range plan.NewNodes {
		if _, ok := total[n.NodePool]; !ok {
			order = append(order, n.NodePool)
		}
		t := total[n.NodePool]
		for _, p := range n.Pods {
			t = t.Add(idx.Vector(PodRequests(p)), allResources)
		}
		total[n.NodePool] = t
		// One pod per node with hostname anti-affinity: that node costs at least the
		// cheapest type that fits the pod.
		for _, p := range n.Pods {
			if selfAntiHostname(p) {
				if _, ok := fitting[n.NodePool]; !ok {
					fitting[n.NodePool] = pricedAllocs(idx, types[n.NodePool], nodeCost[n.NodePool])
				}
				alone += cheapestFitting(idx, fitting[n.NodePool], idx.Vector(PodRequests(p)))
				break
			}
		}
	}
	byResource := 0.0
	for _, pool := range order {
		byResource += fractionalBound(idx, types[pool], total[pool], nodeCost[pool])
	}
	return max(byResource, alone)
}

// allowedTypes are the pool's instance types as its requirements allow them: the
// types they admit, each with only the offerings they admit.
func allowedTypes(np *NodePool) []*InstanceType {
	reqs, err := FromNodePool(np.NodePool.Spec.Template.Spec.Requirements, np.NodePool.Spec.Template.Labels)
	if err != nil || len(reqs) == 0 {
		return np.InstanceTypes
	}
	var out []*InstanceType
	for _, it := range np.InstanceTypes {
		if _, ok := reqs.Intersects(it.Requirements); !ok {
			continue
		}
		o, ok := it.CheapestOffering(reqs)
		if !ok {
			continue
		}
		// The bound reads the cheapest offering: keep that one alone.
		cp := *it
		cp.Offerings = []Offering{o}
		out = append(out, &cp)
	}
	return out
}

func selfAntiHostname(p *corev1.Pod) bool {
	a := p.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		return false
	}
	for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if t.TopologyKey == corev1.LabelHostname && t.LabelSelector != nil {
			match := true
			for k, v := range t.LabelSelector.MatchLabels {
				if p.Labels[k] != v {
					match = false
				}
			}
			if match && len(t.LabelSelector.MatchExpressions) == 0 {
				return true
			}
		}
	}
	return false
}

// pricedAlloc is an instance type's allocatable and cheapest available price.
type pricedAlloc struct {
	alloc Resources
	price float64
}

func pricedAllocs(idx *ResourceIndex, types []*InstanceType, nodeCost float64) []pricedAlloc {
	var out []pricedAlloc
	for _, it := range types {
		if o, ok := it.CheapestOffering(nil); ok {
			out = append(out, pricedAlloc{idx.Vector(it.Allocatable()), o.Price + nodeCost})
		}
	}
	return out
}

func cheapestFitting(idx *ResourceIndex, types []pricedAlloc, req Resources) float64 {
	best := math.Inf(1)
	for i := range types {
		if Fits(&Resources{}, &req, &types[i].alloc, idx.Len()) < 0 {
			best = min(best, types[i].price)
		}
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return best
}

// fractionalBound solves min Σ x_t·price_t subject to Σ x_t·alloc_t ≥ demand in cpu
// and memory, x ≥ 0, by trying every basic solution: one type alone, or two types
// meeting both constraints with equality. Each type's price includes nodeCost.
func fractionalBound(idx *ResourceIndex, types []*InstanceType, demand Resources, nodeCost float64) float64 {
	type point struct{ cpu, mem, price float64 }
	var pts []point
	for _, it := range types {
		alloc := idx.Vector(it.Allocatable())
		if alloc.At(ResourceCPU) <= 0 || alloc.At(ResourceMemory) <= 0 {
			continue
		}
		if o, ok := it.CheapestOffering(nil); ok {
			pts = append(pts, point{float64(alloc.At(ResourceCPU)), float64(alloc.At(ResourceMemory)), o.Price + nodeCost})
		}
	}
	dc, dm := float64(demand.At(ResourceCPU)), float64(demand.At(ResourceMemory))
	if len(pts) == 0 || (dc == 0 && dm == 0) {
		return 0
	}
	best := math.Inf(1)
	for _, a := range pts {
		best = min(best, a.price*max(dc/a.cpu, dm/a.mem))
	}
	for i, a := range pts {
		for _, b := range pts[i+1:] {
			det := a.cpu*b.mem - b.cpu*a.mem
			if det == 0 {
				continue
			}
			x := (dc*b.mem - b.cpu*dm) / det
			y := (a.cpu*dm - dc*a.mem) / det
			if x >= 0 && y >= 0 {
				best = min(best, x*a.price+y*b.price)
			}
		}
	}
	return best
}
