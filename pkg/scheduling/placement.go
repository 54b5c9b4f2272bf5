package scheduling

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Placement: each pod in turn, at each relaxation level, onto a node already in the
// solve (first fit) or else onto a new node.

// run places every pod, retrying the ones that failed while others keep landing
// (a pod may need another's affinity domain), then explains what is left.
func (s *solver) run() {
	queue := s.order()
	for {
		var failed []*podInfo
		for _, p := range queue {
			if !s.place(p) {
				failed = append(failed, p)
			}
		}
		if len(failed) == 0 || len(failed) == len(queue) {
			queue = failed
			break
		}
		queue = failed
	}
	for _, p := range queue {
		s.failures = append(s.failures, Failure{Pod: p.pod, Reason: s.explain(p)})
	}
}

// order interleaves the workloads: classes are ranked largest first, and each
// class's pods are spread evenly through the queue, so every node receives the same
// mix of shapes as the whole and fills cpu and memory together. (Placing all of one
// shape first fills one resource of a node while the other idles.)
func (s *solver) order() []*podInfo {
	classes := slices.Clone(s.classList)
	slices.SortStableFunc(classes, func(a, b *podClass) int {
		if c := cmp.Compare(b.req.At(ResourceCPU), a.req.At(ResourceCPU)); c != 0 {
			return c
		}
		return cmp.Compare(b.req.At(ResourceMemory), a.req.At(ResourceMemory))
	})
	rank := make(map[*podClass]int, len(classes))
	for i, c := range classes {
		rank[c] = i
	}
	members := make([][]*podInfo, len(classes))
	for _, p := range s.pods {
		r := rank[p.class]
		members[r] = append(members[r], p)
	}
	type slot struct {
		at   float64
		rank int
		p    *podInfo
	}
	slots := make([]slot, 0, len(s.pods))
	for r, ps := range members {
		slices.SortStableFunc(ps, func(a, b *podInfo) int {
			if c := strings.Compare(a.pod.Namespace, b.pod.Namespace); c != 0 {
				return c
			}
			return strings.Compare(a.pod.Name, b.pod.Name)
		})
		for j, p := range ps {
			slots = append(slots, slot{at: (float64(j) + 0.5) / float64(len(ps)), rank: r, p: p})
		}
	}
	slices.SortFunc(slots, func(a, b slot) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.rank, b.rank)
	})
	out := make([]*podInfo, len(slots))
	for i, sl := range slots {
		out[i] = sl.p
	}
	return out
}

func (s *solver) place(p *podInfo) bool {
	c := p.class
	if c.invalid != "" {
		return false
	}
	for i, v := range c.levels {
		// A monotone class's refusals last (see setMonotone); they are taken at
		// their word at the most relaxed level only.
		if s.firstFit(p, v, c.monotone && i == len(c.levels)-1) {
			return true
		}
		if n, _ := s.openNode(p, v, false); n != nil {
			return true
		}
	}
	return false
}

// explain says why a pod fits nowhere: per NodePool, at its most relaxed level.
func (s *solver) explain(p *podInfo) string {
	c := p.class
	if c.invalid != "" {
		return c.invalid
	}
	if len(s.pools) == 0 {
		return "no NodePool, and no existing node fits"
	}
	_, reason := s.openNode(p, c.levels[len(c.levels)-1], true)
	return reason
}

// openNode starts a new node for the pod from the first NodePool that can take it.
// With explain set it returns every pool's reason when none can.
func (s *solver) openNode(p *podInfo, v *variant, explain bool) (*simNode, string) {
	var reasons []string
	for _, ps := range s.poolOrder(v) {
		fit := s.poolFit(v, ps)
		if fit.reason != "" {
			reasons = append(reasons, fmt.Sprintf("NodePool %s: %s", ps.name, fit.reason))
			continue
		}
		n := &simNode{name: fmt.Sprintf("planned-%d", s.planned+1), kind: plannedNode, pool: ps,
			reqs:   ps.reqs.With(Requirement{Key: v1.LabelHostname, values: []string{fmt.Sprintf("planned-%d", s.planned+1)}}),
			taints: ps.taints, ports: slices.Clone(ps.daemonPorts)}
		n.options, n.optionsFrom = ps.types, "pool"
		if len(ps.limited) > 0 {
			n.options = slices.DeleteFunc(slices.Clone(ps.types), func(t *typeInfo) bool { return !ps.withinLimits(t) })
			n.optionsFrom = ""
		}
		if len(n.options) == 0 {
			reasons = append(reasons, fmt.Sprintf("NodePool %s: %s", ps.name, ps.limitReason(s.idx)))
			continue
		}
		n.alloc = ps.maxAlloc
		if len(n.options) < len(ps.types) {
			n.alloc = maxAlloc(n.options, s.n)
		}
		vd, reason := s.tryNode(p, v, n, explain)
		if vd != accepted {
			if explain && len(n.options) < len(ps.types) {
				// The pod may fit a type the limits ruled out: say so, not only
				// that the types left are too small.
				reason = fmt.Sprintf("%s; %s", ps.limitsLeft(s.idx), reason)
			}
			reasons = append(reasons, fmt.Sprintf("NodePool %s: %s", ps.name, reason))
			continue
		}
		// Fill the node up to the best-scoring type that holds what it has: the
		// anchor. Its cheapest fitting type is chosen at the end.
		for _, t := range ps.ranked {
			if _, ok := slices.BinarySearchFunc(n.options, t.idx, func(o *typeInfo, idx int) int { return cmp.Compare(o.idx, idx) }); ok &&
				Fits(&Resources{}, &n.used, &t.alloc, s.n) < 0 {
				n.anchor = t.alloc
				break
			}
		}
		n.alloc = n.anchor
		s.planned++
		s.nodes = append(s.nodes, n)
		return n, ""
	}
	return nil, strings.Join(reasons, "; ")
}
