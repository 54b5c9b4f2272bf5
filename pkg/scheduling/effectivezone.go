package scheduling

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Effective zones of the pending pods, as Karpenter's scheduler reports them at the
// start of a solve (karpenter_scheduler_pending_pods_by_effective_zone_count).
const (
	// ZoneFlexible: more than one zone, or any.
	ZoneFlexible = "flexible"
	// ZoneNone: no zone satisfies the pod's zone requirement, volumes and zone
	// topology constraints together.
	ZoneNone = "none"
)

// effectiveZones is, for each pending pod of the solve, the one zone it can go to,
// ZoneFlexible or ZoneNone, read before any pod is placed.
func (s *solver) effectiveZones() map[*corev1.Pod]string {
	zones := s.zoneDomains()
	byClass := map[*podClass]string{}
	out := make(map[*corev1.Pod]string, len(s.pods))
	for _, p := range s.pods {
		if p.pod.Status.Phase != corev1.PodPending {
			continue
		}
		z, ok := byClass[p.class]
		if !ok {
			z = s.effectiveZone(p.class, zones)
			byClass[p.class] = z
		}
		out[p.pod] = z
	}
	return out
}

// zoneDomains are the zones the solve knows: those of the nodes and those the
// NodePools can launch in, sorted.
func (s *solver) zoneDomains() []string {
	var out []string
	for _, n := range s.nodes {
		if d, ok := n.domain(v1.LabelZone); ok {
			out = append(out, d)
		}
	}
	for _, ps := range s.pools {
		if r, ok := ps.reqs.Get(v1.LabelZone); ok {
			out = append(out, r.Values()...)
		}
	}
	return sortedUnique(out)
}

// effectiveZone intersects, as Karpenter's computeEffectiveZoneFromPod does, the
// zones the class's required node affinity (and nodeSelector) allows, those its
// volumes allow, and those its zone topology constraints (spreads, pod affinity
// and anti-affinity, preferred ones included, as the first attempt enforces them)
// admit now. Where Karpenter reads only the first of several required node
// affinity terms, the zones of every term count.
func (s *solver) effectiveZone(c *podClass, zones []string) string {
	// candidates are the zones the pod's terms (with its volumes) name; nil when
	// some term leaves the zone open.
	var candidates []string
	for _, t := range c.terms {
		r, ok := t.Get(v1.LabelZone)
		if !ok || !r.Finite() {
			candidates = nil
			break
		}
		candidates = append(candidates, r.Values()...)
	}
	var admitted []string // nil: no zone topology constraint
	if len(c.levels) > 0 && hasZoneGroup(c.levels[0]) {
		admitted = []string{}
		for _, d := range zones {
			if vd, _ := s.domainAdmits(c, c.levels[0], v1.LabelZone, d, true, false); vd == accepted {
				admitted = append(admitted, d)
			}
		}
		if len(admitted) == 0 {
			return ZoneNone
		}
	}
	switch {
	case candidates != nil:
	case admitted != nil:
		candidates = admitted
	default:
		return ZoneFlexible
	}
	var match []string
	for _, d := range sortedUnique(candidates) {
		if termsAllow(c.terms, v1.LabelZone, d) && (admitted == nil || slices.Contains(admitted, d)) {
			match = append(match, d)
		}
	}
	switch len(match) {
	case 0:
		return ZoneNone
	case 1:
		return match[0]
	}
	return ZoneFlexible
}

func hasZoneGroup(v *variant) bool {
	for _, gs := range [][]*group{v.spreads, v.affinity, v.anti} {
		for _, g := range gs {
			if g.key == v1.LabelZone {
				return true
			}
		}
	}
	return false
}
