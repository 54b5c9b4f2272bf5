package lifecycle

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
)

func TestInitializationDeadline(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cond := func(kind string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: kind, Status: status, LastTransitionTime: metav1.NewTime(at)}
	}
	tests := []struct {
		name       string
		conditions []metav1.Condition
		want       time.Time
		ok         bool
	}{
		{"launched only", []metav1.Condition{cond(v1.ConditionTypeLaunched, metav1.ConditionTrue)}, time.Time{}, false},
		{"registered", []metav1.Condition{cond(v1.ConditionTypeRegistered, metav1.ConditionTrue)}, at.Add(InitializationTimeout), true},
		{"registered, not initialized", []metav1.Condition{cond(v1.ConditionTypeRegistered, metav1.ConditionTrue),
			cond(v1.ConditionTypeInitialized, metav1.ConditionFalse)}, at.Add(InitializationTimeout), true},
		{"initialized", []metav1.Condition{cond(v1.ConditionTypeRegistered, metav1.ConditionTrue),
			cond(v1.ConditionTypeInitialized, metav1.ConditionTrue)}, time.Time{}, false},
	}
	for _, tt := range tests {
		got, ok := initializationDeadline(&v1.NodeClaim{Status: v1.NodeClaimStatus{Conditions: tt.conditions}})
		if ok != tt.ok || !got.Equal(tt.want) {
			t.Errorf("%s: got %v %v, want %v %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// A claim whose Node registered but never initialized is deleted InitializationTimeout
// after registration, with an event and the reason on its Initialized condition; a
// claim whose Node initialized is kept.
func TestInitializationTimeout(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c, kube, _, recorder := launchTest(t, clk, pendingClaim("stuck", clk.Now()), pendingClaim("fine", clk.Now()))
	ctx := t.Context()
	for name, ready := range map[string]corev1.ConditionStatus{"stuck": corev1.ConditionFalse, "fine": corev1.ConditionTrue} {
		if _, err := reconcileClaim(t, c, name); err != nil {
			t.Fatal(err)
		}
		nc := &v1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil || nc.Status.ProviderID == "" {
			t.Fatalf("%s did not launch: %v", name, err)
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + name}, Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID,
			Taints: []corev1.Taint{v1.UnregisteredNoExecuteTaint}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
		if err := kube.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		if _, err := reconcileClaim(t, c, name); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(InitializationTimeout - time.Minute)
	res, err := reconcileClaim(t, c, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	if deleting(t, kube, "stuck") {
		t.Fatal("a claim inside its initialization timeout was deleted")
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > time.Minute {
		t.Errorf("requeue after %s, want at the deadline, a minute away", res.RequeueAfter)
	}
	clk.Step(2 * time.Minute)
	for _, name := range []string{"stuck", "fine"} {
		if _, err := reconcileClaim(t, c, name); err != nil {
			t.Fatal(err)
		}
	}
	if !deleting(t, kube, "stuck") || !event(recorder, nodeclaim.ReasonInitializationTimedOut) {
		t.Fatal("a claim past its initialization timeout was not deleted with an InitializationTimedOut event")
	}
	nc := &v1.NodeClaim{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "stuck"}, nc); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeInitialized)
	if cond == nil || cond.Reason != nodeclaim.ReasonInitializationTimedOut || cond.LastTransitionTime.Before(&metav1.Time{Time: clk.Now().Add(-time.Second)}) {
		t.Errorf("the claim should say why it went, and since when (now), got %+v", cond)
	}
	if deleting(t, kube, "fine") {
		t.Error("an initialized claim was deleted")
	}
}

// A claim past its registration timeout says so on its Registered condition before
// it goes, for the NodePool's registration health, ending with its instance's boot
// log, so an operator sees why (a boot script, nodeadm or the kubelet refusing its
// configuration) without reaching the instance.
func TestRegistrationTimeoutIsRecorded(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c, kube, _, _ := launchTest(t, clk, pendingClaim("lost", clk.Now()))
	var asked string
	c.WithBootLog(func(_ context.Context, providerID string) (string, error) {
		asked = providerID
		return "[    1.000000] Linux version 6.1\n\n" + strings.Repeat("noise\n", 20) +
			"nodeadm: the node's boot failed: kubelet: failed to parse eviction thresholds: grace period must be specified for the soft eviction threshold memory.available\n", nil
	})
	if _, err := reconcileClaim(t, c, "lost"); err != nil {
		t.Fatal(err)
	}
	clk.Step(RegistrationTimeout + time.Minute)
	if _, err := reconcileClaim(t, c, "lost"); err != nil {
		t.Fatal(err)
	}
	nc := &v1.NodeClaim{}
	if err := kube.Get(t.Context(), client.ObjectKey{Name: "lost"}, nc); err != nil {
		t.Fatal(err)
	}
	cond := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeRegistered)
	if nc.DeletionTimestamp == nil || cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != nodeclaim.ReasonRegistrationTimedOut {
		t.Fatalf("want the claim deleting with Registered=False/%s, got deleting %v, %+v", nodeclaim.ReasonRegistrationTimedOut, nc.DeletionTimestamp, cond)
	}
	if asked == "" || asked != nc.Status.ProviderID {
		t.Errorf("boot log asked of %q, want the claim's instance %q", asked, nc.Status.ProviderID)
	}
	if !strings.Contains(cond.Message, "boot log ends: ") || !strings.Contains(cond.Message, "grace period must be specified") ||
		strings.Contains(cond.Message, "Linux version") {
		t.Errorf("Registered condition message %q: want the boot log's last lines", cond.Message)
	}
}
