package scheduling

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Plan: the solver's nodes turned into the Plan, each new node's instance types
// ranked and bounded.

// plan turns the solver's nodes into the result.
func (s *solver) plan() *Plan {
	out := &Plan{Unschedulable: s.failures, Warnings: s.warnings}
	for _, p := range s.pods {
		n := s.placed[p.pod]
		if n != nil && n.kind != plannedNode {
			out.Bindings = append(out.Bindings, Binding{Pod: p.pod, Node: n.name})
		}
	}
	// What the limited pools may still grow by: new nodes keep fallback options
	// larger than their cheapest as far as this allows (see finish).
	for _, ps := range s.pools {
		if len(ps.limited) > 0 {
			ps.headroom = ps.limits.Sub(ps.used, s.n)
		}
	}
	for _, n := range s.nodes {
		if n.kind != plannedNode {
			continue
		}
		nn := s.finish(n)
		nn.Name = fmt.Sprintf("planned-%d", len(out.NewNodes)+1)
		out.NewNodes = append(out.NewNodes, nn)
	}
	return out
}

// finish ranks a planned node's options by price and fixes its requirements.
func (s *solver) finish(n *simNode) *NewNode {
	reqs := slices.DeleteFunc(slices.Clone(n.reqs), func(r Requirement) bool { return r.Key == v1.LabelHostname })
	options := s.priced[:0]
	defer func() { s.priced = options[:0] }() // the buffer, for the next node
	// An option may be larger than the cheapest one the plan reserved for as far
	// as the pool's limits still allow: the launch keeps its fallbacks, and the
	// limits hold whichever the cloud launches.
	within := func(t *typeInfo) bool {
		for _, r := range n.pool.limited {
			if t.capacity.At(r)-n.reserved.At(r) > n.pool.headroom.At(r) {
				return false
			}
		}
		return true
	}
	filter := n.pool.offerFilter(reqs)
	if sameOfferings(n.pool.reqs, reqs) {
		// The options are in the pool's price order, which still holds.
		for t := range n.fitting(s.n) {
			if !within(t) {
				continue
			}
			o, _ := t.cheapest(filter)
			options = append(options, priced{t, o})
			if len(options) >= s.opts.MaxInstanceTypes && minValuesMet(reqs, options, func(p priced) *typeInfo { return p.t }) {
				break
			}
		}
	} else {
		less := func(a, b priced) int {
			return cmp.Or(cmp.Compare(a.offer.Price, b.offer.Price), strings.Compare(a.t.it.Name, b.t.it.Name))
		}
		// Without minValues only the cheapest MaxInstanceTypes are kept: keep them
		// sorted as they come rather than sorting hundreds of options.
		bounded := !slices.ContainsFunc(reqs, func(r Requirement) bool { return r.MinValues > 0 })
		for t := range n.fitting(s.n) {
			// Options come by their cheapest price in the pool, no more than what
			// the node's offerings cost: past the last kept, none can be kept.
			if bounded && len(options) == s.opts.MaxInstanceTypes && t.price > options[len(options)-1].offer.Price+n.pool.nodeCost.Total() {
				break
			}
			o, ok := t.cheapest(filter)
			if !ok || !within(t) {
				continue
			}
			p := priced{t, o}
			if !bounded {
				options = append(options, p)
				continue
			}
			if len(options) == s.opts.MaxInstanceTypes && less(p, options[len(options)-1]) >= 0 {
				continue
			}
			i, _ := slices.BinarySearchFunc(options, p, less)
			if len(options) == s.opts.MaxInstanceTypes {
				options = options[:len(options)-1]
			}
			options = slices.Insert(options, i, p)
		}
		if !bounded {
			slices.SortFunc(options, less)
		}
	}
	options, reqs = s.spendReservations(options, reqs, filter)
	keep := min(len(options), s.opts.MaxInstanceTypes)
	// Keep going past the bound while a minValues requirement needs more variety.
	for keep < len(options) && !minValuesMet(reqs, options[:keep], func(p priced) *typeInfo { return p.t }) {
		keep++
	}
	options = options[:keep]
	for _, r := range n.pool.limited {
		extra := int64(0)
		for _, o := range options {
			extra = max(extra, o.t.capacity.At(r)-n.reserved.At(r))
		}
		n.pool.headroom.Set(r, n.pool.headroom.At(r)-extra)
	}
	nn := &NewNode{Name: n.name, NodePool: n.pool.name, Taints: n.pool.taints, StartupTaints: n.pool.startup, NodeCost: n.pool.nodeCost}
	for _, p := range n.pods {
		nn.Pods = append(nn.Pods, p.pod)
	}
	names := make([]string, len(options))
	for i, o := range options {
		if i == 0 {
			nn.InstanceTypes = make([]*InstanceType, 0, len(options))
		}
		nn.InstanceTypes = append(nn.InstanceTypes, o.t.it)
		names[i] = o.t.it.Name
	}
	if len(options) > 0 {
		nn.InstanceType, nn.Offering = options[0].t.it, options[0].offer
		nn.Requests = s.idx.List(n.used.Add(options[0].t.daemons, s.n))
	}
	if s.nodesPos >= 0 {
		delete(nn.Requests, "nodes")
	}
	slices.Sort(names) // names is ours: sortedUnique's copy is not needed
	nn.Requirements = reqs.With(Requirement{Key: v1.LabelInstanceType, values: slices.Compact(names)})
	if s.relaxMinValues {
		types := make([]*typeInfo, len(options))
		for i, o := range options {
			types[i] = o.t
		}
		for i := range nn.Requirements {
			r := &nn.Requirements[i]
			if got := distinctValues(types, r.Key); r.MinValues > got {
				r.MinValues, nn.MinValuesRelaxed = got, true
			}
		}
	}
	return nn
}

