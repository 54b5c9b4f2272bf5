package aws

import (
	"testing"
	"time"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// After a restart, before the NodeClass is resolved again (the room of its
// reservations unknown), a reserved node's offering is still among its pool's
// instance types: disruption does not judge it drifted (InstanceTypeNotFound)
// and replace it while the reservation sits paid and idle. The offering launches
// nothing until the room is known.
func TestReservedOfferingKnownAfterRestart(t *testing.T) {
	t.Parallel()
	e, nc := newReservedEnv(t, true, 0)
	launched, err := e.cloud.Create(t.Context(), e.claim(nc, "reserved", req(v1.LabelInstanceType, "m5.large"),
		req(v1.CapacityTypeLabelKey, CapacityTypeReserved, CapacityTypeOnDemand)))
	if err != nil {
		t.Fatal(err)
	}
	if launched.Labels[v1.CapacityTypeLabelKey] != CapacityTypeReserved {
		t.Fatalf("launched %v, want reserved", launched.Labels)
	}
	e.cloud = e.restart()
	types, err := e.cloud.InstanceTypes(t.Context(), e.pool(nc))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := scheduling.OfferingPrice(types, launched.Labels); !ok {
		t.Fatalf("the reserved node's offering (%s) is not among its pool's instance types after a restart", launched.Labels[v1.CapacityTypeLabelKey])
	}
	if o, _ := offering(t, types, "m5.large", "us-east-1a", CapacityTypeReserved); o.Available {
		t.Error("a reservation whose room is unknown is offered for launches")
	}
	if _, err := e.cloud.Create(t.Context(), e.claim(nc, "reserved-2", req(v1.CapacityTypeLabelKey, CapacityTypeReserved))); !cloudprovider.IsInsufficientCapacity(err) {
		t.Errorf("reserved-only launch before the room is read: %v, want insufficient capacity", err)
	}
	e.reconcile(t, nc)
	types, err = e.cloud.InstanceTypes(t.Context(), e.pool(nc))
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := offering(t, types, "m5.large", "us-east-1a", CapacityTypeReserved); !o.Available || o.ReservationCapacity != 1 {
		t.Errorf("reserved offering once resolved: %+v, want available with 1 left", o)
	}
}

// A capacity block takes no new node within 40 minutes of its end, when EC2 is
// about to reclaim it (nodes launched then would be drained at once): its offering
// turns unavailable and a claim that must have it gets none.
func TestCapacityBlockClosesBeforeItsEnd(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{Inventory: func(inv *fakeaws.Inventory) {
		inv.CapacityReservations = append(inv.CapacityReservations,
			fakeaws.CapacityReservation{ID: blockID, InstanceType: "m5.xlarge", Zone: "us-east-1b", Total: 2, Available: 2,
				MatchCriteria: "targeted", Type: "capacity-block", EndDate: time.Now().Add(2 * time.Hour), Tags: map[string]string{"team": "ml"}})
	}})
	e.opts.ReservedCapacity = true
	e.cloud = e.restart()
	nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
		nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}}
	})
	blockOffering := func() scheduling.Offering {
		t.Helper()
		types, err := e.cloud.InstanceTypes(t.Context(), e.pool(nc))
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offering(t, types, "m5.xlarge", "us-east-1b", CapacityTypeReserved)
		if !ok {
			t.Fatal("no reserved offering for the capacity block")
		}
		return o
	}
	if !blockOffering().Available {
		t.Fatal("a capacity block two hours from its end is not offered")
	}
	e.clock.Step(80*time.Minute + time.Second) // 39m59s left
	if blockOffering().Available {
		t.Error("a capacity block 40 minutes from its end is still offered")
	}
	_, err := e.cloud.Create(t.Context(), e.claim(nc, "late", req(v1.CapacityTypeLabelKey, CapacityTypeReserved)))
	if !cloudprovider.IsInsufficientCapacity(err) {
		t.Errorf("reserved launch into a closing block: %v, want insufficient capacity", err)
	}
}
