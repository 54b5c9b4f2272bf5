package scheduling

import (
	"cmp"
	"slices"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Offering slots number a pool's (zone, capacity type) pairs, so that which of an
// instance type's offerings a node's requirements allow is one bit mask, computed
// once per node rather than once per type and offering: a node has hundreds of
// type options on a real catalog, and the choice among them is made for every pod.

type offerSlot struct{ zone, capacityType string }

type slotOffer struct {
	slot  uint
	offer Offering
}

// maxOfferSlots is how many pairs fit a mask; a pool with more scans offerings.
const maxOfferSlots = 64

// addOfferSlots numbers the available offerings of the pool's types and gives each
// type its offerings by price (ties by zone, then capacity type, as
// CheapestOffering breaks them).
func (ps *poolState) addOfferSlots() {
	index := map[offerSlot]uint{}
	for _, t := range ps.types {
		for _, o := range t.it.Offerings {
			if !o.Available {
				continue
			}
			key := offerSlot{o.Zone, o.CapacityType}
			if _, ok := index[key]; !ok {
				index[key] = uint(len(ps.slots))
				ps.slots = append(ps.slots, key)
			}
		}
	}
	if len(ps.slots) > maxOfferSlots {
		ps.slots = nil
		return
	}
	for _, t := range ps.types {
		t.offers = t.offers[:0]
		for _, o := range t.it.Offerings {
			if o.Available {
				t.offers = append(t.offers, slotOffer{index[offerSlot{o.Zone, o.CapacityType}], o})
			}
		}
		slices.SortStableFunc(t.offers, func(a, b slotOffer) int {
			return cmp.Or(cmp.Compare(a.offer.Price, b.offer.Price), cmp.Compare(a.offer.Zone, b.offer.Zone),
				cmp.Compare(a.offer.CapacityType, b.offer.CapacityType))
		})
	}
}

// offerFilter is which offerings a node's requirements allow.
type offerFilter struct {
	mask uint64
	reqs Requirements // for the scan when the pool has no slots
	scan bool
}

// offerFilter reads the zone and capacity type requirements of reqs.
func (ps *poolState) offerFilter(reqs Requirements) offerFilter {
	if ps.slots == nil {
		return offerFilter{reqs: reqs, scan: true}
	}
	zone, _ := reqs.Get(v1.LabelZone)
	captype, _ := reqs.Get(v1.CapacityTypeLabelKey)
	var f offerFilter
	for i, sl := range ps.slots {
		if (zone == nil || zone.Has(sl.zone)) && (captype == nil || captype.Has(sl.capacityType)) {
			f.mask |= 1 << uint(i)
		}
	}
	return f
}

// cheapest is t.it.CheapestOffering under the filter's requirements.
func (t *typeInfo) cheapest(f offerFilter) (Offering, bool) {
	if f.scan {
		return t.it.CheapestOffering(f.reqs)
	}
	for _, so := range t.offers {
		if f.mask&(1<<so.slot) != 0 {
			return so.offer, true
		}
	}
	return Offering{}, false
}

// cheapestWhere is cheapest among the offerings keep accepts.
func (t *typeInfo) cheapestWhere(f offerFilter, keep func(Offering) bool) (Offering, bool) {
	if f.scan {
		return t.it.cheapestOffering(f.reqs, keep)
	}
	for _, so := range t.offers {
		if f.mask&(1<<so.slot) != 0 && keep(so.offer) {
			return so.offer, true
		}
	}
	return Offering{}, false
}

// boundKey names a count-bounded offering (see Offering.ReservationCapacity).
// Types of one name from several NodeClasses share a count: they are most often
// the same reservation.
type boundKey struct{ instanceType, zone, capacityType string }

// boundLeft is how many more new nodes the bounded offering o of type name may take.
func (s *solver) boundLeft(name string, o Offering) int {
	k := boundKey{name, o.Zone, o.CapacityType}
	if left, ok := s.bounded[k]; ok {
		return left
	}
	return o.ReservationCapacity
}

// takeBounded spends one of offering o's count, if it has one.
func (s *solver) takeBounded(name string, o Offering) {
	if o.ReservationCapacity <= 0 {
		return
	}
	if s.bounded == nil {
		s.bounded = map[boundKey]int{}
	}
	s.bounded[boundKey{name, o.Zone, o.CapacityType}] = s.boundLeft(name, o) - 1
}
