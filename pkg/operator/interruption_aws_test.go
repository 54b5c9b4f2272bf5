package operator

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	awscloud "github.com/nodetailor/tailor/pkg/cloudprovider/aws"
)

// The controller with the aws provider reading the fake's interruption queue: a
// rebalance recommendation is only recorded; the spot interruption warning that
// follows deletes the NodeClaim, and the replacement avoids the reclaimed
// offering.
func TestAWSSpotInterruption(t *testing.T) {
	// Run registers its metrics with controller-runtime's global registry, and its
	// controller names in a global set: this second Run of the package's tests
	// (TestAWSProviderLaunchesAndTerminates, in an earlier file, is the first) gets a
	// registry of its own and skips the name check.
	prev := metrics.Registry
	metrics.Registry = prometheus.NewRegistry()
	t.Cleanup(func() { metrics.Registry = prev })
	fake := startFakeAWS(t, fakeaws.Options{Seed: 0x5907, TerminationDelay: 100 * time.Millisecond, InterruptionDelay: time.Hour})
	cluster := runAWSController(t, fake, func(opts *Options) {
		opts.AWS.InterruptionQueue = fake.InterruptionQueue()
		opts.skipNameValidation = true
		opts.InterruptionInterval = 200 * time.Millisecond
	})
	kube := env.kube
	nc, pool := awsNodePool(t, "aws-spot", cluster, v1.CapacityTypeSpot)
	pod := unschedulablePod(t, newNamespace(t), "batch")

	// launched is a launched NodeClaim of the pool, not deleting, not in old.
	launched := func(old map[string]bool) (v1.NodeClaim, bool) {
		claims := &v1.NodeClaimList{}
		if err := kube.List(t.Context(), claims, client.MatchingLabels{v1.NodePoolLabelKey: pool.Name}); err != nil {
			t.Fatal(err)
		}
		for _, c := range claims.Items {
			if !old[c.Name] && c.Status.ProviderID != "" && c.DeletionTimestamp == nil {
				return c, true
			}
		}
		return v1.NodeClaim{}, false
	}
	var claim v1.NodeClaim
	eventually(t, awsWait, func() (bool, string) {
		var ok bool
		claim, ok = launched(nil)
		return ok, "no launched NodeClaim; NodeClass " + nodeClassReady(t, nc.Name)
	})
	instanceID, err := awscloud.ParseProviderID(claim.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	if err := fake.RecommendRebalance(instanceID); err != nil {
		t.Fatal(err)
	}
	eventually(t, awsWait, func() (bool, string) {
		// Karpenter's event reason for the notice.
		return hasEvent(t, claim.Name, "SpotRebalanceRecommendation") && fake.QueueDepth(fake.InterruptionQueue()) == 0,
			"no SpotRebalanceRecommendation event on NodeClaim " + claim.Name
	})
	before := &v1.NodeClaimList{}
	if err := kube.List(t.Context(), before, client.MatchingLabels{v1.NodePoolLabelKey: pool.Name}); err != nil {
		t.Fatal(err)
	}
	old := map[string]bool{}
	for _, c := range before.Items {
		old[c.Name] = true
	}
	if err := fake.InterruptSpot(instanceID); err != nil {
		t.Fatal(err)
	}
	// The claim still stood when the warning came (a rebalance would have had it
	// deleting, and the warning would then not be recorded on it).
	eventually(t, awsWait, func() (bool, string) {
		got := &v1.NodeClaim{}
		err := kube.Get(t.Context(), client.ObjectKeyFromObject(&claim), got)
		gone := client.IgnoreNotFound(err) == nil && (err != nil || got.DeletionTimestamp != nil)
		return gone && hasEvent(t, claim.Name, "SpotInterrupted"),
			fmt.Sprintf("NodeClaim %s not deleted with a SpotInterruption event (lookup: %s)", claim.Name, errString(err))
	})
	if depth := fake.QueueDepth(fake.InterruptionQueue()); depth != 0 {
		t.Errorf("%d messages left on the interruption queue", depth)
	}

	// The pod's replacement is launched on another offering: the reclaimed one is
	// marked unavailable.
	var replacement v1.NodeClaim
	eventually(t, awsWait, func() (bool, string) {
		var ok bool
		replacement, ok = launched(old)
		return ok, "no replacement NodeClaim launched"
	})
	was := claim.Labels[v1.LabelInstanceType] + "/" + claim.Labels[v1.LabelZone]
	now := replacement.Labels[v1.LabelInstanceType] + "/" + replacement.Labels[v1.LabelZone]
	if was == now || replacement.Labels[v1.CapacityTypeLabelKey] != v1.CapacityTypeSpot {
		t.Errorf("replacement %s is on %s %s, the interrupted claim was on %s", replacement.Name, now,
			replacement.Labels[v1.CapacityTypeLabelKey], was)
	}

	if err := kube.Delete(t.Context(), pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	if err := kube.Delete(t.Context(), &replacement); err != nil {
		t.Fatal(err)
	}
	eventually(t, awsWait, func() (bool, string) {
		_, ok := launched(nil)
		return !ok, "NodeClaims of the NodePool left"
	})
}

// hasEvent says whether an event with reason is recorded on the named NodeClaim.
func hasEvent(t *testing.T, claim, reason string) bool {
	events := &corev1.EventList{}
	if err := env.kube.List(t.Context(), events); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "NodeClaim" && e.InvolvedObject.Name == claim && e.Reason == reason {
			return true
		}
	}
	return false
}
