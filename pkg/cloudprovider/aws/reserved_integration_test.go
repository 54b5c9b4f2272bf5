package aws

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

const (
	odcrID  = "cr-0a0a0a0a0a0a0a0a0"
	blockID = "cr-0b0b0b0b0b0b0b0b0"
)

// newReservedEnv is a cloud with a targeted ODCR of two m5.large in us-east-1a and
// a capacity block of one m5.xlarge in us-east-1b, and a provider with the
// ReservedCapacity gate as given. A test that puts its claims in the shared API
// server passes a seed of its own, so that its instance IDs are not other tests'.
func newReservedEnv(t *testing.T, gate bool, seed uint64) (*testEnv, *awsv1.EC2NodeClass) {
	t.Helper()
	e := newTestEnv(t, fakeaws.Options{Seed: seed, Inventory: func(inv *fakeaws.Inventory) {
		inv.CapacityReservations = append(inv.CapacityReservations,
			fakeaws.CapacityReservation{ID: odcrID, InstanceType: "m5.large", Zone: "us-east-1a", Total: 2, Available: 2,
				MatchCriteria: "targeted", Type: "default", Tags: map[string]string{"team": "payments"}},
			fakeaws.CapacityReservation{ID: blockID, InstanceType: "m5.xlarge", Zone: "us-east-1b", Total: 1, Available: 1,
				MatchCriteria: "targeted", Type: "capacity-block", Tags: map[string]string{"team": "payments"}})
	}})
	e.opts.ReservedCapacity = gate
	e.cloud = e.restart()
	nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
		nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "payments"}}}
	})
	if len(nc.Status.CapacityReservations) != 2 {
		t.Fatalf("capacity reservations in status: %+v", nc.Status.CapacityReservations)
	}
	return e, nc
}

func offering(t *testing.T, types []*scheduling.InstanceType, name, zone, captype string) (scheduling.Offering, bool) {
	t.Helper()
	for _, it := range types {
		if it.Name != name {
			continue
		}
		for _, o := range it.Offerings {
			if o.Zone == zone && o.CapacityType == captype {
				return o, true
			}
		}
	}
	return scheduling.Offering{}, false
}

func (e *testEnv) pool(nc *awsv1.EC2NodeClass) *v1.NodePool {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nc.Name}
	return np
}

