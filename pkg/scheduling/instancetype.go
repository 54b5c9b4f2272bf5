package scheduling

import (
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// InstanceType is a kind of node a cloud can launch.
type InstanceType struct {
	Name string
	// Requirements are the labels a node of this type has: instance type,
	// architecture, OS, the zones and capacity types of its offerings, family, size, ….
	Requirements Requirements
	Offerings    []Offering
	// Capacity is what the node has; Overhead is what the system keeps of it
	// (kube-reserved, system-reserved, eviction threshold).
	Capacity corev1.ResourceList
	Overhead corev1.ResourceList
	// VolumeLimits, when the provider knows them, are how many volumes of each CSI
	// driver a node of this type can attach (a CSINode's allocatable count before
	// the node exists). Nil, or a driver not listed: no limit.
	VolumeLimits map[string]int32
}

// Offering is one way to buy an instance type: a zone and a capacity type, at a price.
type Offering struct {
	Zone         string
	CapacityType string
	Price        float64 // per hour
	Available    bool
	// ReservationCapacity, when above zero, is how many instances the capacity
	// reservation behind the offering has left: a plan puts at most that many new
	// nodes on it, and the rest fall back to the type's other offerings.
	ReservationCapacity int
}

// Allocatable is the capacity pods can use.
func (it *InstanceType) Allocatable() corev1.ResourceList {
	out := it.Capacity.DeepCopy()
	for name, q := range it.Overhead {
		if have, ok := out[name]; ok {
			have.Sub(q)
			out[name] = have
		}
	}
	return out
}

// CheapestOffering returns the cheapest available offering whose zone and capacity
// type reqs allow, or false.
func (it *InstanceType) CheapestOffering(reqs Requirements) (Offering, bool) {
	return it.cheapestOffering(reqs, nil)
}

// cheapestOffering is CheapestOffering among the offerings keep accepts (all when
// keep is nil).
func (it *InstanceType) cheapestOffering(reqs Requirements, keep func(Offering) bool) (Offering, bool) {
	zone, _ := reqs.Get(v1.LabelZone)
	captype, _ := reqs.Get(v1.CapacityTypeLabelKey)
	var best Offering
	found := false
	for _, o := range it.Offerings {
		if !o.Available || (zone != nil && !zone.Has(o.Zone)) || (captype != nil && !captype.Has(o.CapacityType)) ||
			(keep != nil && !keep(o)) {
			continue
		}
		if !found || o.Price < best.Price || (o.Price == best.Price && offeringLess(o, best)) {
			best, found = o, true
		}
	}
	return best, found
}

func offeringLess(a, b Offering) bool {
	if a.Zone != b.Zone {
		return a.Zone < b.Zone
	}
	return a.CapacityType < b.CapacityType
}

// OfferingPrice is the price of the offering a node's labels name (instance type,
// zone, capacity type) among types, available or not.
func OfferingPrice(types []*InstanceType, labels map[string]string) (float64, bool) {
	name, zone, captype := labels[v1.LabelInstanceType], labels[v1.LabelZone], labels[v1.CapacityTypeLabelKey]
	for _, it := range types {
		if it.Name != name {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == zone && o.CapacityType == captype {
				return o.Price, true
			}
		}
		return 0, false
	}
	return 0, false
}
