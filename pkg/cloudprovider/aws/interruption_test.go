package aws

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

// Every kind of message the EventBridge rules deliver, read through the real SQS
// client from the fake's queue: each becomes the right interruption of this
// cluster's claim, or nothing, and every message is deleted.
func TestInterruptionQueue(t *testing.T) {
	t.Parallel()
	// A seed of its own: instance IDs must not collide with other tests' claims.
	// Nothing may change state on its own while a case runs: a stopping
	// instance that became stopped mid-receive would post a second event.
	e := newTestEnv(t, fakeaws.Options{Seed: 0x13013, InterruptionDelay: time.Hour, TerminationDelay: time.Hour})
	nc := e.nodeClass(t, nil)
	spot := []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelInstanceType, "m5.large"), req(v1.CapacityTypeLabelKey, "spot")}

	// ours has a NodeClaim in the cluster; foreign is an instance without one.
	launched, err := e.cloud.Create(t.Context(), e.claim(nc, "interrupted", spot...))
	if err != nil {
		t.Fatal(err)
	}
	ours := e.claim(nc, "interrupted", spot...)
	ours.UID = ""
	if err := kube.Create(t.Context(), ours); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), ours) })
	ours.Status.ProviderID = launched.Status.ProviderID
	if err := kube.Status().Update(t.Context(), ours); err != nil {
		t.Fatal(err)
	}
	oursID, err := ParseProviderID(ours.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := e.cloud.Create(t.Context(), e.claim(nc, "foreign", spot...))
	if err != nil {
		t.Fatal(err)
	}
	foreignID, err := ParseProviderID(foreign.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}

	q := NewInterruptionQueue(e.clients.SQS, e.fake.InterruptionQueue(), kube, e.clock)
	q.Wait = 0
	queue := e.fake.InterruptionQueue()
	send := func(body string) func() error { return func() error { return e.fake.SendMessage(queue, body) } }
	pid := ours.Status.ProviderID
	for _, tc := range []struct {
		name string
		post func() error
		want []cloudprovider.Interruption
	}{
		{"spot interruption warning", func() error { return e.fake.InterruptSpot(oursID) },
			[]cloudprovider.Interruption{{ProviderID: pid, Kind: KindSpotInterruption}}},
		{"rebalance recommendation", func() error { return e.fake.RecommendRebalance(oursID) },
			[]cloudprovider.Interruption{{ProviderID: pid, Kind: KindRebalanceRecommendation, RecordOnly: true}}},
		{"scheduled retirement", func() error { return e.fake.ScheduleChange(oursID, fakeaws.HealthInstanceRetirement, time.Hour) },
			[]cloudprovider.Interruption{{ProviderID: pid, Kind: KindScheduledChange}}},
		{"another instance's warning", func() error { return e.fake.InterruptSpot(foreignID) }, nil},
		{"not JSON", send(`{"version":"0","detail-type":`), nil},
		{"not an event", send(`{"hello":"world"}`), nil},
		{"malformed detail", send(`{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"2026-01-01T00:00:00Z","detail":"i-0"}`), nil},
		{"another service's health event", send(`{"source":"aws.health","detail-type":"AWS Health Event","time":"2026-01-01T00:00:00Z","detail":{"service":"RDS","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"` + oursID + `"}]}}`), nil},
		{"instance running", send(`{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","time":"2026-01-01T00:00:00Z","detail":{"instance-id":"` + oursID + `","state":"running"}}`), nil},
		{"instance stopping", func() error { e.fake.SetStateChangeEvents(true); return e.fake.StopInstance(oursID) },
			[]cloudprovider.Interruption{{ProviderID: pid, Kind: KindInstanceStopped}}},
	} {
		deletedBefore := testutil.ToFloat64(interruptionDeleted)
		if err := tc.post(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		posted := e.fake.QueueDepth(queue)
		if posted == 0 {
			t.Fatalf("%s: nothing on the queue", tc.name)
		}
		got, err := q.Interruptions(t.Context())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, n := range got {
			if n.At.IsZero() {
				t.Errorf("%s: %+v has no time", tc.name, n)
			}
		}
		if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(cloudprovider.Interruption{}, "At"), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: interruptions (-want +got):\n%s", tc.name, diff)
		}
		if n := e.fake.QueueDepth(queue); n != 0 {
			t.Errorf("%s: %d messages left on the queue", tc.name, n)
		}
		if d := testutil.ToFloat64(interruptionDeleted) - deletedBefore; d != float64(posted) {
			t.Errorf("%s: deleted_messages_total rose by %v, want %d", tc.name, d, posted)
		}
	}
}

// The spot warning's interruption is due two minutes after the event, a
// scheduled change's when its maintenance window opens.
func TestInterruptionTimes(t *testing.T) {
	ours := map[string]string{"i-0abc": "aws:///us-west-2a/i-0abc"}
	for _, tc := range []struct {
		body string
		want time.Time
	}{
		{`{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"2026-03-01T10:00:00Z","detail":{"instance-id":"i-0abc","instance-action":"terminate"}}`,
			time.Date(2026, 3, 1, 10, 2, 0, 0, time.UTC)},
		{`{"source":"aws.health","detail-type":"AWS Health Event","time":"2026-03-01T10:00:00Z","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","startTime":"Sun, 08 Mar 2026 04:00:00 GMT","affectedEntities":[{"entityValue":"i-0abc"},{"entityValue":"i-0other"}]}}`,
			time.Date(2026, 3, 8, 4, 0, 0, 0, time.UTC)},
	} {
		notices, err := parseMessage([]byte(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		got := claimed(notices, ours)
		if len(got) != 1 || !got[0].At.Equal(tc.want) {
			t.Errorf("%s: got %+v, want one at %s", tc.body, got, tc.want)
		}
	}
}
