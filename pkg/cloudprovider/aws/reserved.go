package aws

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Capacity reservations (Karpenter's ReservedCapacity feature): each active
// reservation of the NodeClass's status is offered as capacity type "reserved" for
// its instance type and zone, while it has instances left.

// CapacityTypeReserved is the karpenter.sh/capacity-type of a node in a capacity
// reservation.
const CapacityTypeReserved = "reserved"

// The labels of a reserved node, as Karpenter names them; other nodes have neither.
const (
	LabelCapacityReservationID   = labelPrefix + "capacity-reservation-id"
	LabelCapacityReservationType = labelPrefix + "capacity-reservation-type"
	// LabelCapacityReservationInterruptible is "true" on a node of an
	// interruptible capacity reservation, "false" on other reserved nodes.
	LabelCapacityReservationInterruptible = labelPrefix + "capacity-reservation-interruptible"
)

// reservedPriceFactor prices a reserved offering at a millionth of the type's
// on-demand price: reservations are paid for whether used or not, so they come
// before spot and on-demand, and among them the smaller type still wins.
const reservedPriceFactor = 1e-6

// Reservation is a capacity reservation nodes may launch into, with how many
// instances it has left.
type Reservation struct {
	ID           string
	InstanceType string
	Zone         string
	Type         awsv1.CapacityReservationType
	// Interruptible reservations may be taken back by their owner.
	Interruptible bool
	Available     int
}

// reservationKind is how a reservation is launched into: one kind per launch.
type reservationKind struct {
	Type          awsv1.CapacityReservationType
	Interruptible bool
}

func (r Reservation) kind() reservationKind { return reservationKind{r.Type, r.Interruptible} }

// reservationKinds are the kinds in the order a launch tries them, as Karpenter
// prefers them: default reservations, then capacity blocks, then interruptible
// reservations, which may be taken back.
var reservationKinds = []reservationKind{
	{Type: awsv1.CapacityReservationTypeDefault},
	{Type: awsv1.CapacityReservationTypeCapacityBlock},
	{Type: awsv1.CapacityReservationTypeDefault, Interruptible: true},
}

// capacityBlockClosing is how long before its end a capacity block takes no new
// nodes: EC2 starts taking its instances back 30 minutes before the end, and its
// nodes are drained ten minutes before that (see CapacityBlocks), so a node
// launched later would be drained as soon as it came up.
const capacityBlockClosing = capacityBlockReclaim + capacityBlockDrainLead

// Reservations are the NodeClass's reservations in the zones of its subnets, with
// the instances they have left (available, by reservation ID, from
// DescribeCapacityReservations). A reservation launches nothing, and is still
// listed for the nodes already in it (their offering stays known, so they are not
// taken for drifted), while its room is unknown (this process has not read it
// yet: after a restart, until the NodeClass is resolved) and once it is a
// capacity block that is expiring or within capacityBlockClosing of its end at now.
func Reservations(nc *awsv1.EC2NodeClass, available map[string]int, now time.Time) []Reservation {
	zones := map[string]bool{}
	for _, s := range nc.Status.Subnets {
		zones[s.Zone] = true
	}
	var out []Reservation
	for _, cr := range nc.Status.CapacityReservations {
		if !zones[cr.AvailabilityZone] {
			continue
		}
		n := available[cr.ID]
		if cr.State == awsv1.CapacityReservationStateExpiring || cr.ReservationType == awsv1.CapacityReservationTypeCapacityBlock &&
			cr.EndTime != nil && !now.Before(cr.EndTime.Add(-capacityBlockClosing)) {
			n = 0
		}
		out = append(out, Reservation{ID: cr.ID, InstanceType: cr.InstanceType, Zone: cr.AvailabilityZone,
			Type: cmp.Or(cr.ReservationType, awsv1.CapacityReservationTypeDefault), Interruptible: cr.Interruptible, Available: n})
	}
	return out
}

// WithReservations adds to types a reserved offering per instance type and zone
// that has reservations: available while they have instances left, bounded by how
// many (the engine puts no more new nodes on it), priced at reservedPriceFactor of
// the type's on-demand price. A type without an on-demand price, or without
// reservations, is returned as it was.
func WithReservations(types []*scheduling.InstanceType, reservations []Reservation) []*scheduling.InstanceType {
	if len(reservations) == 0 {
		return types
	}
	left := map[[2]string]int{} // by type and zone
	for _, r := range reservations {
		left[[2]string{r.InstanceType, r.Zone}] += max(r.Available, 0)
	}
	out := make([]*scheduling.InstanceType, len(types))
	for i, it := range types {
		out[i] = it
		var zones []string
		for key := range left {
			if key[0] == it.Name {
				zones = append(zones, key[1])
			}
		}
		if len(zones) == 0 {
			continue
		}
		onDemand := map[string]float64{}
		for _, o := range it.Offerings {
			if o.CapacityType == CapacityTypeOnDemand {
				onDemand[o.Zone] = o.Price
			}
		}
		cp := *it
		cp.Offerings = slices.Clone(it.Offerings)
		added := false
		for _, z := range slices.Sorted(slices.Values(zones)) {
			price, ok := onDemand[z]
			if !ok {
				continue
			}
			n := left[[2]string{it.Name, z}]
			cp.Offerings = append(cp.Offerings, scheduling.Offering{Zone: z, CapacityType: CapacityTypeReserved,
				Price: price * reservedPriceFactor, Available: n > 0, ReservationCapacity: n})
			added = true
		}
		if !added {
			continue
		}
		cp.Requirements = withCapacityTypes(it.Requirements, cp.Offerings)
		out[i] = &cp
	}
	return out
}

// withCapacityTypes replaces the capacity-type requirement of reqs with the
// capacity types of offerings.
func withCapacityTypes(reqs scheduling.Requirements, offerings []scheduling.Offering) scheduling.Requirements {
	var cts []string
	for _, o := range offerings {
		cts = append(cts, o.CapacityType)
	}
	others := slices.DeleteFunc(slices.Clone(reqs), func(r scheduling.Requirement) bool { return r.Key == v1.CapacityTypeLabelKey })
	return others.With(scheduling.MustRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, cts...))
}

