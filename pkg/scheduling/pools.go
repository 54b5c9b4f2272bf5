package scheduling

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Pools: the demand that sizes new nodes, which NodePool a new node comes from
// (weight, then price), and the pools' limits.

// computeDemand sums, per pool, the pending pods that would go there first; it sizes
// new nodes (see anchor).
// The pods that only size nodes (Input.Demand) count as well.
func (s *solver) computeDemand() {
	for _, p := range s.pods {
		s.addToDemand(p.class, 1)
	}
	for _, d := range s.demand {
		s.addToDemand(d.class, d.count)
	}
	for _, ps := range s.pools {
		ps.rank(s.n)
	}
}

// addToDemand counts n pods of class c in the demand of the pool they would go to
// first: the first, by weight, with an instance type that holds one. Pods that fit
// no instance type of any pool size nothing: they get no node, and counted in a
// pool's demand they would skew its ranking (50 pods asking for more cpu than any
// type has made every type look useless, and 100 small pods that share one node
// got a node each).
func (s *solver) addToDemand(c *podClass, n int64) {
	if c.invalid != "" {
		return
	}
	for _, ps := range s.pools {
		if s.holds(ps, c) {
			if ps.demandN == 0 {
				ps.uniform, ps.firstReq = true, c.req
			} else if ps.uniform && !ps.firstReq.Equal(&c.req, s.n) {
				ps.uniform = false
			}
			for range n {
				ps.demand.add(&c.req, s.n)
			}
			ps.demandN += n
			return
		}
	}
}

// rank orders the pool's types by the price of serving its pending pods with nodes
// of that type alone: price × nodes needed, where a node holds as many average pods
// as fit whole (the room lost to packing: for pods of one size, exactly what is
// left over; for mixed sizes, about half a pod, as small pods fill the gaps). A
// new node is filled up to the best-ranked type that holds its first pod, so node
// sizes follow the price per packed pod rather than the largest type that fits.
func (ps *poolState) rank(n int) {
	for _, t := range ps.types {
		t.score = 0
		if ps.uniform {
			// One pod size: a node holds whole pods, and the last node is
			// paid for whole too.
			t.score = math.Inf(1)
			if whole := wholePods(&t.alloc, &ps.firstReq, n); whole > 0 {
				t.score = t.price * math.Ceil(float64(ps.demandN)/float64(whole))
			}
			continue
		}
		for r := range n {
			demand := ps.demand.At(r)
			if demand == 0 {
				continue
			}
			avg := float64(demand) / float64(max(ps.demandN, 1))
			room := float64(t.alloc.At(r)) - avg/2
			if room <= 0 {
				t.score = math.Inf(1)
				break
			}
			t.score = max(t.score, t.price*float64(demand)/room)
		}
	}
	ps.ranked = slices.Clone(ps.types)
	slices.SortStableFunc(ps.ranked, func(a, b *typeInfo) int { return cmp.Compare(a.score, b.score) })
}

// wholePods is how many pods of requests req fit in alloc (0 when none; a pod
// that asks for nothing fits any number, as far as the other resources go).
func wholePods(alloc, req *Resources, n int) int64 {
	most := int64(math.MaxInt64)
	for r := range n {
		if q := req.At(r); q > 0 {
			most = min(most, alloc.At(r)/q)
		}
	}
	return max(most, 0)
}

// poolFit says, once per variant and pool, whether the pool can take the pods at
// all, and what the cheapest type that holds one costs there.
func (s *solver) poolFit(v *variant, ps *poolState) *poolFit {
	if fit, ok := v.pools[ps]; ok {
		return fit
	}
	fit := &poolFit{reason: s.poolReason(v, ps), price: math.Inf(1)}
	if fit.reason == "" {
		for _, t := range ps.types { // cheapest first
			if Fits(&Resources{}, &v.class.req, &t.alloc, s.n) >= 0 {
				continue
			}
			for _, term := range v.terms {
				if _, ok := ps.reqs.Narrow(term).Intersects(t.reqs); ok {
					fit.price = t.price
					break
				}
			}
			if !math.IsInf(fit.price, 1) {
				break
			}
		}
	}
	v.pools[ps] = fit
	return fit
}

// freshPrice is what the cheapest new node for a pod of the variant costs in the
// pool it would open one in (infinite when none can).
func (s *solver) freshPrice(v *variant) float64 {
	if v.fresh != nil {
		return *v.fresh
	}
	price := math.Inf(1)
	for _, ps := range s.poolOrder(v) {
		if fit := s.poolFit(v, ps); fit.reason == "" {
			price = fit.price
			break
		}
	}
	v.fresh = &price
	return price
}

// poolOrder is the order pools are tried for a new node: by weight, and among
// equal weights the one where the pod is cheapest to host first (then by name).
func (s *solver) poolOrder(v *variant) []*poolState {
	if len(s.pools) < 2 {
		return s.pools
	}
	order := slices.Clone(s.pools)
	slices.SortStableFunc(order, func(a, b *poolState) int {
		if a.weight != b.weight {
			return cmp.Compare(b.weight, a.weight)
		}
		return cmp.Compare(s.poolFit(v, a).price, s.poolFit(v, b).price)
	})
	return order
}

