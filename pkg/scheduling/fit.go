package scheduling

import (
	"fmt"
	"iter"
	"slices"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Fit: whether a pod fits a node, and the narrowing of a planned node's instance-type
// options as pods land on it.

// fitting yields the node's options that hold what it has, cheapest first.
func (n *simNode) fitting(resources int) iter.Seq[*typeInfo] {
	return func(yield func(*typeInfo) bool) {
		for _, t := range n.options[n.first:] {
			if Fits(&Resources{}, &n.used, &t.alloc, resources) < 0 && !yield(t) {
				return
			}
		}
	}
}

func maxAlloc(types []*typeInfo, n int) Resources {
	var out Resources
	for _, t := range types {
		out.max(&t.alloc, n)
	}
	return out
}

var strictEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule}
var hardEffects = strictEffects[:2]

// tryNode places the pod on n if it fits, and reports why not otherwise (the reason
// is spelled out only when explain is set: the hot path does not pay for it) and
// whether the refusal is for good.
func (s *solver) tryNode(p *podInfo, v *variant, n *simNode, explain bool) (verdict, string) {
	c := v.class
	if n.kind != plannedNode {
		if n.unschedulable && !tolerated(c.tolerations, &unschedulableTaint) {
			return refusedForGood, "node is unschedulable"
		}
		effects := hardEffects
		if v.softTaint {
			effects = strictEffects
		}
		if t := Untolerated(c.tolerations, n.taints, effects...); t != nil {
			return refusedForGood, "taint " + taintString(t) + " not tolerated"
		}
	} else if fit := s.poolFit(v, n.pool); fit.reason != "" {
		return refusedForGood, fit.reason
	}
	if r := Fits(&n.used, &c.req, &n.alloc, s.n); r >= 0 {
		if !explain {
			return refusedForGood, ""
		}
		return refusedForGood, s.resourceReason(n, c, r)
	}
	for _, hp := range c.ports {
		for _, used := range n.ports {
			if hp.conflicts(used) {
				return refusedForGood, fmt.Sprintf("host port %s/%d in use", hp.protocol, hp.port)
			}
		}
	}
	// CSI attach limits: an existing node's from its CSINode, a planned node's
	// from its instance types (narrowOptions).
	var volumes map[string]int64
	if len(c.volumes) > 0 && (n.volumeLimits != nil || n.kind == plannedNode && n.pool.volumeLimited) {
		volumes = n.volumeDemand(c.volumes)
		if driver, limit, over := volumesExceed(n.volumeLimits, volumes); over {
			if !explain {
				return refusedNow, ""
			}
			return refusedNow, volumeReason(driver, limit)
		}
	}
	// On a planned node, a host port some DaemonSet takes on some of the types only
	// leaves the node the other types.
	var ports []bool
	if n.kind == plannedNode {
		ports = n.pool.portTypes(c.ports)
	}
	// The terms are alternatives (node affinity terms, each crossed with a
	// volume's zones): on a planned node, one that its topology or its instance
	// types refuse leaves the next to try, as a volume allowed in several zones
	// may go to the second when anti-affinity or a spread rules out the first.
	// An existing node's labels are what they are: the first term it admits
	// decides.
	vd, reason := refusedForGood, "node affinity or selector not matched"
	tried := false
	for _, term := range v.terms {
		if _, ok := n.reqs.Admits(term); !ok {
			continue
		}
		got, why := s.tryTerm(v, n, term, volumes, ports, explain)
		if got == accepted {
			vd = accepted
			break
		}
		if !tried || got < vd { // the refusal that lasts least stands
			vd, reason = got, why
		}
		tried = true
		if n.kind != plannedNode {
			break
		}
	}
	if vd != accepted {
		return vd, reason
	}
	n.used.add(&c.req, s.n)
	n.ports = append(n.ports, c.ports...)
	n.attach(c.volumes)
	n.pods = append(n.pods, p)
	s.placed[p.pod] = n
	for _, g := range c.matched {
		s.record(g, n, 1)
	}
	for _, g := range c.anti {
		if d, ok := n.domain(g.key); ok {
			g.owners[d]++
		}
	}
	return accepted, ""
}