// reservationAllowed reports whether a claim's requirements admit a node in the
// reservation, by its ID, type and interruptible labels.
func reservationAllowed(reqs scheduling.Requirements, r Reservation) bool {
	return allows(reqs, LabelCapacityReservationID, r.ID) && allows(reqs, LabelCapacityReservationType, string(r.Type)) &&
		allows(reqs, LabelCapacityReservationInterruptible, strconv.FormatBool(r.Interruptible))
}

// needsReservation reports whether a claim's requirements admit only nodes that
// carry the reservation labels, which spot and on-demand nodes lack.
func needsReservation(reqs scheduling.Requirements) bool {
	for _, key := range []string{LabelCapacityReservationID, LabelCapacityReservationType, LabelCapacityReservationInterruptible} {
		if r, ok := reqs.Get(key); ok && !r.AllowsAbsent() {
			return true
		}
	}
	return false
}

// LapsedReservation returns the labels of a reserved claim (or its Node) whose
// instance EC2 no longer shows in a capacity reservation (it expired, was
// cancelled, or the instance was moved out): Karpenter then calls it on-demand and
// drops the reservation labels. changed is false when nothing is to be done.
func LapsedReservation(labels map[string]string, instanceReservationID string) (map[string]string, bool) {
	if labels[v1.CapacityTypeLabelKey] != CapacityTypeReserved || instanceReservationID != "" {
		return labels, false
	}
	out := maps.Clone(labels)
	out[v1.CapacityTypeLabelKey] = CapacityTypeOnDemand
	delete(out, LabelCapacityReservationID)
	delete(out, LabelCapacityReservationType)
	delete(out, LabelCapacityReservationInterruptible)
	return out, true
}

// reservationKey is a stable text of what reserved offerings are built from, to
// cache instance types by.
func reservationKey(rs []Reservation) string {
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.ID + "/" + r.InstanceType + "/" + r.Zone + "/" + string(r.Type) + "/" + strconv.FormatBool(r.Interruptible) + "/" + strconv.Itoa(r.Available) + ";")
	}
	return b.String()
}

// ReservationReclaimed takes the room of a capacity reservation whose owner is
// taking capacity back (an interruptible reservation's interruption warning),
// until the NodeClass's reservations are read again.
func (c *CloudProvider) ReservationReclaimed(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.reservationRoom[id]; ok {
		c.reservationRoom[id] = 0
	}
}
