package aws

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/metrics"
)

// Each offering a fleet answer fails counts once, in its zone and zone ID, with
// the fleet's capacity type and Karpenter's reason for the error. Not parallel: the
// counters are the package's, and the parallel tests fail fleets too.
func TestLaunchFailuresCounted(t *testing.T) {
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	e.fake.SetFleetQuotaExceeded(true)
	zoneID := zoneIDOf(nc, "us-east-1a")
	if zoneID == "" {
		t.Fatal("the NodeClass's subnet in us-east-1a has no zone ID")
	}
	failed := launchFailures.WithLabelValues("us-east-1a", zoneID, "on-demand", "FleetQuotaExceeded")
	before := testutil.ToFloat64(failed)
	if _, err := e.cloud.Create(t.Context(), e.claim(nc, "quota", req(v1.LabelInstanceType, "m5.large"), req(v1.CapacityTypeLabelKey, "on-demand"),
		req(v1.LabelZone, "us-east-1a"))); err == nil {
		t.Fatal("the launch succeeded at the fleet quota")
	}
	if got := testutil.ToFloat64(failed) - before; got != 1 {
		t.Errorf("launch_failures_total{zone=us-east-1a, capacity_type=on-demand, reason=FleetQuotaExceeded} grew by %v, want 1", got)
	}
}

// A TerminateInstances call that fails counts once, in the instance's zone.
func TestTerminationFailuresCounted(t *testing.T) {
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	got, err := e.cloud.Create(t.Context(), e.claim(nc, "stubborn", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelZone, "us-east-1b")))
	if err != nil {
		t.Fatal(err)
	}
	failed := terminationFailures.WithLabelValues("us-east-1b", zoneIDOf(nc, "us-east-1b"))
	before := testutil.ToFloat64(failed)
	e.fake.ThrottleNext("ec2:TerminateInstances", 100)
	if err := e.cloud.Delete(t.Context(), got); err == nil {
		t.Fatal("the delete succeeded while EC2 throttled every TerminateInstances")
	}
	if got := testutil.ToFloat64(failed) - before; got != 1 {
		t.Errorf("termination_failures_total{zone=us-east-1b} grew by %v, want 1", got)
	}
}

func TestLaunchFailureReason(t *testing.T) {
	for _, tc := range []struct{ code, msg, want string }{
		{"InsufficientInstanceCapacity", "We currently do not have sufficient capacity", "LaunchFailed"},
		{"UnfulfillableCapacity", "Unable to fulfill capacity due to your request configuration", "LaunchFailed"},
		{"MaxSpotInstanceCountExceeded", "Max spot instance count exceeded", "SpotQuotaExceeded"},
		{"AuthFailure.ServiceLinkedRoleCreationNotPermitted", "not permitted", "SpotSLRCreationFailed"},
		{"UnauthorizedOperation", "You are not authorized to perform this operation.", "Unauthorized"},
		{"UnauthorizedOperation", "Not authorized for images: [ami-1]", "AMIAuthorizationFailure"},
		{"InvalidAMIID.NotFound", "The image id '[ami-1]' does not exist", "AMINotFound"},
		{"VcpuLimitExceeded", "You have requested more vCPU capacity", "VCPULimitExceeded"},
		{"InsufficientFreeAddressesInSubnet", "no free addresses", "InsufficientFreeAddressesInSubnet"},
	} {
		if got := launchFailureReason(tc.code, tc.msg); got != tc.want {
			t.Errorf("launchFailureReason(%s, %q) = %s, want %s", tc.code, tc.msg, got, tc.want)
		}
	}
}

// The queue duration has the buckets of Karpenter's AWS provider: its duration
// buckets, 5 ms to 10 min.
func TestInterruptionQueueDurationBuckets(t *testing.T) {
	m := &dto.Metric{}
	if err := interruptionQueueDuration.Write(m); err != nil {
		t.Fatal(err)
	}
	var got []float64
	for _, b := range m.GetHistogram().GetBucket() {
		got = append(got, b.GetUpperBound())
	}
	if diff := cmp.Diff(metrics.DurationBuckets(), got); diff != "" {
		t.Errorf("karpenter_interruption_message_queue_duration_seconds buckets (-Karpenter's +got):\n%s", diff)
	}
}