// tryTerm checks the pod's topology on n under one of its terms and, on a planned
// node, narrows the node to it (its requirements and instance types), changing
// nothing when it refuses.
func (s *solver) tryTerm(v *variant, n *simNode, term Requirements, volumes map[string]int64, ports []bool, explain bool) (verdict, string) {
	c := v.class
	reqs := n.reqs
	if n.kind == plannedNode {
		reqs = reqs.Narrow(term)
	}
	reqs, vd, reason := s.topologyFits(c, v, n, reqs, explain)
	if vd != accepted {
		return vd, reason
	}
	if n.kind == plannedNode {
		if vd, reason := s.narrowOptions(n, v, reqs, &c.req, volumes, ports, explain); vd != accepted {
			return vd, reason
		}
		n.reqs = reqs
	}
	return accepted, ""
}

var unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

func (s *solver) resourceReason(n *simNode, c *podClass, r int) string {
	name := s.idx.Name(r)
	if n.kind != plannedNode {
		return fmt.Sprintf("insufficient %s", name)
	}
	return fmt.Sprintf("no instance type offers %s %s", s.idx.Quantity(r, c.req.At(r)), name)
}

// narrowOptions keeps the planned node's instance types that match reqs, have an
// available offering there, hold the node's pods plus req, attach the volumes
// (per CSI driver; nil: no limit matters) and leave the pod's host ports free
// (ports, by position in the pool's types; nil: all do); it fails, changing
// nothing, when none would remain or a minValues requirement would be broken.
// Only the pool's limits look beyond the node: any other refusal, when reqs are
// the node's own, stands until a pod lands on the node.
func (s *solver) narrowOptions(n *simNode, v *variant, reqs Requirements, req *Resources, volumes map[string]int64, ports []bool, explain bool) (verdict, string) {
	changed := changedRequirements(n.reqs, reqs)
	local := refusedNow
	if len(changed) == 0 {
		local = refusedUntilChanged
	}
	offerings := false // the zone or capacity type narrowed: offerings must be checked again
	for _, r := range changed {
		offerings = offerings || r.Key == v1.LabelZone || r.Key == v1.CapacityTypeLabelKey
	}
	admitted := n.pool.admitting(changed)
	// An option must hold all the node will have, not only what req asks for:
	// options too small for what it has already are skipped lazily (fitting).
	want := n.used.Add(*req, s.n)
	// The cheapest option that would remain, offerings and minValues aside.
	next := n.first
	for ; next < len(n.options); next++ {
		t := n.options[next]
		if Fits(&Resources{}, &want, &t.alloc, s.n) < 0 && (admitted == nil || admitted[t.idx]) && (volumes == nil || !typeVolumesExceed(t, volumes)) &&
			(ports == nil || ports[t.idx]) {
			break
		}
	}
	// Growing the node must cost no more than a fresh node for the pod would: a pod
	// does not drag a node into a pricier type when it is cheaper on its own. The
	// check comes first because most refusals are this one.
	// Where the pool's pods are all of one size, rank sized the node (its anchor)
	// by the price of whole nodes of them: up to the anchor it grows, since
	// filled it costs less per pod than fresh nodes would.
	uniformGrowth := n.pool.uniform && !n.anchor.IsZero() && Fits(&n.used, req, &n.anchor, s.n) < 0
	if len(n.pods) > 0 && v != nil && !uniformGrowth && next < len(n.options) {
		if grow := n.options[next].price - n.options[n.first].price; grow > 1e-12 && grow > s.freshPrice(v)*(1+s.growSlack) {
			return local, "a fresh node would cost less than growing this one"
		}
	}
	// Without an anchor the node's allocatable is its options' largest, which
	// lazily skipped options would leave too large; the first pod's openNode
	// anchors the node right after.
	lazy := !s.exhaustive && volumes == nil && ports == nil && (!n.anchor.IsZero() || len(n.pods) == 0) && !s.checksMinValues(reqs)
	if lazy && len(changed) == 0 {
		return s.growInPlace(n, next, reqs, req, explain)
	}
	var offered []bool
	if offerings {
		offered = n.pool.offered(reqs)
	}
	if lazy && n.optionsFrom != "" {
		return s.narrowShared(n, changed, admitted, offered, reqs, req, &want, explain)
	}
	kept := s.scratch[:0]
	volumesRefused, portsRefused := false, false
	for _, t := range n.options[n.first:] {
		if Fits(&Resources{}, &want, &t.alloc, s.n) >= 0 || admitted != nil && !admitted[t.idx] || offered != nil && !offered[t.idx] {
			continue
		}
		if ports != nil && !ports[t.idx] {
			portsRefused = true
			continue
		}
		if volumes != nil && typeVolumesExceed(t, volumes) {
			volumesRefused = true
			continue
		}
		kept = append(kept, t)
	}
	s.scratch = kept
	if len(kept) == 0 {
		if !explain {
			return local, ""
		}
		if volumesRefused {
			return local, "no instance type attaches the volumes its CSI drivers would need"
		}
		if portsRefused {
			return local, "a DaemonSet takes its host port on every instance type that fits"
		}
		return local, s.optionsReason(n, reqs, req)
	}

	for i := range reqs {
		if reqs[i].MinValues > 0 && !s.relaxMinValues {
			if got := distinctValues(kept, reqs[i].Key); got < reqs[i].MinValues {
				return local, fmt.Sprintf("minValues %d for %s not met: %d distinct values remain", reqs[i].MinValues, reqs[i].Key, got)
			}
		}
	}
	if !s.withinPoolLimits(n, &kept[0].capacity) {
		if !explain {
			return refusedNow, ""
		}
		return refusedNow, n.pool.limitReason(s.idx)
	}
	n.options, n.first, n.optionsFrom = slices.Clone(kept), 0, ""
	switch {
	case !n.anchor.IsZero():
		n.alloc = n.anchor
	case len(n.pods) > 0: // for the first pod, openNode sets the anchor next
		n.alloc = maxAlloc(n.options, s.n)
	}
	s.reserve(n)
	return accepted, ""
}

