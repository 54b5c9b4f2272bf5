package cloudprovider

import (
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/nodetailor/tailor/pkg/scheduling"
)

// UnavailableOfferings remembers offerings that just failed with insufficient
// capacity, for a while, so the next plans pick others instead of failing again.
type UnavailableOfferings struct {
	clock clock.Clock
	ttl   time.Duration
	mu    sync.Mutex
	until map[UnavailableOffering]time.Time
	// capacityTypes are whole capacity types out of reach, until when.
	capacityTypes map[string]time.Time
}

// NewUnavailableOfferings remembers each offering for ttl.
func NewUnavailableOfferings(clk clock.Clock, ttl time.Duration) *UnavailableOfferings {
	return &UnavailableOfferings{clock: clk, ttl: ttl, until: map[UnavailableOffering]time.Time{}, capacityTypes: map[string]time.Time{}}
}

// Mark records offerings as out of capacity.
func (u *UnavailableOfferings) Mark(offerings ...UnavailableOffering) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, o := range offerings {
		u.until[o] = u.clock.Now().Add(u.ttl)
	}
}

// MarkCapacityType records that no offering of the capacity type can be had (an
// account that may not launch spot at all, say), for the same while.
func (u *UnavailableOfferings) MarkCapacityType(captype string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.capacityTypes[captype] = u.clock.Now().Add(u.ttl)
}

// Apply returns types with the remembered offerings switched off; types without
// any keep their identity, so callers may cache by pointer.
func (u *UnavailableOfferings) Apply(types []*scheduling.InstanceType) []*scheduling.InstanceType {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock.Now()
	for o, t := range u.until {
		if !now.Before(t) {
			delete(u.until, o)
		}
	}
	for ct, t := range u.capacityTypes {
		if !now.Before(t) {
			delete(u.capacityTypes, ct)
		}
	}
	if len(u.until) == 0 && len(u.capacityTypes) == 0 {
		return types
	}
	out := make([]*scheduling.InstanceType, len(types))
	for i, it := range types {
		out[i] = it
		for j, o := range it.Offerings {
			_, off := u.until[UnavailableOffering{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}]
			if _, all := u.capacityTypes[o.CapacityType]; (off || all) && o.Available {
				if out[i] == it {
					cp := *it
					cp.Offerings = append([]scheduling.Offering(nil), it.Offerings...)
					out[i] = &cp
				}
				out[i].Offerings[j].Available = false
			}
		}
	}
	return out
}
