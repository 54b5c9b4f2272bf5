package scheduling_test

import (
	"slices"
	"testing"

	v1 "github.com/nodetailor/tailor/api/v1"
	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

const reserved = "reserved"

// withReservation gives the type a reserved offering in zone, nearly free, with
// count instances left (0: used up, so unavailable).
func withReservation(types []*InstanceType, name, zone string, count int) []*InstanceType {
	out := make([]*InstanceType, len(types))
	for i, it := range types {
		out[i] = it
		if it.Name != name {
			continue
		}
		cp := *it
		cp.Offerings = append(append([]Offering(nil), it.Offerings...),
			Offering{Zone: zone, CapacityType: reserved, Price: 1e-6, Available: count > 0, ReservationCapacity: count})
		others := slices.DeleteFunc(slices.Clone(it.Requirements), func(r Requirement) bool { return r.Key == v1.CapacityTypeLabelKey })
		cp.Requirements = others.With(MustRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn,
			v1.CapacityTypeSpot, v1.CapacityTypeOnDemand, reserved))
		out[i] = &cp
	}
	return out
}

// One pod per node (hostname anti-affinity), five nodes; the reservation has two
// instances left: two nodes take it, the other three fall back to on-demand and no
// longer allow reserved, so their launch cannot take the reservation either.
func TestReservedPreferredAndBoundedByCount(t *testing.T) {
	types := withReservation(schedtest.SyntheticTypes(4), "fake-it-1", "zone-b", 2)
	np := makeNodePool("default", requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, reserved, v1.CapacityTypeOnDemand))
	in := &Input{Pods: pods(5, "solo", "1500m", "1Gi", withLabels("app", "solo"), withPodAntiAffinity(v1.LabelHostname, map[string]string{"app": "solo"})),
		NodePools: []*NodePool{pool(np, types)}}
	plan := solve(t, in)
	if len(plan.NewNodes) != 5 {
		t.Fatalf("%d new nodes, want 5", len(plan.NewNodes))
	}
	var onReserved, onDemand int
	for _, n := range plan.NewNodes {
		ct, _ := n.Requirements.Get(v1.CapacityTypeLabelKey)
		switch n.Offering.CapacityType {
		case reserved:
			onReserved++
			if n.InstanceType.Name != "fake-it-1" || n.Offering.Zone != "zone-b" {
				t.Errorf("%s: reserved offering of %s in %s, want fake-it-1 in zone-b", n.Name, n.InstanceType.Name, n.Offering.Zone)
			}
		case v1.CapacityTypeOnDemand:
			onDemand++
			if ct.Has(reserved) {
				t.Errorf("%s falls back to on-demand but its requirements %s still allow reserved", n.Name, n.Requirements)
			}
		default:
			t.Errorf("%s: capacity type %q", n.Name, n.Offering.CapacityType)
		}
	}
	if onReserved != 2 || onDemand != 3 {
		t.Errorf("%d nodes reserved and %d on-demand, want 2 and 3 (the reservation has 2 left)", onReserved, onDemand)
	}
}

// A NodePool that allows on-demand but not reserved never gets the reservation; one
// without a capacity-type requirement prefers it.
func TestReservedOnlyWhereAllowed(t *testing.T) {
	types := withReservation(schedtest.SyntheticTypes(4), "fake-it-1", "zone-b", 5)
	for _, tc := range []struct {
		name string
		np   *v1.NodePool
		want string
	}{
		{"on-demand only", makeNodePool("od", requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeOnDemand)), v1.CapacityTypeOnDemand},
		{"unconstrained", makeNodePool("any"), reserved},
		{"reserved only", makeNodePool("res", requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, reserved)), reserved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan := solve(t, &Input{Pods: pods(1, "web", "1500m", "1Gi"), NodePools: []*NodePool{pool(tc.np, types)}})
			if len(plan.NewNodes) != 1 {
				t.Fatalf("%d new nodes, want 1", len(plan.NewNodes))
			}
			if got := plan.NewNodes[0].Offering.CapacityType; got != tc.want {
				t.Errorf("capacity type %s, want %s", got, tc.want)
			}
		})
	}
}

// A used-up reservation is not offered at all.
func TestReservedUsedUp(t *testing.T) {
	types := withReservation(schedtest.SyntheticTypes(4), "fake-it-1", "zone-b", 0)
	np := makeNodePool("default", requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, reserved, v1.CapacityTypeOnDemand))
	plan := solve(t, &Input{Pods: pods(1, "web", "1500m", "1Gi"), NodePools: []*NodePool{pool(np, types)}})
	if len(plan.NewNodes) != 1 || plan.NewNodes[0].Offering.CapacityType != v1.CapacityTypeOnDemand {
		t.Fatalf("want one on-demand node, got %+v", plan.NewNodes)
	}
}