// growInPlace takes req onto the node when nothing but its size changes: the
// options stay as they are and its cheapest becomes options[next]. Options too
// small for what the node holds are skipped where they are read (see first), which
// spares each pod a pass over every instance type.
func (s *solver) growInPlace(n *simNode, next int, reqs Requirements, req *Resources, explain bool) (verdict, string) {
	if next == len(n.options) {
		if !explain {
			return refusedUntilChanged, ""
		}
		return refusedUntilChanged, s.optionsReason(n, reqs, req)
	}
	if !s.withinPoolLimits(n, &n.options[next].capacity) {
		if !explain {
			return refusedNow, ""
		}
		return refusedNow, n.pool.limitReason(s.idx)
	}
	n.first = next
	s.reserve(n)
	return accepted, ""
}

// narrowShared narrows a node whose options are a list the pool shares: to the
// pool's list of those the changed requirements admit and offered allows, shared
// in turn by every node narrowed alike, its cheapest the first that holds req too.
// Nodes narrow by the same few zones, and a real catalog would otherwise cost a
// copy of hundreds of types per node.
func (s *solver) narrowShared(n *simNode, changed []*Requirement, admitted, offered []bool, reqs Requirements, req, want *Resources, explain bool) (verdict, string) {
	from, options := n.pool.narrowed(n.optionsFrom, n.options, changed, reqs, admitted, offered)
	first := 0
	for first < len(options) && Fits(&Resources{}, want, &options[first].alloc, s.n) >= 0 {
		first++
	}
	if first == len(options) {
		if !explain {
			return refusedNow, ""
		}
		return refusedNow, s.optionsReason(n, reqs, req)
	}
	if !s.withinPoolLimits(n, &options[first].capacity) {
		if !explain {
			return refusedNow, ""
		}
		return refusedNow, n.pool.limitReason(s.idx)
	}
	n.options, n.first, n.optionsFrom = options, first, from
	s.reserve(n)
	return accepted, ""
}

// narrowed is options (the pool's list named from) less the types that admitted
// (for changed) and offered (for reqs) rule out, nil meaning none, and the name of
// that list.
func (ps *poolState) narrowed(from string, options []*typeInfo, changed []*Requirement, reqs Requirements, admitted, offered []bool) (string, []*typeInfo) {
	key := append(ps.key[:0], from...)
	key = append(key, 2)
	for _, r := range changed {
		key = r.appendKey(key)
	}
	if offered != nil {
		key = appendOfferKey(key, reqs)
	}
	ps.key = key
	if out, ok := ps.lists[string(key)]; ok {
		return string(key), out
	}
	var out []*typeInfo
	for _, t := range options {
		if (admitted == nil || admitted[t.idx]) && (offered == nil || offered[t.idx]) {
			out = append(out, t)
		}
	}
	if ps.lists == nil {
		ps.lists = map[string][]*typeInfo{}
	}
	ps.lists[string(key)] = out
	return string(key), out
}

