package disruption

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/cloudprovider/fake"
	disrupt "github.com/nodetailor/tailor/pkg/disruption"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
	"github.com/nodetailor/tailor/pkg/state"
)

// A command is one decision in all, and one in each NodePool its candidates
// belong to, however many candidates a NodePool has.
func TestCountDecisionByNodePool(t *testing.T) {
	cand := func(pool string) *disrupt.Candidate {
		return &disrupt.Candidate{Pool: &scheduling.NodePool{NodePool: &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: pool}}}}
	}
	cmd := &disrupt.Command{Reason: v1.DisruptionReasonUnderutilized, Kind: disrupt.KindMulti,
		Candidates: []*disrupt.Candidate{cand("count-a"), cand("count-b"), cand("count-a")}, Replacements: []*scheduling.NewNode{{}}}
	total := testutil.ToFloat64(Decisions.WithLabelValues("replace", "underutilized", "multi"))
	countDecision(cmd)
	if got := testutil.ToFloat64(Decisions.WithLabelValues("replace", "underutilized", "multi")) - total; got != 1 {
		t.Errorf("decisions_total grew by %v, want 1", got)
	}
	for _, pool := range []string{"count-a", "count-b"} {
		if got := testutil.ToFloat64(DecisionsByNodePool.WithLabelValues(pool, "replace", "underutilized", "multi")); got != 1 {
			t.Errorf("decisions_by_nodepool_total{nodepool=%q} = %v, want 1", pool, got)
		}
	}
	drift := &disrupt.Command{Reason: v1.DisruptionReasonDrifted, Kind: disrupt.KindDrift, Candidates: []*disrupt.Candidate{cand("count-c")}}
	countDecision(drift)
	if got := testutil.ToFloat64(DecisionsByNodePool.WithLabelValues("count-c", "delete", "drifted", "")); got != 1 {
		t.Errorf("a drift's decisions_by_nodepool_total = %v, want 1 with an empty consolidation_type", got)
	}
}

// An empty node gets a pod while its command waits out the validation delay: the
// command is dropped and counted as a failed validation (consolidation_type
// empty), not as a decision. Once the pod is gone the next command is carried out
// and counted in its NodePool.
func TestFailedValidationsAndDecisionsByNodePool(t *testing.T) {
	kube, reader := manager(t)
	ctx := t.Context()
	pool := testobj.NodePool("validated", testobj.ConsolidationPolicy(v1.ConsolidationPolicyWhenEmpty),
		testobj.ConsolidateAfter("0s"), testobj.Budgets("100%"))
	if err := kube.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.Delete(context.Background(), &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "idle"}})
		_ = kube.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "idle"}})
	})
	node(t, kube, "idle", "validated", simClass)
	eventually(t, "the cache holds the claim", func() bool {
		nc := &v1.NodeClaim{}
		return kube.Get(ctx, client.ObjectKey{Name: "idle"}, nc) == nil && meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized)
	})
	types := schedtest.SyntheticTypes(4)
	c := NewController(kube, reader, state.New(kube), fake.New(types),
		func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		record.NewFakeRecorder(100), clock.RealClock{}, Options{ValidationDelay: 2 * time.Second, ReplacementTimeout: time.Minute}, nil)
	failed := testutil.ToFloat64(FailedValidations.WithLabelValues("empty"))
	byPool := func() float64 {
		return testutil.ToFloat64(DecisionsByNodePool.WithLabelValues("validated", "delete", "empty", "empty"))
	}

	cmd, err := c.Pass(ctx)
	if err != nil || cmd == nil {
		t.Fatalf("pass: %v, %v; want the empty node decided", cmd, err)
	}
	pod := testobj.Pod("arrived", "100m", "64Mi", testobj.NodeName("idle"), testobj.Phase(corev1.PodRunning))
	pod.UID = ""
	if err := kube.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cache holds the pod", func() bool { return kube.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}) == nil })
	c.Wait()
	if got := testutil.ToFloat64(FailedValidations.WithLabelValues("empty")) - failed; got != 1 {
		t.Errorf("failed_validations_total{consolidation_type=empty} grew by %v, want 1", got)
	}
	if got := byPool(); got != 0 {
		t.Errorf("decisions_by_nodepool_total = %v for a dropped command, want 0", got)
	}
	nc := &v1.NodeClaim{}
	if err := reader.Get(ctx, client.ObjectKey{Name: "idle"}, nc); err != nil || nc.DeletionTimestamp != nil {
		t.Fatalf("the node with a pod was disrupted: %v, deleting %v", err, nc.DeletionTimestamp)
	}

	if err := kube.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod is gone", func() bool { return reader.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}) != nil })
	eventually(t, "the cache sees the pod gone", func() bool { return kube.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}) != nil })
	if cmd, err := c.Pass(ctx); err != nil || cmd == nil {
		t.Fatalf("pass: %v, %v; want the empty node decided again", cmd, err)
	}
	c.Wait()
	if got := byPool(); got != 1 {
		t.Errorf("decisions_by_nodepool_total{nodepool=validated} = %v, want 1", got)
	}
}

