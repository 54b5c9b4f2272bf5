package disruption

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// room is the part of a node's resources a quick check looks at.
type room struct{ cpu, mem, pods int64 }

func (r room) fits(in room) bool { return r.cpu <= in.cpu && r.mem <= in.mem && r.pods <= in.pods }

// plus adds within ±MaxQuantity: the amounts are saturated, and so is their sum.
func (r room) plus(o room) room {
	add := func(a, b int64) int64 {
		return min(max(a+b, -scheduling.MaxQuantity), scheduling.MaxQuantity)
	}
	return room{add(r.cpu, o.cpu), add(r.mem, o.mem), add(r.pods, o.pods)}
}

// roomOf reads the amounts saturated, as the engine does: a Quantity's own
// MilliValue wraps past int64, and 1e16 cpu would read as 0.
func roomOf(l corev1.ResourceList) room {
	return room{scheduling.QuantityValue(corev1.ResourceCPU, l[corev1.ResourceCPU]),
		scheduling.QuantityValue(corev1.ResourceMemory, l[corev1.ResourceMemory]),
		scheduling.QuantityValue(corev1.ResourcePods, l[corev1.ResourcePods])}
}

// offer is an instance type a pool could replace a node with, at its price.
type offer struct {
	price float64
	alloc room
}

// quick holds what the quick checks need, computed once per pass.
type quick struct {
	free   map[*scheduling.Node]room
	total  room
	offers map[string][]offer // by NodePool, cheapest first
}

func newQuick(nodes []*scheduling.Node, pools []*scheduling.NodePool) *quick {
	q := &quick{free: map[*scheduling.Node]room{}, offers: map[string][]offer{}}
	for _, n := range nodes {
		if hasTaint(n.Node, v1.DisruptedNoScheduleTaint) || n.Node.Spec.Unschedulable {
			continue
		}
		alloc, used := roomOf(n.Node.Status.Allocatable), roomOf(n.Requests)
		pods := int64(0)
		for _, p := range n.Pods {
			if !scheduling.IsTerminal(p) {
				pods++
			}
		}
		free := room{alloc.cpu - used.cpu, alloc.mem - used.mem, alloc.pods - pods}
		q.free[n] = free
		q.total = q.total.plus(free)
	}
	for _, p := range pools {
		reqs, err := scheduling.FromNodePool(p.NodePool.Spec.Template.Spec.Requirements, p.NodePool.Spec.Template.Labels)
		if err != nil {
			continue
		}
		var offers []offer
		for _, it := range p.InstanceTypes {
			if o, ok := it.CheapestOffering(reqs); ok {
				offers = append(offers, offer{o.Price + p.NodeCost.Total(), roomOf(it.Allocatable())})
			}
		}
		slices.SortFunc(offers, func(a, b offer) int { return cmp.Compare(a.price, b.price) })
		q.offers[p.NodePool.Name] = offers
	}
	return q
}

// mayMove is a necessary condition for consolidating c, looking only at cpu, memory
// and pod counts: its pods could leave for free room elsewhere, or a node of its
// pool under ceiling could hold them. When it fails, solving is not worth it.
func (q *quick) mayMove(c *Candidate, ceiling float64) bool {
	var need room
	pods := make([]room, len(c.Pods))
	for i, p := range c.Pods {
		pods[i] = roomOf(scheduling.PodRequests(p))
		pods[i].pods = 1
		need = need.plus(pods[i])
	}
	for _, o := range q.offers[c.Pool.NodePool.Name] {
		if o.price >= ceiling {
			break
		}
		if need.fits(o.alloc) {
			return true
		}
	}
	own := q.free[c.Node]
	if !need.fits(room{q.total.cpu - own.cpu, q.total.mem - own.mem, q.total.pods - own.pods}) {
		return false
	}
	for _, p := range pods {
		fits := false
		for n, free := range q.free {
			if n != c.Node && p.fits(free) {
				fits = true
				break
			}
		}
		if !fits {
			return false
		}
	}
	return true
}
