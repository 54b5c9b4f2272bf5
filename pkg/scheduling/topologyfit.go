package scheduling

import (
	"cmp"
	"fmt"
	"slices"
)

// Topology fit: whether a node's domains admit a pod's spreads, pod affinity and
// anti-affinity, settling a planned node's open domains.

// topologyFits checks the pod's spread, affinity and anti-affinity constraints, and
// the anti-affinity of pods already placed, on node n described by reqs. On a
// planned node whose domain for a key is still open it picks one, returning reqs
// narrowed to it.
func (s *solver) topologyFits(c *podClass, v *variant, n *simNode, reqs Requirements, explain bool) (Requirements, verdict, string) {
	if len(v.spreads)+len(v.affinity)+len(v.anti)+len(c.matched) == 0 {
		return reqs, accepted, ""
	}
	for _, key := range topologyKeys(v, c) {
		d, settled := domainIn(reqs, key)
		if settled {
			if vd, why := s.domainAdmits(c, v, key, d, true, explain); vd != accepted {
				// A domain the pod's term chose, not the node, may change.
				if _, own := domainIn(n.reqs, key); !own {
					vd = refusedNow
				}
				return reqs, vd, why
			}
			continue
		}
		r, has := reqs.Get(key)
		if n.kind != plannedNode || !has || !r.Finite() {
			// The node will not have the key.
			if vd, why := s.domainAdmits(c, v, key, "", false, explain); vd != accepted {
				return reqs, vd, why
			}
			continue
		}
		chosen := ""
		for _, cand := range s.preferredDomains(c, v, key, r.values) {
			if vd, _ := s.domainAdmits(c, v, key, cand, true, false); vd == accepted {
				chosen = cand
				break
			}
		}
		if chosen == "" {
			if !explain {
				return reqs, refusedNow, ""
			}
			_, why := s.domainAdmits(c, v, key, r.values[0], true, true)
			return reqs, refusedNow, why
		}
		reqs = n.settle(reqs, key, chosen)
	}
	return reqs, accepted, ""
}

// settle returns reqs with key settled to domain d. Pod after pod offers a planned
// node the same few domains, so while reqs are the node's own the results are kept
// (each is a copy of the node's requirements).
func (n *simNode) settle(reqs Requirements, key, d string) Requirements {
	if !sameRequirements(reqs, n.reqs) {
		return reqs.With(Requirement{Key: key, values: []string{d}})
	}
	if !sameRequirements(n.settledFrom, n.reqs) {
		n.settled, n.settledFrom = nil, n.reqs
	}
	k := [2]string{key, d}
	if out, ok := n.settled[k]; ok {
		return out
	}
	out := reqs.With(Requirement{Key: key, values: []string{d}})
	if n.settled == nil {
		n.settled = map[[2]string]Requirements{}
	}
	n.settled[k] = out
	return out
}

// sameRequirements reports whether a and b are one slice (With and Narrow return
// their receiver when nothing changes).
func sameRequirements(a, b Requirements) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func domainIn(reqs Requirements, key string) (string, bool) {
	r, ok := reqs.Get(key)
	if !ok || !r.Finite() || len(r.values) != 1 {
		return "", false
	}
	return r.values[0], true
}

// topologyKeys lists, in a stable order, the keys the pod's constraints and its
// matching groups use.
func topologyKeys(v *variant, c *podClass) []string {
	if v.keys != nil {
		return v.keys
	}
	keys := []string{}
	add := func(gs []*group) {
		for _, g := range gs {
			if !slices.Contains(keys, g.key) {
				keys = append(keys, g.key)
			}
		}
	}
	add(v.spreads)
	add(v.affinity)
	add(v.anti)
	add(c.matched)
	v.keys = keys
	return keys
}

// preferredDomains orders candidate values: least loaded first for a spread,
// most populated first for an affinity, else as given.
func (s *solver) preferredDomains(c *podClass, v *variant, key string, values []string) []string {
	for _, g := range v.spreads {
		if g.key == key {
			out := slices.Clone(values)
			slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(g.counts[a], g.counts[b]) })
			return out
		}
	}
	for _, g := range v.affinity {
		if g.key == key {
			out := slices.Clone(values)
			slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(g.counts[b], g.counts[a]) })
			return out
		}
	}
	for _, g := range c.matched {
		if g.key == key && g.kind == spreadGroup {
			out := slices.Clone(values)
			slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(g.counts[a], g.counts[b]) })
			return out
		}
	}
	return values
}

// domainAdmits checks every constraint on key for domain d (has=false: the node has
// no such label). Counts only grow, so a refusal is for good where a count alone
// refuses: anti-affinity, and a spread whose minimum cannot rise.
func (s *solver) domainAdmits(c *podClass, v *variant, key, d string, has bool, explain bool) (verdict, string) {
	for _, g := range v.spreads {
		if g.key != key {
			continue
		}
		if !has {
			if !explain {
				return refusedNow, ""
			}
			return refusedNow, fmt.Sprintf("node has no label %s for its topology spread", key)
		}
		if !g.admitsSpread(d, g.matches(c.ns, c.labels)) {
			vd := refusedNow
			if g.minFixed() {
				vd = refusedForGood
			}
			if !explain {
				return vd, ""
			}
			return vd, fmt.Sprintf("topology spread on %s: %s=%s would exceed maxSkew %d", key, key, d, g.maxSkew)
		}
	}
	if len(v.affinity) > 0 {
		selfOK := true
		for _, g := range v.affinity {
			if g.total > 0 || !g.matches(c.ns, c.labels) {
				selfOK = false
			}
		}
		for _, g := range v.affinity {
			if g.key != key {
				continue
			}
			// The first pod of a group that selects itself goes anywhere, but only to
			// a node with the key.
			if !has {
				if !explain {
					return refusedNow, ""
				}
				return refusedNow, fmt.Sprintf("node has no label %s for its pod affinity", key)
			}
			if !selfOK && g.counts[d] == 0 {
				if !explain {
					return refusedNow, ""
				}
				return refusedNow, fmt.Sprintf("pod affinity on %s: no matching pod in %s=%s", key, key, d)
			}
		}
	}
	if !has {
		return accepted, ""
	}
	for _, g := range v.anti {
		if g.key == key && g.counts[d] > 0 {
			if !explain {
				return refusedForGood, ""
			}
			return refusedForGood, fmt.Sprintf("pod anti-affinity on %s: a matching pod runs in %s=%s", key, key, d)
		}
	}
	for _, g := range c.matched {
		if g.kind == antiAffinityGroup && g.key == key && g.owners[d] > 0 {
			if !explain {
				return refusedForGood, ""
			}
			return refusedForGood, fmt.Sprintf("another pod's anti-affinity on %s excludes %s=%s", key, key, d)
		}
	}
	return accepted, ""
}