// A NotReady node consumes its NodePool's budget: each pass reports it for every
// reason, beside the budget, as Karpenter does.
func TestNodesConsumingBudgets(t *testing.T) {
	kube, reader := manager(t)
	ctx := t.Context()
	pool := testobj.NodePool("consuming", testobj.Budgets("100%"))
	if err := kube.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, name := range []string{"steady", "sick"} {
			_ = kube.Delete(context.Background(), &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}})
			_ = kube.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	})
	node(t, kube, "steady", "consuming", simClass)
	node(t, kube, "sick", "consuming", simClass)
	sick := &corev1.Node{}
	if err := reader.Get(ctx, client.ObjectKey{Name: "sick"}, sick); err != nil {
		t.Fatal(err)
	}
	sick.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
	if err := kube.Status().Update(ctx, sick); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cache holds both claims initialized and the sick node NotReady", func() bool {
		for _, name := range []string{"steady", "sick"} {
			nc := &v1.NodeClaim{}
			if kube.Get(ctx, client.ObjectKey{Name: name}, nc) != nil || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
				return false
			}
		}
		n := &corev1.Node{}
		return kube.Get(ctx, client.ObjectKey{Name: "sick"}, n) == nil && len(n.Status.Conditions) == 1 && n.Status.Conditions[0].Status == corev1.ConditionFalse
	})
	types := schedtest.SyntheticTypes(4)
	c := NewController(kube, reader, state.New(kube), fake.New(types),
		func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		record.NewFakeRecorder(100), clock.RealClock{}, Options{ReplacementTimeout: time.Minute}, nil)
	if _, err := c.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	for _, reason := range []string{"empty", "drifted", "underutilized"} {
		if got := testutil.ToFloat64(NodesConsumingBudgets.WithLabelValues("consuming", reason)); got != 1 {
			t.Errorf("karpenter_nodepools_nodes_consuming_budgets{nodepool=consuming, reason=%s} = %v, want 1 (the NotReady node)", reason, got)
		}
		// Karpenter reports the budget, not what is left of it.
		if got := testutil.ToFloat64(AllowedDisruptions.WithLabelValues("consuming", reason)); got != 2 {
			t.Errorf("karpenter_nodepools_allowed_disruptions{nodepool=consuming, reason=%s} = %v, want 2 (100%% of 2 nodes)", reason, got)
		}
	}
}

// A NodePool no budget limits reports MaxInt32, as Karpenter's does.
func TestUnlimitedBudgetValue(t *testing.T) {
	if got := budgetValue(math.MaxInt); got != math.MaxInt32 {
		t.Errorf("unlimited budget = %v, want %v", got, math.MaxInt32)
	}
	if got := budgetValue(3); got != 3 {
		t.Errorf("budget of 3 = %v, want 3", got)
	}
}