// priced is a node's option: an instance type and the offering it would take.
type priced struct {
	t     *typeInfo
	offer Offering
}

// spendReservations gives the node the count-bounded offering (a capacity
// reservation) its cheapest option takes, while the count lasts: planned nodes
// take them in order. An option whose bounded offering ran out falls back to its
// next offering, and the options are ranked again; a node left with no bounded
// offering no longer allows the capacity types of those that ran out, so the
// launch follows the plan. When every option ran out the node is kept as it was,
// and the launch finds out.
func (s *solver) spendReservations(options []priced, reqs Requirements, filter offerFilter) ([]priced, Requirements) {
	if !slices.ContainsFunc(options, func(p priced) bool { return p.offer.ReservationCapacity > 0 }) {
		return options, reqs
	}
	var spent []string // capacity types of bounded offerings that ran out
	var fallback []priced
	for _, p := range options {
		name := p.t.it.Name
		if p.offer.ReservationCapacity <= 0 || s.boundLeft(name, p.offer) > 0 {
			fallback = append(fallback, p)
			continue
		}
		spent = append(spent, p.offer.CapacityType)
		o, ok := p.t.cheapestWhere(filter, func(o Offering) bool { return o.ReservationCapacity <= 0 || s.boundLeft(name, o) > 0 })
		if ok {
			fallback = append(fallback, priced{p.t, o})
		}
	}
	if len(fallback) == 0 {
		return options, reqs
	}
	if len(spent) > 0 {
		slices.SortStableFunc(fallback, func(a, b priced) int { return cmp.Compare(a.offer.Price, b.offer.Price) })
		options = fallback
	}
	if first := options[0]; first.offer.ReservationCapacity > 0 {
		s.takeBounded(first.t.it.Name, first.offer)
		return options, reqs
	}
	for _, ct := range spent {
		narrowed := reqs.With(MustRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpNotIn, ct))
		if r, _ := narrowed.Get(v1.CapacityTypeLabelKey); r.Satisfiable() {
			reqs = narrowed
		}
	}
	return options, reqs
}

// sameOfferings reports whether a node's zone and capacity-type requirements are
// still the pool's, so the pool's offering prices apply.
func sameOfferings(pool, node Requirements) bool {
	for _, key := range []string{v1.LabelZone, v1.CapacityTypeLabelKey} {
		a, okA := pool.Get(key)
		b, okB := node.Get(key)
		if okA != okB || (okA && !a.Equal(b)) {
			return false
		}
	}
	return true
}

func minValuesMet[T any](reqs Requirements, options []T, typeOf func(T) *typeInfo) bool {
	for i := range reqs {
		if reqs[i].MinValues == 0 {
			continue
		}
		types := make([]*typeInfo, len(options))
		for j, o := range options {
			types[j] = typeOf(o)
		}
		if distinctValues(types, reqs[i].Key) < reqs[i].MinValues {
			return false
		}
	}
	return true
}
