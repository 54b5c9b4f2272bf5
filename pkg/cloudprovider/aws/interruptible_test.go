package aws

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

const lentID = "cr-0c0c0c0c0c0c0c0c0"

// An interruptible capacity reservation (lent out of another, whose owner may take
// it back) is resolved into the NodeClass's status as interruptible, offered as
// reserved after default reservations, launched into as EC2 wants (a
// reserved-capacity fleet of reservation type interruptible-capacity-reservation,
// its template's market type the same), and its node labelled
// karpenter.k8s.aws/capacity-reservation-interruptible=true. When the owner takes
// the capacity back, the EC2 Capacity Reservation Instance Interruption Warning
// interrupts the node when EC2 says, and the reservation takes no new node.
func TestInterruptibleCapacityReservation(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{Seed: 0x25601, InterruptionDelay: time.Hour, Inventory: func(inv *fakeaws.Inventory) {
		inv.CapacityReservations = append(inv.CapacityReservations,
			fakeaws.CapacityReservation{ID: lentID, InstanceType: "m5.large", Zone: "us-east-1a", Total: 2, Available: 2,
				MatchCriteria: "targeted", Type: "default", Interruptible: true, Source: "cr-0d0d0d0d0d0d0d0d0",
				Tags: map[string]string{"team": "lent"}})
	}})
	e.opts.ReservedCapacity = true
	e.cloud = e.restart()
	nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
		nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "lent"}}}
	})
	if len(nc.Status.CapacityReservations) != 1 || !nc.Status.CapacityReservations[0].Interruptible {
		t.Fatalf("status capacity reservations %+v, want the one, interruptible", nc.Status.CapacityReservations)
	}

	launched, err := e.cloud.Create(t.Context(), e.claim(nc, "lent-1", req(v1.LabelInstanceType, "m5.large"),
		req(v1.CapacityTypeLabelKey, CapacityTypeReserved, CapacityTypeOnDemand)))
	if err != nil {
		t.Fatal(err)
	}
	inst := e.instanceOf(t, launched)
	if inst.CapacityReservationID != lentID || inst.CapacityType != "reserved-capacity" {
		t.Fatalf("instance in reservation %q bought as %q, want %s as reserved-capacity", inst.CapacityReservationID, inst.CapacityType, lentID)
	}
	wantLabels := map[string]string{v1.CapacityTypeLabelKey: CapacityTypeReserved, LabelCapacityReservationID: lentID,
		LabelCapacityReservationType: "default", LabelCapacityReservationInterruptible: "true"}
	got, err := e.cloud.Get(t.Context(), launched.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range wantLabels {
		if launched.Labels[k] != v || got.Labels[k] != v {
			t.Errorf("label %s: launched %q, read back %q; want %q", k, launched.Labels[k], got.Labels[k], v)
		}
	}

	// The claim as the cluster has it, for the queue to find.
	claim := e.claim(nc, "lent-1", req(v1.LabelInstanceType, "m5.large"))
	claim.UID, claim.Labels = "", launched.Labels
	if err := kube.Create(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), claim) })
	claim.Status.ProviderID = launched.Status.ProviderID
	if err := kube.Status().Update(t.Context(), claim); err != nil {
		t.Fatal(err)
	}

	var reclaimed []string
	q := NewInterruptionQueue(e.clients.SQS, e.fake.InterruptionQueue(), kube, e.clock).
		OnReservationReclaimed(func(id string) { reclaimed = append(reclaimed, id); e.cloud.ReservationReclaimed(id) })
	q.Wait = 0
	before := time.Now()
	if err := e.fake.ReclaimCapacityReservation(lentID, 2); err != nil {
		t.Fatal(err)
	}
	notices, err := q.Interruptions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []cloudprovider.Interruption{{ProviderID: launched.Status.ProviderID, Kind: KindCapacityReservationInterruption}}
	if d := cmp.Diff(want, notices, cmpopts.IgnoreFields(cloudprovider.Interruption{}, "At")); d != "" {
		t.Fatalf("interruptions (-want +got):\n%s", d)
	}
	if at := notices[0].At; at.Before(before.Add(59*time.Minute)) || at.After(time.Now().Add(time.Hour)) {
		t.Errorf("interrupted at %s, want the warning's instance-termination-time, an hour on", at)
	}
	if !cmp.Equal(reclaimed, []string{lentID}) {
		t.Errorf("reservations reclaimed %q, want %s", reclaimed, lentID)
	}
	types, err := e.cloud.InstanceTypes(t.Context(), e.pool(nc))
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offering(t, types, "m5.large", "us-east-1a", CapacityTypeReserved); !ok || o.Available {
		t.Errorf("reserved offering after the reclaim: %+v (%v), want it listed and unavailable", o, ok)
	}
}

// The warning as AWS's user guide shows it.
func TestParseCapacityReservationInterruption(t *testing.T) {
	body := `{"version":"0","id":"12345678-1234-1234-1234-123456789012","detail-type":"EC2 Capacity Reservation Instance Interruption Warning",` +
		`"source":"aws.ec2","account":"123456789012","time":"2026-03-01T10:00:00Z","resources":["arn:aws:ec2:us-east-1:123456789012:instance/i-0abc"],` +
		`"region":"us-east-1","detail":{"instance-id":"i-0abc","instance-action":"terminate","instance-termination-time":"2026-03-01T10:02:00Z","azId":"use1-az1"}}`
	notices, err := parseMessage([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	got := claimed(notices, map[string]string{"i-0abc": "aws:///us-east-1a/i-0abc"})
	want := []cloudprovider.Interruption{{ProviderID: "aws:///us-east-1a/i-0abc", Kind: KindCapacityReservationInterruption,
		At: time.Date(2026, 3, 1, 10, 2, 0, 0, time.UTC)}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("interruptions (-want +got):\n%s", d)
	}
}
