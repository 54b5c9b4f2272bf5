package aws

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

// A capacity block's nodes are drained ten minutes before EC2 starts taking its
// instances, thirty minutes before the block ends; other nodes, and blocks further
// off, are left alone.
func TestCapacityBlockNotices(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	claim := func(name, reservation, providerID string) v1.NodeClaim {
		nc := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			LabelCapacityReservationID: reservation, LabelCapacityReservationType: "capacity-block"}}}
		nc.Status.ProviderID = providerID
		return nc
	}
	deleting := claim("deleting", "cr-ending", "aws:///us-east-1a/i-3")
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	claims := []v1.NodeClaim{
		claim("ending", "cr-ending", "aws:///us-east-1a/i-1"),
		claim("later", "cr-later", "aws:///us-east-1a/i-2"),
		deleting,
		claim("launching", "cr-ending", ""),
		claim("unknown", "cr-gone", "aws:///us-east-1a/i-4"),
	}
	ends := map[string]time.Time{
		"cr-ending": now.Add(39 * time.Minute), // reclaimed at +9m: inside the 10m lead
		"cr-later":  now.Add(41 * time.Minute), // reclaimed at +11m: not yet
	}
	got := capacityBlockNotices(claims, ends, now)
	want := []cloudprovider.Interruption{{ProviderID: "aws:///us-east-1a/i-1", At: now.Add(9 * time.Minute), Kind: KindCapacityBlockExpiring}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
	if got := capacityBlockNotices(claims, ends, now.Add(time.Minute)); len(got) != 2 {
		t.Errorf("a minute later both blocks are due, got %+v", got)
	}
}

type staticSource struct {
	notices []cloudprovider.Interruption
	err     error
}

func (s staticSource) Interruptions(context.Context) ([]cloudprovider.Interruption, error) {
	return s.notices, s.err
}

// One source failing does not hide another's notices.
func TestInterruptionsMerged(t *testing.T) {
	broken := errors.New("queue unreachable")
	merged := Interruptions{staticSource{err: broken}, staticSource{notices: []cloudprovider.Interruption{{ProviderID: "aws:///a/i-1", Kind: KindCapacityBlockExpiring}}}}
	got, err := merged.Interruptions(context.Background())
	if !errors.Is(err, broken) || len(got) != 1 || got[0].ProviderID != "aws:///a/i-1" {
		t.Errorf("got %+v, %v; want the working source's notice and the other's error", got, err)
	}
}

// Through the real SDK and API server: a node launched into a capacity block is
// announced once the block ends in 35 minutes, read from its claim's labels and
// the EC2NodeClass's resolved end time. (A block that close to its end takes no
// new node: the node is launched two hours before.)
func TestCapacityBlockEnding(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{Seed: 0xcb10c, Inventory: func(inv *fakeaws.Inventory) {
		inv.CapacityReservations = append(inv.CapacityReservations,
			fakeaws.CapacityReservation{ID: "cr-0c0c0c0c0c0c0c0c0", InstanceType: "m5.xlarge", Zone: "us-east-1b", Total: 1, Available: 1,
				MatchCriteria: "targeted", Type: "capacity-block", EndDate: time.Now().Add(2 * time.Hour), Tags: map[string]string{"team": "blocks"}})
	}})
	e.opts.ReservedCapacity = true
	e.cloud = e.restart()
	nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
		nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "blocks"}}}
	})
	if len(nc.Status.CapacityReservations) != 1 || nc.Status.CapacityReservations[0].EndTime == nil {
		t.Fatalf("capacity reservations in status: %+v", nc.Status.CapacityReservations)
	}
	launched, err := e.cloud.Create(t.Context(), e.claim(nc, "ending-block", req(LabelCapacityReservationType, "capacity-block")))
	if err != nil {
		t.Fatal(err)
	}
	claim := launched.DeepCopy()
	claim.UID, claim.ResourceVersion = "", ""
	if err := kube.Create(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), claim) })
	claim.Status.ProviderID = launched.Status.ProviderID
	if err := kube.Status().Update(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	e.clock.Step(85 * time.Minute)
	got, err := NewCapacityBlocks(kube, e.clock).Interruptions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var mine []cloudprovider.Interruption
	for _, n := range got {
		if n.ProviderID == launched.Status.ProviderID {
			mine = append(mine, n)
		}
	}
	if len(mine) != 1 || mine[0].Kind != KindCapacityBlockExpiring {
		t.Fatalf("notices %+v, want the block's node announced", got)
	}
	if end := nc.Status.CapacityReservations[0].EndTime.Time; !mine[0].At.Equal(end.Add(-capacityBlockReclaim)) {
		t.Errorf("due at %s, want 30 minutes before the block's end %s", mine[0].At, end)
	}
}