// poolReason says why no node of the pool can take pods of the variant, or "".
func (s *solver) poolReason(v *variant, ps *poolState) string {
	effects := []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute}
	if v.softTaint {
		effects = append(effects, corev1.TaintEffectPreferNoSchedule)
	}
	if ps.unavailable != "" {
		return ps.unavailable
	}
	if t := Untolerated(v.class.tolerations, ps.taints, effects...); t != nil {
		return fmt.Sprintf("taint %s not tolerated", taintString(t))
	}
	if len(ps.types) == 0 {
		return "no instance type matches its requirements with an available offering"
	}
	var why []string
	for _, term := range v.terms {
		key, ok := ps.reqs.Admits(term)
		if ok {
			return ""
		}
		pr, _ := term.Get(key)
		if nr, has := ps.reqs.Get(key); has {
			why = append(why, fmt.Sprintf("pod requires %s but nodes offer %s", pr, nr))
		} else {
			why = append(why, fmt.Sprintf("pod requires %s, a label no instance type or template defines", pr))
		}
	}
	return strings.Join(why, ", or ")
}

func (ps *poolState) withinLimits(t *typeInfo) bool {
	for _, r := range ps.limited {
		if ps.used.At(r)+t.capacity.At(r) > ps.limits.At(r) {
			return false
		}
	}
	return true
}

func (ps *poolState) fitsLimits(used *Resources) bool {
	for _, r := range ps.limited {
		if used.At(r) > ps.limits.At(r) {
			return false
		}
	}
	return true
}

func (ps *poolState) limitReason(idx *ResourceIndex) string {
	for _, r := range ps.limited {
		smallest := int64(MaxQuantity)
		for _, t := range ps.types {
			smallest = min(smallest, t.capacity.At(r))
		}
		if used, limit := ps.used.At(r), ps.limits.At(r); used+smallest > limit {
			return fmt.Sprintf("limit %s=%s reached (%s in use, the smallest instance type adds %s)",
				idx.Name(r), idx.Quantity(r, limit), idx.Quantity(r, used), idx.Quantity(r, smallest))
		}
	}
	return "limits reached"
}

// limitsLeft names the limits that rule out some of the pool's instance types now.
func (ps *poolState) limitsLeft(idx *ResourceIndex) string {
	var why []string
	for _, r := range ps.limited {
		for _, t := range ps.types {
			if used, limit := ps.used.At(r), ps.limits.At(r); used+t.capacity.At(r) > limit {
				why = append(why, fmt.Sprintf("limit %s=%s leaves %s", idx.Name(r), idx.Quantity(r, limit), idx.Quantity(r, limit-used)))
				break
			}
		}
	}
	return strings.Join(why, ", ")
}

// withinPoolLimits reports whether the node's pool stays within its limits with
// the node reserving capacity instead of what it reserves now.
func (s *solver) withinPoolLimits(n *simNode, capacity *Resources) bool {
	if len(n.pool.limited) == 0 {
		return true
	}
	after := n.pool.used
	after.sub(&n.reserved, s.n)
	after.add(capacity, s.n)
	return n.pool.fitsLimits(&after)
}

// reserve counts the node's cheapest option against its pool's limits.
func (s *solver) reserve(n *simNode) {
	n.pool.used.sub(&n.reserved, s.n)
	n.reserved = n.options[n.first].capacity
	n.pool.used.add(&n.reserved, s.n)
}

// reservation is what a node counts against its pool's limits: the capacity of its
// cheapest option, the one the plan prices. finish keeps only options no larger in
// any limited resource, so no choice the cloud makes among them breaks a limit.
func (s *solver) reservation(options []*typeInfo) Resources {
	if len(options) == 0 {
		return Resources{}
	}
	return options[0].capacity
}

// FitNewNodes reports, for each pod, whether a new node could take it alone: some
// instance type of some NodePool of in holds its requests beside the DaemonSets
// that would run there, and admits its required node affinity, volumes' zones and
// tolerations. Limits, topology and the pods and nodes of in are not looked at.
// A pod that fits no new node gets none, so copies of it that a workload has still
// to make would get none either.
func FitNewNodes(in *Input, pods []*corev1.Pod) []bool {
	s := newSolver(&Input{Pods: pods, NodePools: in.NodePools, DaemonSets: in.DaemonSets, Namespaces: in.Namespaces,
		PersistentVolumeClaims: in.PersistentVolumeClaims, PersistentVolumes: in.PersistentVolumes, StorageClasses: in.StorageClasses}, Options{})
	out := make([]bool, len(s.pods))
	for i, p := range s.pods {
		if p.class.invalid != "" {
			continue
		}
		out[i] = slices.ContainsFunc(s.pools, func(ps *poolState) bool { return s.holds(ps, p.class) })
	}
	return out
}

// holds reports whether some instance type of the pool holds a pod of class c on a
// new node, as far as what the pod requires goes (its loosest level).
func (s *solver) holds(ps *poolState, c *podClass) bool {
	fit := s.poolFit(c.levels[len(c.levels)-1], ps)
	return fit.reason == "" && !math.IsInf(fit.price, 1)
}
