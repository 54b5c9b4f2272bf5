package registrationhealth

import (
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/pkg/cloudprovider/fake"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour)
	cond := func(status metav1.ConditionStatus, reason string, gen int64) *metav1.Condition {
		return &metav1.Condition{Type: v1.ConditionTypeNodeRegistrationHealthy, Status: status, Reason: reason, ObservedGeneration: gen,
			LastTransitionTime: metav1.NewTime(t0)}
	}
	failure := func(at time.Time) *Failure {
		return &Failure{Claim: "c1", Reason: nodeclaim.ReasonRegistrationTimedOut, Message: "no node", At: at}
	}
	tests := []struct {
		name       string
		current    *metav1.Condition
		registered time.Time
		failure    *Failure
		status     metav1.ConditionStatus
		reason     string
		since      time.Time
	}{
		{"new NodePool", nil, time.Time{}, nil, metav1.ConditionUnknown, ReasonAwaitingRegistration, now},
		{"first registration", cond(metav1.ConditionUnknown, ReasonAwaitingRegistration, 1), t0.Add(time.Minute), nil,
			metav1.ConditionTrue, ReasonHealthy, now},
		{"first launch fails to register", cond(metav1.ConditionUnknown, ReasonAwaitingRegistration, 1), time.Time{}, failure(t0.Add(time.Minute)),
			metav1.ConditionFalse, nodeclaim.ReasonRegistrationTimedOut, now},
		{"a failure after a registration", cond(metav1.ConditionTrue, ReasonHealthy, 1), t0, failure(t0.Add(time.Minute)),
			metav1.ConditionFalse, nodeclaim.ReasonRegistrationTimedOut, now},
		{"a registration after a failure", cond(metav1.ConditionFalse, nodeclaim.ReasonRegistrationTimedOut, 1), t0.Add(time.Minute), failure(t0),
			metav1.ConditionTrue, ReasonHealthy, now},
		{"a failure and a registration in the same second", cond(metav1.ConditionFalse, nodeclaim.ReasonRegistrationTimedOut, 1), t0, failure(t0),
			metav1.ConditionFalse, nodeclaim.ReasonRegistrationTimedOut, t0},
		{"an old failure", cond(metav1.ConditionTrue, ReasonHealthy, 1), t0, failure(t0.Add(-time.Minute)),
			metav1.ConditionTrue, ReasonHealthy, t0},
		{"another failure keeps the transition time", cond(metav1.ConditionFalse, nodeclaim.ReasonInitializationTimedOut, 1), time.Time{}, failure(t0.Add(time.Minute)),
			metav1.ConditionFalse, nodeclaim.ReasonRegistrationTimedOut, t0},
		{"the NodePool changed", cond(metav1.ConditionTrue, ReasonHealthy, 0), t0, nil, metav1.ConditionUnknown, ReasonAwaitingRegistration, now},
	}
	for _, tt := range tests {
		got := Decide(tt.current, 1, tt.registered, tt.failure, now)
		if got.Type != v1.ConditionTypeNodeRegistrationHealthy || got.Status != tt.status || got.Reason != tt.reason ||
			!got.LastTransitionTime.Time.Equal(tt.since) || got.ObservedGeneration != 1 {
			t.Errorf("%s: got %s/%s since %s (generation %d), want %s/%s since %s", tt.name, got.Status, got.Reason,
				got.LastTransitionTime.Time, got.ObservedGeneration, tt.status, tt.reason, tt.since)
		}
		if got.Status == metav1.ConditionFalse && !strings.Contains(got.Message, "NodeClaim c1: no node") {
			t.Errorf("%s: message %q should name the claim and what happened", tt.name, got.Message)
		}
	}
}

var kube client.Client

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kube)) }

var simClass = &v1.NodeClassReference{Group: "tailor.sh", Kind: "SimNodeClass", Name: "default"}

