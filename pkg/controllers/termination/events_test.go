package termination

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// The drain's events carry Karpenter's reasons: Evicted on an evicted pod,
// TerminationGracePeriodExpiring and FailedDraining on the node, Disrupted on a pod
// deleted at the deadline.
func TestDrainEventReasons(t *testing.T) {
	e := newEnv(t, cloud)
	events := record.NewFakeRecorder(100)
	e.c.recorder = events
	nc, node := e.launch("events", simRef, func(nc *v1.NodeClaim) {
		nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Minute}
	})
	web := e.pod("web-events", node.Name)
	held := e.pod("held-events", node.Name, func(p *corev1.Pod) { p.Annotations[v1.DoNotDisruptAnnotationKey] = "true" })
	e.eventually("the cache shows the pods", func(ctx context.Context) bool {
		pods := &corev1.PodList{}
		return cached.List(ctx, pods, client.MatchingFields{NodeNameIndex: node.Name}) == nil && len(pods.Items) == 2
	})
	e.deleteObj(nc)
	e.reconcileUntil("the claim terminated", e.c.Reconcile, nc.Name, func(ctx context.Context) bool { return gone(ctx, nc) })
	if !gone(t.Context(), web) || !gone(t.Context(), held) {
		t.Fatal("the pods were not removed")
	}
	var reasons []string
	for len(events.Events) > 0 {
		ev := <-events.Events
		reasons = append(reasons, strings.Join(strings.Fields(ev)[:2], " "))
	}
	for _, want := range []string{"Warning TerminationGracePeriodExpiring", "Normal Evicted", "Warning FailedDraining", "Normal Disrupted"} {
		found := false
		for _, r := range reasons {
			found = found || r == want
		}
		if !found {
			t.Errorf("no %q event; got %v", want, reasons)
		}
	}
	for _, r := range reasons {
		if r == "Normal DrainBlocked" || strings.HasSuffix(r, " Deleted") || strings.HasSuffix(r, " FailedEviction") {
			t.Errorf("event %q is not one of Karpenter's reasons", r)
		}
	}
}
