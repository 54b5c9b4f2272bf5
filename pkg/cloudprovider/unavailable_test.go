package cloudprovider

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

func TestUnavailableOfferingsExpire(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	u := NewUnavailableOfferings(clk, 3*time.Minute)
	types := schedtest.SyntheticTypes(2)
	u.Mark(UnavailableOffering{InstanceType: "fake-it-0", Zone: "zone-a", CapacityType: "spot"})
	got := u.Apply(types)
	if got[1] != types[1] {
		t.Error("a type without unavailable offerings was copied")
	}
	off := 0
	for _, o := range got[0].Offerings {
		if !o.Available {
			off++
			if o.Zone != "zone-a" || o.CapacityType != "spot" {
				t.Errorf("switched off %+v", o)
			}
		}
	}
	if off != 1 || !types[0].Offerings[0].Available {
		t.Errorf("%d offerings off, want 1, and the original untouched", off)
	}
	clk.Step(3 * time.Minute)
	if got := u.Apply(types); got[0] != types[0] {
		t.Error("the offering is still off after its time")
	}
}

// A capacity type marked unavailable switches off its offerings of every type
// and zone, and only those, for the TTL.
func TestUnavailableCapacityType(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	u := NewUnavailableOfferings(clk, 3*time.Minute)
	types := schedtest.SyntheticTypes(3)
	u.MarkCapacityType("spot")
	for _, it := range u.Apply(types) {
		for _, o := range it.Offerings {
			if want := o.CapacityType != "spot"; o.Available != want {
				t.Errorf("%s %s %s: available %v, want %v", it.Name, o.Zone, o.CapacityType, o.Available, want)
			}
		}
	}
	clk.Step(3 * time.Minute)
	if got := u.Apply(types); got[0] != types[0] {
		t.Error("spot is still off after its time")
	}
}
