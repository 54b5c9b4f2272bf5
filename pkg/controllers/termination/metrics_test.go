package termination

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
)

func TestEvictionCode(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		name string
		err  error
		want string // "" for not counted
	}{
		{"granted", nil, "200"},
		{"refused by a PodDisruptionBudget", apierrors.NewTooManyRequests("would violate the budget", 10), "429"},
		{"wrapped", fmt.Errorf("evicting: %w", apierrors.NewTooManyRequests("no", 0)), "429"},
		{"pod gone", apierrors.NewNotFound(pods, "p"), "404"},
		{"another pod by that name", apierrors.NewConflict(pods, "p", errors.New("uid")), "409"},
		{"no answer", errors.New("connection reset"), ""},
	} {
		got, ok := evictionCode(tc.err)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: evictionCode = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}

// Each Eviction API request the drain makes is counted by the code it got: 200
// for a pod evicted, 429 for one its PodDisruptionBudget keeps.
func TestEvictionRequestsAreCountedByCode(t *testing.T) {
	e := newEnv(t, cloud)
	nc, node := e.launch("evict-codes", simRef)
	free := e.pod("evict-codes-free", node.Name)
	guarded := e.pod("evict-codes-guarded", node.Name, func(p *corev1.Pod) { p.Labels = map[string]string{"app": "evict-codes"} })
	// The API lets a pending pod go whatever its budget says: this one runs.
	guarded.Status.Phase = corev1.PodRunning
	guarded.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := direct.Status().Update(t.Context(), guarded); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "evict-codes", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &intstr.IntOrString{IntVal: 0},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "evict-codes"}}}}
	if err := direct.Create(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { release(pdb) })
	// What the disruption controller (not running here) would write.
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 0,
		CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
	if err := direct.Status().Update(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}
	e.eventually("the cache shows the pods", func(ctx context.Context) bool {
		pods := &corev1.PodList{}
		return cached.List(ctx, pods, client.MatchingFields{NodeNameIndex: node.Name}) == nil && len(pods.Items) == 2
	})
	// Disruption records why the claim goes: the pods drained are counted under it.
	patch := client.MergeFrom(nc.DeepCopy())
	nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue,
		Reason: string(v1.DisruptionReasonDrifted), LastTransitionTime: metav1.Now()})
	if err := direct.Status().Patch(t.Context(), nc, patch); err != nil {
		t.Fatal(err)
	}
	e.eventually("the cache shows the disruption reason", func(ctx context.Context) bool {
		got := &v1.NodeClaim{}
		return cached.Get(ctx, client.ObjectKeyFromObject(nc), got) == nil && disruptionReason(got) == string(v1.DisruptionReasonDrifted)
	})
	drained := func() float64 {
		return testutil.ToFloat64(PodsDrained.WithLabelValues(string(v1.DisruptionReasonDrifted)))
	}
	drainedBefore := drained()
	granted, refused := evictions("200"), evictions("429")
	e.deleteObj(nc)
	e.reconcileUntil("the guarded pod refused", e.c.Reconcile, nc.Name, func(ctx context.Context) bool {
		return gone(ctx, free) && evictions("429") > refused
	})
	if got := evictions("200") - granted; got != 1 {
		t.Errorf("karpenter_pods_eviction_requests_total{code=\"200\"} rose by %v, want 1 (the unguarded pod)", got)
	}
	if e.fresh(guarded).GetDeletionTimestamp() != nil {
		t.Fatal("the pod its budget keeps was evicted")
	}
	// The budget lifted, the pod is evicted and the node goes.
	release(pdb)
	e.reconcileUntil("the claim terminated", e.c.Reconcile, nc.Name, func(ctx context.Context) bool { return gone(ctx, nc) })
	if got := evictions("200") - granted; got != 2 {
		t.Errorf("karpenter_pods_eviction_requests_total{code=\"200\"} rose by %v, want 2", got)
	}
	if got := drained() - drainedBefore; got != 2 {
		t.Errorf("karpenter_pods_drained_total{reason=\"Drifted\"} rose by %v, want 2", got)
	}
}

func evictions(code string) float64 {
	return testutil.ToFloat64(PodsEvictionRequests.WithLabelValues(code))
}

// A node is counted drained once, under its NodePool, however many passes find it
// drained while its instance shuts down.
func TestNodeDrainedIsCountedOnce(t *testing.T) {
	slowCloud := &shuttingDown{CloudProvider: cloud}
	e := newEnv(t, slowCloud)
	nc, node := e.launch("drained-once", simRef)
	const pool = "drained-once-pool"
	patch := client.MergeFrom(node.DeepCopy())
	node.Labels = map[string]string{v1.NodePoolLabelKey: pool}
	if err := direct.Patch(t.Context(), node, patch); err != nil {
		t.Fatal(err)
	}
	e.pod("drained-once-1", node.Name)
	e.eventually("the cache shows the labeled node and its pod", func(ctx context.Context) bool {
		n, err := nodeclaim.NodeOf(ctx, cached, nc)
		pods := &corev1.PodList{}
		return err == nil && n != nil && n.Labels[v1.NodePoolLabelKey] == pool &&
			cached.List(ctx, pods, client.MatchingFields{NodeNameIndex: node.Name}) == nil && len(pods.Items) == 1
	})
	drained := func() float64 { return testutil.ToFloat64(NodesDrained.WithLabelValues(pool)) }
	if got := drained(); got != 0 {
		t.Fatalf("karpenter_nodes_drained_total{nodepool=%q} is %v before the drain", pool, got)
	}
	e.deleteObj(nc)
	e.reconcileUntil("termination asked for", e.c.Reconcile, nc.Name, func(ctx context.Context) bool {
		slowCloud.mu.Lock()
		defer slowCloud.mu.Unlock()
		return slowCloud.deletes > 0
	})
	if got := drained(); got != 1 {
		t.Errorf("drained: karpenter_nodes_drained_total{nodepool=%q} = %v, want 1", pool, got)
	}
	e.passes(5, e.c.Reconcile, nc.Name)
	if err := slowCloud.finish(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	e.reconcileUntil("the claim terminated", e.c.Reconcile, nc.Name, func(ctx context.Context) bool { return gone(ctx, nc) })
	if got := drained(); got != 1 {
		t.Errorf("terminated: karpenter_nodes_drained_total{nodepool=%q} = %v, want 1", pool, got)
	}
}
