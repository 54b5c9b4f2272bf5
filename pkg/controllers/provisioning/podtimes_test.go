package provisioning

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/metrics"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
	"github.com/nodetailor/tailor/pkg/state"
)

// The pod trigger acks each pending pod when it first sees it; the next batch
// decides on every pod it plans: room found for the pod of the claim created,
// none for the pod whose claim a limit refused nor for the pod no NodePool takes.
func TestPodTimesAckAndDecide(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	types := schedtest.SyntheticTypes(4) // fake-it-i has i+1 vCPU
	readyNodePool(t, "timed", func(np *v1.NodePool) { np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("4")} })
	pods := []*corev1.Pod{pendingPod(t, "a", "3", "timed"), pendingPod(t, "b", "3", "timed"), pendingPod(t, "c", "1", "nowhere")}
	seen := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clocktesting.NewFakeClock(seen)
	times := metrics.NewPodTimes()
	p := NewProvisioner(kube, state.New(kube), func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		record.NewFakeRecorder(100), clk, Options{}).TimePodsWith(times)
	trigger := NewPodTrigger(kube, p)
	for _, pod := range pods {
		if _, err := trigger.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pod)}); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(time.Second)
	for _, pod := range pods { // seen again: the ack stays the first sighting
		if _, err := trigger.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(pod)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(times.Undecided()); got != 3 {
		t.Fatalf("%d pods acked and undecided, want 3", got)
	}
	clk.Step(time.Second)
	if err := p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	decided := seen.Add(2 * time.Second)
	room := 0
	for _, pod := range pods {
		got := times.Get(client.ObjectKeyFromObject(pod))
		if !got.Acked.Equal(seen) || !got.Decided.Equal(decided) {
			t.Errorf("%s: acked %v, decided %v; want %v and %v", pod.Name, got.Acked, got.Decided, seen, decided)
		}
		if !got.Schedulable.IsZero() {
			room++
			if pod.Name == "c" || !got.Schedulable.Equal(decided) {
				t.Errorf("%s: room found at %v", pod.Name, got.Schedulable)
			}
		}
	}
	if room != 1 {
		t.Errorf("room found for %d pods, want 1: the limit of 4 cpu takes one node of 4 vCPU", room)
	}
	if len(times.Undecided()) != 0 {
		t.Error("pods planned are still undecided")
	}
}

// Each round sets the pending pods by effective zone, as Karpenter's scheduler
// does, and drops the zones of the round before.
func TestPendingPodsByEffectiveZone(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	types := schedtest.SyntheticTypes(4)
	readyNodePool(t, "zoned", nil)
	pendingPod(t, "anywhere", "1", "zoned")
	zonal := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "zonal", Namespace: "default"},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"tier": "zoned", v1.LabelZone: "zone-b"}, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	if err := kube.Create(ctx, zonal); err != nil {
		t.Fatal(err)
	}
	zonal.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	if err := kube.Status().Update(ctx, zonal); err != nil {
		t.Fatal(err)
	}
	p := NewProvisioner(kube, state.New(kube), func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		record.NewFakeRecorder(100), clocktesting.NewFakeClock(time.Now()), Options{})
	PendingPodsByEffectiveZone.WithLabelValues(ControllerName, "zone-stale").Set(3)
	if err := p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"flexible": 1, "zone-b": 1}
	if n := testutil.CollectAndCount(PendingPodsByEffectiveZone); n != len(want) {
		t.Errorf("%d series of karpenter_scheduler_pending_pods_by_effective_zone_count, want %d (the stale zone dropped)", n, len(want))
	}
	for zone, v := range want {
		if got := testutil.ToFloat64(PendingPodsByEffectiveZone.WithLabelValues(ControllerName, zone)); got != v {
			t.Errorf("pending_pods_by_effective_zone_count{zone=%s} = %v, want %v", zone, got, v)
		}
	}
}
