package scheduling

import (
	"cmp"
	"math"
	"slices"
	"strings"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Refine: after placement, planned nodes are repacked where other nodes would cost less.

// refine revisits the new nodes whose pods are free of topology constraints and
// host ports, and repacks them when other nodes would cost less: each such node on
// its own (one big node may cost more than several small ones), and small groups
// of nodes with the same pool and requirements together (several nodes may cost
// more than one that holds them all). A repack tries each cheaper instance type:
// the pods are packed first-fit decreasing into nodes of that type, the last one
// shrunk to the cheapest type that holds its share. The greedy pass sizes nodes for
// the whole workload; this fixes the nodes where that sizing misses.
//
// A last pass then packs each small group onto fewer nodes where that costs the
// same (two 8-vCPU nodes holding what one 16-vCPU node of the same price does):
// fewer nodes to launch, and fewer copies of the DaemonSets. It runs last so that
// a tie never stands in the way of a strictly cheaper repack of a single node.
func (s *solver) refine() {
	const smallGroup = 64 // pods; larger groups are already packed by the anchor
	groups := map[string][]*simNode{}
	var keys []string
	for _, n := range s.nodes {
		if n.kind == plannedNode && s.splittable(n) {
			k := s.requirementsKey(n)
			if _, ok := groups[k]; !ok {
				keys = append(keys, k)
			}
			groups[k] = append(groups[k], n)
		}
	}
	small := func(group []*simNode) bool {
		pods := 0
		for _, n := range group {
			pods += len(n.pods)
		}
		return len(group) > 1 && pods <= smallGroup
	}
	replaced := map[*simNode][]*simNode{}
	replace := func(group, pieces []*simNode) {
		replaced[group[0]] = pieces
		for _, n := range group[1:] {
			replaced[n] = []*simNode{}
		}
	}
	for _, k := range keys {
		group := groups[k]
		if small(group) {
			if pieces := s.repack(group, k, false); pieces != nil {
				replace(group, pieces)
				groups[k] = pieces
				continue
			}
		}
		var after []*simNode
		for _, n := range group {
			var pieces []*simNode
			if len(n.pods) > 1 {
				pieces = s.repack([]*simNode{n}, k, false)
			}
			if pieces == nil {
				after = append(after, n)
				continue
			}
			replaced[n] = pieces
			after = append(after, pieces...)
		}
		groups[k] = after
	}
	s.nodes = withReplacements(s.nodes, replaced)
	clear(replaced)
	for _, k := range keys {
		if group := groups[k]; small(group) {
			if pieces := s.repack(group, k, true); pieces != nil {
				replace(group, pieces)
			}
		}
	}
	s.nodes = withReplacements(s.nodes, replaced)
}

// withReplacements is nodes with each replaced node's pieces in its place.
func withReplacements(nodes []*simNode, replaced map[*simNode][]*simNode) []*simNode {
	if len(replaced) == 0 {
		return nodes
	}
	var out []*simNode
	for _, n := range nodes {
		if pieces, ok := replaced[n]; ok {
			out = append(out, pieces...)
		} else {
			out = append(out, n)
		}
	}
	return out
}

func (s *solver) splittable(n *simNode) bool {
	for _, p := range n.pods {
		c := p.class
		if len(c.ports)+len(c.spreads)+len(c.softSpreads)+len(c.affinity)+len(c.anti)+len(c.prefAffinity)+len(c.prefAnti)+len(c.matched) > 0 {
			return false
		}
		// A repack does not count volumes against the types' attach limits.
		if len(c.volumes) > 0 && n.pool.volumeLimited {
			return false
		}
	}
	return len(n.pods) > 0
}

// repack returns cheaper nodes holding the pods of group (nodes of one pool with the
// same requirements, key), or nil when none are cheaper. With fewerAtEqual it
// returns fewer nodes than the group's that cost no more, or nil.
func (s *solver) repack(group []*simNode, key string, fewerAtEqual bool) []*simNode {
	const eps = 1e-9 // prices are sums of a few float64s
	// better says whether a packing on nodes nodes for cost beats the best so far.
	better := func(cost float64, nodes int, bestCost float64, bestNodes int) bool {
		if fewerAtEqual {
			return cost <= bestCost+eps && nodes < bestNodes
		}
		return cost < bestCost-eps
	}
	first := group[0]
	candidates, prices := s.splitCandidates(first, key)
	current := 0.0
	var used, reservedBefore Resources
	var members []*podInfo
	for _, n := range group {
		o, ok := n.options[n.first].cheapest(n.pool.offerFilter(n.reqs))
		if !ok {
			return nil
		}
		current += o.Price + n.pool.nodeCost.Total()
		used = used.Add(n.used, s.n)
		reservedBefore = reservedBefore.Add(n.reserved, s.n)
		members = append(members, n.pods...)
	}
	slices.SortStableFunc(members, func(a, b *podInfo) int {
		if c := cmp.Compare(b.class.req.At(ResourceCPU), a.class.req.At(ResourceCPU)); c != 0 {
			return c
		}
		return cmp.Compare(b.class.req.At(ResourceMemory), a.class.req.At(ResourceMemory))
	})
	// Nodes of type t cannot hold the pods for less than the fluid bound:
	// price × the fraction of t's allocatable the pods take in their tightest
	// resource. Trying types in that order, the search stops at the first bound
	// that cannot beat the best found.
	type trial struct {
		t     *typeInfo
		bound float64
	}
	var trials []trial
	for _, t := range candidates {
		if !better(prices[t], 1, current, len(group)) {
			break // no packing on t costs less than one node of it
		}
		frac := 0.0
		for r := range s.n {
			if u := used.At(r); u > 0 {
				a := t.alloc.At(r)
				if a <= 0 {
					frac = math.Inf(1)
					break
				}
				frac = max(frac, float64(u)/float64(a))
			}
		}
		if b := prices[t] * frac; better(b, 1, current, len(group)) {
			trials = append(trials, trial{t, b})
		}
	}
	slices.SortStableFunc(trials, func(a, b trial) int { return cmp.Compare(a.bound, b.bound) })
	bestCost, bestNodes := current, len(group)
	var bestBins [][]*podInfo
	for _, tr := range trials {
		t := tr.t
		if !better(tr.bound, 1, bestCost, bestNodes) {
			break
		}
		// A packing whose nodes but the last already cost bestCost loses: it is
		// given up as soon as it needs that many.
		tooMany := func(nodes int) bool {
			return float64(nodes-1)*prices[t] >= bestCost || fewerAtEqual && nodes >= bestNodes
		}
		if !s.packing.pack(members, &t.alloc, s.n, tooMany) || !s.binsKeepMinValues(first.reqs, candidates, s.packing.used) {
			continue
		}
		binUsed := s.packing.used
		cost := float64(len(binUsed)-1) * prices[t]
		last := binUsed[len(binUsed)-1]
		lastPrice := math.Inf(1)
		for _, u := range candidates {
			if Fits(&Resources{}, &last, &u.alloc, s.n) < 0 {
				lastPrice = prices[u]
				break
			}
		}
		if better(cost+lastPrice, len(binUsed), bestCost, bestNodes) {
			bestCost, bestNodes, bestBins = cost+lastPrice, len(binUsed), s.packing.bins(members)
		}
	}
	if bestBins == nil {
		return nil
	}
	pieces := make([]*simNode, 0, len(bestBins))
	var reserved Resources
	for _, bin := range bestBins {
		piece := &simNode{name: first.name, kind: plannedNode, pool: first.pool, reqs: first.reqs, taints: first.taints, pods: bin}
		for _, p := range bin {
			piece.used.add(&p.class.req, s.n)
		}
		for _, t := range candidates {
			if Fits(&Resources{}, &piece.used, &t.alloc, s.n) < 0 {
				piece.options = append(piece.options, t)
			}
		}
		piece.reserved = s.reservation(piece.options)
		reserved = reserved.Add(piece.reserved, s.n)
		pieces = append(pieces, piece)
	}
	after := first.pool.used.Sub(reservedBefore, s.n).Add(reserved, s.n)
	if !first.pool.fitsLimits(&after) {
		return nil
	}
	first.pool.used = after
	for _, piece := range pieces {
		for _, p := range piece.pods {
			s.placed[p.pod] = piece
		}
	}
	return pieces
}

// binsKeepMinValues reports whether, for each bin of a repack, enough of the
// candidate types hold it for the requirements' minValues.
func (s *solver) binsKeepMinValues(reqs Requirements, candidates []*typeInfo, binUsed []Resources) bool {
	if s.relaxMinValues || !slices.ContainsFunc(reqs, func(r Requirement) bool { return r.MinValues > 0 }) {
		return true
	}
	for i := range binUsed {
		var options []*typeInfo
		for _, t := range candidates {
			if Fits(&Resources{}, &binUsed[i], &t.alloc, s.n) < 0 {
				options = append(options, t)
			}
		}
		if !minValuesMet(reqs, options, func(t *typeInfo) *typeInfo { return t }) {
			return false
		}
	}
	return true
}

// requirementsKey identifies a node's pool and requirements, less its hostname.
// A requirement still the pool's is named rather than spelled out: on a real
// catalog the instance types alone would spell hundreds of names per node.
func (s *solver) requirementsKey(n *simNode) string {
	var key strings.Builder
	key.WriteString(n.pool.name)
	for i := range n.reqs {
		r := &n.reqs[i]
		switch pr, ok := n.pool.reqs.Get(r.Key); {
		case r.Key == v1.LabelHostname:
		case ok && pr.Equal(r):
			key.WriteString("|=" + r.Key)
		default:
			key.WriteString("|" + r.String())
		}
	}
	return key.String()
}

// splitCandidates lists the pool's types the node's requirements (key) allow,
// with an offering there, cheapest first; nodes with the same requirements share
// the list.
func (s *solver) splitCandidates(n *simNode, key string) ([]*typeInfo, map[*typeInfo]float64) {
	if c, ok := s.candidates[key]; ok {
		return c.types, c.prices
	}
	c := candidateList{prices: map[*typeInfo]float64{}}
	filter := n.pool.offerFilter(n.reqs)
	for _, t := range n.pool.types {
		if _, ok := n.reqs.Intersects(t.reqs); !ok {
			continue
		}
		o, ok := t.cheapest(filter)
		if !ok {
			continue
		}
		c.prices[t] = o.Price + n.pool.nodeCost.Total()
		c.types = append(c.types, t)
	}
	slices.SortStableFunc(c.types, func(a, b *typeInfo) int { return cmp.Compare(c.prices[a], c.prices[b]) })
	if s.candidates == nil {
		s.candidates = map[string]candidateList{}
	}
	s.candidates[key] = c
	return c.types, c.prices
}

type candidateList struct {
	types  []*typeInfo
	prices map[*typeInfo]float64
}

// packing is a first-fit packing of pods into nodes of one size: each pod's node
// and each node's use. A repack tries it for many sizes, so it keeps its storage.
type packing struct {
	node []int32
	used []Resources
}

// pack packs the pods first-fit into nodes of allocatable alloc; false when one
// does not fit at all, or when tooMany says the nodes needed so far are too many.
func (pk *packing) pack(pods []*podInfo, alloc *Resources, n int, tooMany func(nodes int) bool) bool {
	pk.node, pk.used = pk.node[:0], pk.used[:0]
	for _, p := range pods {
		i := 0
		for i < len(pk.used) && Fits(&pk.used[i], &p.class.req, alloc, n) >= 0 {
			i++
		}
		if i == len(pk.used) {
			if Fits(&Resources{}, &p.class.req, alloc, n) >= 0 || tooMany(i+1) {
				return false
			}
			pk.used = append(pk.used, Resources{})
		}
		pk.used[i].add(&p.class.req, n)
		pk.node = append(pk.node, int32(i))
	}
	return true
}

// bins lists the pods of each node of the last packing.
func (pk *packing) bins(pods []*podInfo) [][]*podInfo {
	out := make([][]*podInfo, len(pk.used))
	for j, i := range pk.node {
		out[i] = append(out[i], pods[j])
	}
	return out
}