// checksMinValues reports whether reqs hold a minValues the solve enforces.
func (s *solver) checksMinValues(reqs Requirements) bool {
	return !s.relaxMinValues && slices.ContainsFunc(reqs, func(r Requirement) bool { return r.MinValues > 0 })
}

// changedRequirements lists the requirements of next that differ from prev; Narrow
// and With return their receiver when nothing changed, which makes that case free.
func changedRequirements(prev, next Requirements) []*Requirement {
	if len(prev) == len(next) && (len(prev) == 0 || &prev[0] == &next[0]) {
		return nil
	}
	var out []*Requirement
	for i := range next {
		r := &next[i]
		old, ok := prev.Get(r.Key)
		if !ok || !old.Equal(r) {
			out = append(out, r)
		}
	}
	return out
}

// admitting says, by position in the pool's types, which types admit the
// requirements that changed (nil: none changed, all do). Nodes narrow by the same
// few requirements (a zone, a capacity type) over and over, and a real catalog has
// hundreds of types, so the answer is kept per pool.
func (ps *poolState) admitting(changed []*Requirement) []bool {
	if len(changed) == 0 {
		return nil
	}
	ps.key = append(ps.key[:0], 'a')
	for _, r := range changed {
		ps.key = r.appendKey(ps.key)
	}
	return ps.memo(ps.key, func(t *typeInfo) bool { return admitsChanged(t.reqs, changed) })
}

// offered says, by position in the pool's types, which types have an available
// offering in the zones and capacity types reqs allow.
func (ps *poolState) offered(reqs Requirements) []bool {
	ps.key = appendOfferKey(ps.key[:0], reqs)
	filter := ps.offerFilter(reqs)
	return ps.memo(ps.key, func(t *typeInfo) bool { _, ok := t.cheapest(filter); return ok })
}

// appendOfferKey names the zone and capacity type requirements of reqs, which
// alone decide the offerings a node may take.
func appendOfferKey(b []byte, reqs Requirements) []byte {
	b = append(b, 'o')
	for _, k := range []string{v1.LabelZone, v1.CapacityTypeLabelKey} {
		if r, ok := reqs.Get(k); ok {
			b = r.appendKey(b)
		}
	}
	return b
}

// memo returns the answers of f for the pool's types, computed once per key.
func (ps *poolState) memo(key []byte, f func(*typeInfo) bool) []bool {
	if out, ok := ps.answers[string(key)]; ok {
		return out
	}
	out := make([]bool, len(ps.types))
	for i, t := range ps.types {
		out[i] = f(t)
	}
	if ps.answers == nil {
		ps.answers = map[string][]bool{}
	}
	ps.answers[string(key)] = out
	return out
}

// admitsChanged checks a type's labels against only the requirements that changed.
func admitsChanged(typeReqs Requirements, changed []*Requirement) bool {
	for _, r := range changed {
		if tr, ok := typeReqs.Get(r.Key); ok && !tr.intersects(r) {
			return false
		}
	}
	return true
}

func distinctValues(types []*typeInfo, key string) int {
	seen := map[string]bool{}
	for _, t := range types {
		if r, ok := t.reqs.Get(key); ok {
			for _, v := range r.Values() {
				seen[v] = true
			}
		}
	}
	return len(seen)
}

func (s *solver) optionsReason(n *simNode, reqs Requirements, req *Resources) string {
	want := n.used.Add(*req, s.n)
	var biggest Resources
	matching := 0
	for t := range n.fitting(s.n) {
		if _, ok := reqs.Intersects(t.reqs); !ok {
			continue
		}
		if _, ok := t.it.CheapestOffering(reqs); !ok {
			continue
		}
		matching++
		biggest = biggest.Max(t.alloc, s.n)
	}
	if matching == 0 {
		return fmt.Sprintf("no instance type with an available offering matches %s", reqs)
	}
	for r := range s.n {
		if want.At(r) > biggest.At(r) {
			return fmt.Sprintf("no instance type offers %s %s", s.idx.Quantity(r, want.At(r)), s.idx.Name(r))
		}
	}
	return "no single instance type fits all of cpu, memory and pods requested"
}