// claim creates a claim of pool with the given status condition.
func claim(t *testing.T, name, pool string, cond metav1.Condition) *v1.NodeClaim {
	t.Helper()
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.NodePoolLabelKey: pool}},
		Spec: v1.NodeClaimSpec{NodeClassRef: simClass, Requirements: []v1.NodeSelectorRequirementWithMinValues{
			{Key: v1.CapacityTypeLabelKey, Operator: v1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeSpot}}}}}
	if err := kube.Create(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.Conditions = []metav1.Condition{cond}
	if err := kube.Status().Update(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	return nc
}

// A NodePool's condition through its life, on a real API server: Unknown when new,
// False with the claim's reason when a launch never registers, True once a node
// registers, False when a node does not initialize, Unknown again when the NodePool
// changes; and kept when another writer's status patch drops it.
func TestNodeRegistrationHealthy(t *testing.T) {
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	c := NewController(kube, fake.New(schedtest.SyntheticTypes(1)), clk)
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "health"}}
	np.Spec.Template.Spec.NodeClassRef = simClass
	foreign := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "karpenters"}}
	foreign.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	for _, p := range []*v1.NodePool{np, foreign} {
		if err := kube.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	reconcileAndGet := func(name string) *metav1.Condition {
		t.Helper()
		if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
			t.Fatal(err)
		}
		got := &v1.NodePool{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(got.Status.Conditions, v1.ConditionTypeNodeRegistrationHealthy)
	}
	expect := func(step string, got *metav1.Condition, status metav1.ConditionStatus, reason string) {
		t.Helper()
		if got == nil || got.Status != status || got.Reason != reason {
			t.Fatalf("%s: want %s/%s, got %+v", step, status, reason, got)
		}
	}
	expect("new", reconcileAndGet("health"), metav1.ConditionUnknown, ReasonAwaitingRegistration)
	if got := reconcileAndGet("karpenters"); got != nil {
		t.Errorf("another provider's NodePool got the condition: %+v", got)
	}

	clk.Step(time.Minute)
	lost := claim(t, "lost", "health", metav1.Condition{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionFalse,
		Reason: nodeclaim.ReasonRegistrationTimedOut, Message: "No node registered after 15m0s", LastTransitionTime: metav1.NewTime(clk.Now())})
	reqs := c.Observe(lost)
	if len(reqs) != 1 || reqs[0].Name != "health" {
		t.Fatalf("a claim's event should reconcile its NodePool, got %v", reqs)
	}
	// The claim is gone by the time the NodePool is reconciled: its event said enough.
	if err := kube.Delete(ctx, lost); err != nil {
		t.Fatal(err)
	}
	got := reconcileAndGet("health")
	expect("registration failed", got, metav1.ConditionFalse, nodeclaim.ReasonRegistrationTimedOut)
	if !strings.Contains(got.Message, "NodeClaim lost") {
		t.Errorf("message %q should name the claim", got.Message)
	}

	clk.Step(time.Minute)
	claim(t, "joined", "health", metav1.Condition{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionTrue,
		Reason: "Registered", LastTransitionTime: metav1.NewTime(clk.Now())})
	expect("registered", reconcileAndGet("health"), metav1.ConditionTrue, ReasonHealthy)

	clk.Step(time.Minute)
	claim(t, "slow", "health", metav1.Condition{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionFalse,
		Reason: nodeclaim.ReasonInitializationTimedOut, Message: "not initialized", LastTransitionTime: metav1.NewTime(clk.Now())})
	// No event seen for it (a restart): the NodePool's reconcile finds it.
	expect("initialization failed", reconcileAndGet("health"), metav1.ConditionFalse, nodeclaim.ReasonInitializationTimedOut)

	// Another writer's merge patch of the status drops the condition.
	stored := &v1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "health"}, stored); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(stored.DeepCopy())
	stored.Status.Conditions = nil
	if err := kube.Status().Patch(ctx, stored, patch); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute) // started over, the condition would forget the failure
	expect("dropped by another writer", reconcileAndGet("health"), metav1.ConditionFalse, nodeclaim.ReasonInitializationTimedOut)

	clk.Step(time.Minute)
	stored = &v1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "health"}, stored); err != nil {
		t.Fatal(err)
	}
	stored.Spec.Weight = new(int32)
	*stored.Spec.Weight = 10
	if err := kube.Update(ctx, stored); err != nil {
		t.Fatal(err)
	}
	got = reconcileAndGet("health")
	expect("changed", got, metav1.ConditionUnknown, ReasonAwaitingRegistration)
	if got.ObservedGeneration != stored.Generation {
		t.Errorf("observed generation %d, want %d", got.ObservedGeneration, stored.Generation)
	}
}

// Only a claim's registration, or its being given up, reconciles its NodePool.
func TestOutcomeChanged(t *testing.T) {
	with := func(conds ...metav1.Condition) *v1.NodeClaim {
		return &v1.NodeClaim{Status: v1.NodeClaimStatus{Conditions: conds}}
	}
	launched := metav1.Condition{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue}
	registered := metav1.Condition{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionTrue}
	lost := metav1.Condition{Type: v1.ConditionTypeRegistered, Status: metav1.ConditionFalse, Reason: nodeclaim.ReasonRegistrationTimedOut}
	podEvent := with(launched, registered)
	podEvent.Status.LastPodEventTime = metav1.Now()
	for _, tt := range []struct {
		name         string
		old, updated *v1.NodeClaim
		want         bool
	}{
		{"registered", with(launched), with(launched, registered), true},
		{"given up", with(launched), with(launched, lost), true},
		{"a pod event", with(launched, registered), podEvent, false},
	} {
		if got := outcomeChanged(tt.old, tt.updated); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