func (e *testEnv) instanceOf(t *testing.T, claim *v1.NodeClaim) fakeaws.Instance {
	t.Helper()
	id, err := ParseProviderID(claim.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	inst, ok := e.fake.Instance(id)
	if !ok {
		t.Fatalf("no instance %s", id)
	}
	return inst
}

func (e *testEnv) reservationLeft(t *testing.T, id string) int {
	t.Helper()
	for _, r := range e.fake.InventorySnapshot().CapacityReservations {
		if r.ID == id {
			return r.Available
		}
	}
	t.Fatalf("no reservation %s", id)
	return 0
}

// A reservation is offered as capacity type reserved, nearly free, bounded by what
// it has left; launches into it until it is full, and then fall back to on-demand.
func TestReservedLaunchesUntilFull(t *testing.T) {
	t.Parallel()
	e, nc := newReservedEnv(t, true, 0)
	types, err := e.cloud.InstanceTypes(t.Context(), e.pool(nc))
	if err != nil {
		t.Fatal(err)
	}
	res, ok := offering(t, types, "m5.large", "us-east-1a", CapacityTypeReserved)
	if !ok || !res.Available || res.ReservationCapacity != 2 {
		t.Fatalf("reserved offering of m5.large in us-east-1a: %+v (%v), want available with 2 left", res, ok)
	}
	od, _ := offering(t, types, "m5.large", "us-east-1a", CapacityTypeOnDemand)
	spot, _ := offering(t, types, "m5.large", "us-east-1a", CapacityTypeSpot)
	if !(res.Price < spot.Price && res.Price < od.Price) {
		t.Errorf("reserved price %v is not below spot %v and on-demand %v", res.Price, spot.Price, od.Price)
	}
	if _, ok := offering(t, types, "m5.large", "us-east-1b", CapacityTypeReserved); ok {
		t.Error("a reserved offering in a zone without a reservation")
	}

	anyCapacity := req(v1.CapacityTypeLabelKey, CapacityTypeReserved, CapacityTypeOnDemand, CapacityTypeSpot)
	for i, name := range []string{"res-1", "res-2"} {
		got, err := e.cloud.Create(t.Context(), e.claim(nc, name, anyCapacity))
		if err != nil {
			t.Fatal(err)
		}
		inst := e.instanceOf(t, got)
		if got.Labels[v1.CapacityTypeLabelKey] != CapacityTypeReserved || got.Labels[LabelCapacityReservationID] != odcrID ||
			got.Labels[LabelCapacityReservationType] != "default" || got.Labels[v1.LabelInstanceType] != "m5.large" {
			t.Errorf("%s: labels %v, want reserved in %s", name, got.Labels, odcrID)
		}
		if inst.CapacityReservationID != odcrID || inst.CapacityType != "on-demand" {
			t.Errorf("%s: instance %+v is not an on-demand instance in %s", name, inst, odcrID)
		}
		if left := e.reservationLeft(t, odcrID); left != 1-i {
			t.Errorf("after %s the reservation has %d left, want %d", name, left, 1-i)
		}
		// Get reads the reservation back from EC2.
		if g, err := e.cloud.Get(t.Context(), got.Status.ProviderID); err != nil || g.Labels[LabelCapacityReservationID] != odcrID ||
			g.Labels[v1.CapacityTypeLabelKey] != CapacityTypeReserved {
			t.Errorf("get %s: %v, %v", name, g, err)
		}
	}
	// The template targets the reservation.
	targeted := 0
	for _, lt := range e.fake.LaunchTemplates() {
		if lt.Data["CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"] == odcrID {
			targeted++
		}
	}
	if targeted != 1 {
		t.Errorf("%d launch templates target %s, want 1", targeted, odcrID)
	}

	// Full: no longer offered, and the next launch is on-demand, out of open
	// reservations.
	types, err = e.cloud.InstanceTypes(t.Context(), e.pool(nc))
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := offering(t, types, "m5.large", "us-east-1a", CapacityTypeReserved); res.Available {
		t.Errorf("full reservation still offered: %+v", res)
	}
	got, err := e.cloud.Create(t.Context(), e.claim(nc, "od", req(v1.CapacityTypeLabelKey, CapacityTypeReserved, CapacityTypeOnDemand),
		req(v1.LabelInstanceType, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[v1.CapacityTypeLabelKey] != CapacityTypeOnDemand || got.Labels[LabelCapacityReservationID] != "" {
		t.Errorf("fallback labels %v, want on-demand without a reservation", got.Labels)
	}
	inst := e.instanceOf(t, got)
	for _, lt := range e.fake.LaunchTemplates() {
		if lt.ID == "" || lt.Data["CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"] != "" {
			continue
		}
		if pref := lt.Data["CapacityReservationSpecification.CapacityReservationPreference"]; pref != "none" {
			t.Errorf("template %s for %s: capacity reservation preference %q, want none", lt.Name, inst.ID, pref)
		}
	}
}

// A NodePool that allows on-demand but not reserved gets no reservation, and with
// the gate off no reservation is offered at all.
func TestReservedOnlyWhenAllowed(t *testing.T) {
	t.Parallel()
	e, nc := newReservedEnv(t, true, 0)
	got, err := e.cloud.Create(t.Context(), e.claim(nc, "od-only", req(v1.CapacityTypeLabelKey, CapacityTypeOnDemand), req(v1.LabelInstanceType, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[v1.CapacityTypeLabelKey] != CapacityTypeOnDemand || e.instanceOf(t, got).CapacityReservationID != "" {
		t.Errorf("on-demand-only claim launched %v into %q", got.Labels, e.instanceOf(t, got).CapacityReservationID)
	}

	off, ncOff := newReservedEnv(t, false, 0)
	types, err := off.cloud.InstanceTypes(t.Context(), off.pool(ncOff))
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		for _, o := range it.Offerings {
			if o.CapacityType == CapacityTypeReserved {
				t.Fatalf("gate off, yet %s offers %+v", it.Name, o)
			}
		}
	}
	if _, err := off.cloud.Create(t.Context(), off.claim(ncOff, "reserved-only", req(v1.CapacityTypeLabelKey, CapacityTypeReserved))); !cloudprovider.IsInsufficientCapacity(err) {
		t.Errorf("gate off, a reserved-only claim: %v, want insufficient capacity", err)
	}
}

// When the reservation fills up behind the provider's back, EC2's
// ReservationCapacityExceeded marks the reserved offering unavailable and the
// next launch goes on-demand.
func TestReservationCapacityExceeded(t *testing.T) {
	t.Parallel()
	e, nc := newReservedEnv(t, true, 0)
	other := e.restart()
	if _, err := NewNodeClassController(kube, other).Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"other-1", "other-2"} {
		if _, err := other.Create(t.Context(), e.claim(nc, name, req(v1.CapacityTypeLabelKey, CapacityTypeReserved))); err != nil {
			t.Fatal(err)
		}
	}
	reservedFirst := req(v1.CapacityTypeLabelKey, CapacityTypeReserved, CapacityTypeOnDemand)
	_, err := e.cloud.Create(t.Context(), e.claim(nc, "stale", reservedFirst, req(v1.LabelInstanceType, "m5.large")))
	var ice *cloudprovider.InsufficientCapacityError
	if !errors.As(err, &ice) {
		t.Fatalf("launch into a full reservation: %v, want insufficient capacity", err)
	}
	types, err := e.cloud.InstanceTypes(t.Context(), e.pool(nc))
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := offering(t, types, "m5.large", "us-east-1a", CapacityTypeReserved); res.Available {
		t.Errorf("reserved offering still available after ReservationCapacityExceeded: %+v", res)
	}
	got, err := e.cloud.Create(t.Context(), e.claim(nc, "retry", reservedFirst, req(v1.LabelInstanceType, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[v1.CapacityTypeLabelKey] != CapacityTypeOnDemand {
		t.Errorf("retry labels %v, want on-demand", got.Labels)
	}
}

// A capacity block launches in the capacity-block market, and a claim can ask for
// one by its reservation-type label.
func TestCapacityBlockLaunch(t *testing.T) {
	t.Parallel()
	e, nc := newReservedEnv(t, true, 0)
	got, err := e.cloud.Create(t.Context(), e.claim(nc, "block", req(v1.CapacityTypeLabelKey, CapacityTypeReserved),
		req(LabelCapacityReservationType, "capacity-block")))
	if err != nil {
		t.Fatal(err)
	}
	inst := e.instanceOf(t, got)
	if inst.CapacityType != "capacity-block" || inst.CapacityReservationID != blockID || inst.Type != "m5.xlarge" {
		t.Errorf("instance %+v, want an m5.xlarge in capacity block %s", inst, blockID)
	}
	if got.Labels[LabelCapacityReservationID] != blockID || got.Labels[LabelCapacityReservationType] != "capacity-block" {
		t.Errorf("labels %v", got.Labels)
	}
	g, err := e.cloud.Get(t.Context(), got.Status.ProviderID)
	if err != nil || g.Labels[LabelCapacityReservationType] != "capacity-block" {
		t.Errorf("get: %v, %v", g, err)
	}
	// The block is used up: a claim that must have one gets none, not on-demand.
	if _, err := e.cloud.Create(t.Context(), e.claim(nc, "block-2", req(LabelCapacityReservationType, "capacity-block"))); !cloudprovider.IsInsufficientCapacity(err) {
		t.Errorf("second capacity-block claim: %v, want insufficient capacity", err)
	}
}

// When EC2 no longer shows an instance in a reservation, its NodeClaim and Node
// are relabelled on-demand, as Karpenter does: whether the instance was moved out
// (the NodeClass's status does not change) or the reservation cancelled.
func TestLapsedReservationRelabelled(t *testing.T) {
	t.Parallel()
	e, nc := newReservedEnv(t, true, 0x2e5e2)
	launched, err := e.cloud.Create(t.Context(), e.claim(nc, "lapse-"+nc.Name, req(v1.CapacityTypeLabelKey, CapacityTypeReserved, CapacityTypeOnDemand)))
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + nc.Name, Labels: map[string]string{}}}
	for k, v := range launched.Labels {
		node.Labels[k] = v
	}
	if err := kube.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(t.Context(), node) })
	claim := launched.DeepCopy()
	claim.UID, claim.ResourceVersion = "", ""
	if err := kube.Create(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(t.Context(), claim) })
	claim.Status.ProviderID, claim.Status.NodeName = launched.Status.ProviderID, node.Name
	if err := kube.Status().Update(t.Context(), claim); err != nil {
		t.Fatal(err)
	}

	// Still in the reservation: nothing changes.
	e.reconcile(t, nc)
	if err := kube.Get(t.Context(), client.ObjectKeyFromObject(claim), claim); err != nil {
		t.Fatal(err)
	}
	if claim.Labels[v1.CapacityTypeLabelKey] != CapacityTypeReserved {
		t.Fatalf("relabelled while still reserved: %v", claim.Labels)
	}

	if err := e.fake.RemoveFromCapacityReservation(e.instanceOf(t, launched).ID); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, nc)
	if err := kube.Get(t.Context(), client.ObjectKeyFromObject(claim), claim); err != nil {
		t.Fatal(err)
	}
	if err := kube.Get(t.Context(), client.ObjectKeyFromObject(node), node); err != nil {
		t.Fatal(err)
	}
	for what, labels := range map[string]map[string]string{"nodeclaim": claim.Labels, "node": node.Labels} {
		if labels[v1.CapacityTypeLabelKey] != CapacityTypeOnDemand || labels[LabelCapacityReservationID] != "" || labels[LabelCapacityReservationType] != "" {
			t.Errorf("%s labels after the instance left its reservation: %v", what, labels)
		}
	}

	// A cancelled reservation: the second claim's instance leaves it too.
	second, err := e.cloud.Create(t.Context(), e.claim(nc, "lapse2-"+nc.Name, req(v1.CapacityTypeLabelKey, CapacityTypeReserved)))
	if err != nil {
		t.Fatal(err)
	}
	claim2 := second.DeepCopy()
	claim2.UID, claim2.ResourceVersion = "", ""
	if err := kube.Create(t.Context(), claim2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(t.Context(), claim2) })
	claim2.Status.ProviderID = second.Status.ProviderID
	if err := kube.Status().Update(t.Context(), claim2); err != nil {
		t.Fatal(err)
	}
	if err := e.fake.CancelCapacityReservation(odcrID); err != nil {
		t.Fatal(err)
	}
	nc = e.reconcile(t, nc)
	if len(nc.Status.CapacityReservations) != 1 {
		t.Errorf("the cancelled reservation is still in the status: %+v", nc.Status.CapacityReservations)
	}
	if err := kube.Get(t.Context(), client.ObjectKeyFromObject(claim2), claim2); err != nil {
		t.Fatal(err)
	}
	if claim2.Labels[v1.CapacityTypeLabelKey] != CapacityTypeOnDemand {
		t.Errorf("labels after the reservation was cancelled: %v", claim2.Labels)
	}
}
