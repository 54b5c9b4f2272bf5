package operator

import (
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodetailor/tailor/pkg/metrics"
)

// gather scrapes c as the metrics endpoint does and returns the series of the
// family name as label sets (name=value, sorted) mapped to their values.
func gather(t *testing.T, c prometheus.Collector, name string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			out[labelString(m)] = m.GetGauge().GetValue()
		}
	}
	return out
}

func labelString(m *dto.Metric) string {
	s := ""
	for _, l := range m.GetLabel() { // sorted by name
		s += l.GetName() + "=" + l.GetValue() + " "
	}
	return s
}

// Each pod still waiting to start or to be bound has a series of how long it has
// waited, labeled by its name and namespace, until it starts (ready) or binds, or
// is deleted; a standby replica reports none.
func TestPodWaitGauges(t *testing.T) {
	informer := &fakePodInformer{}
	collector, err := newClusterCollector(emptyReader{}, informer, noTypes, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := created.Add(90 * time.Second)
	collector.now = func() time.Time { return now }
	pod := func(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
		p := testPod("shop", name)
		p.CreationTimestamp = metav1.NewTime(created)
		p.Status.Phase = corev1.PodPending
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	bound := func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }
	running := func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }
	ready := func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(created.Add(time.Minute))})
	}
	h := informer.handler
	h.OnAdd(pod("unbound"), true)
	h.OnAdd(pod("pulling", bound), true)
	h.OnAdd(pod("probing", bound), true)
	h.OnUpdate(nil, pod("probing", bound, running)) // running, not yet ready
	h.OnAdd(pod("old", bound, running, ready), true)
	h.OnAdd(pod("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), true)

	want := func(what string, family string, series map[string]float64) {
		t.Helper()
		if diff := cmp.Diff(series, gather(t, collector, family)); diff != "" {
			t.Errorf("%s: %s (-want +got):\n%s", what, family, diff)
		}
	}
	waited := now.Sub(created).Seconds()
	want("waiting", "karpenter_pods_unbound_time_seconds", map[string]float64{"name=unbound namespace=shop ": waited})
	want("waiting", "karpenter_pods_unstarted_time_seconds", map[string]float64{
		"name=unbound namespace=shop ": waited, "name=pulling namespace=shop ": waited, "name=probing namespace=shop ": waited})

	h.OnUpdate(nil, pod("unbound", bound))
	h.OnUpdate(nil, pod("probing", bound, running, ready))
	h.OnDelete(pod("pulling", bound))
	want("bound, started, deleted", "karpenter_pods_unbound_time_seconds", map[string]float64{})
	want("bound, started, deleted", "karpenter_pods_unstarted_time_seconds", map[string]float64{"name=unbound namespace=shop ": waited})

	collector.leading = func() bool { return false }
	want("standby", "karpenter_pods_unstarted_time_seconds", map[string]float64{})
}

// A pod that runs before its readiness probe passes is timed to readiness, as
// Karpenter times it, not lost between the two updates.
func TestStartupIsTimedToReadiness(t *testing.T) {
	p := newPodTracker(time.Now)
	created := time.Now().Add(-time.Hour)
	pod := testPod("default", "probed")
	pod.CreationTimestamp = metav1.NewTime(created)
	pod.Status.Phase = corev1.PodPending
	before := startupCount(t)
	p.OnAdd(pod.DeepCopy(), false)
	pod.Status.Phase = corev1.PodRunning
	p.OnUpdate(nil, pod.DeepCopy())
	if got := startupCount(t) - before; got != 0 {
		t.Fatalf("observed %d startups before the pod was ready", got)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(42 * time.Second))}}
	p.OnUpdate(nil, pod.DeepCopy())
	p.OnUpdate(nil, pod.DeepCopy()) // a relist
	if got := startupCount(t) - before; got != 1 {
		t.Errorf("observed %d startups, want 1", got)
	}
}

func startupCount(t *testing.T) uint64 {
	t.Helper()
	m := &dto.Metric{}
	if err := podStartupDuration.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetSummary().GetSampleCount()
}

// karpenter_build_info carries the version and commit SetBuild was given.
func TestBuildInfoReportsTheStamp(t *testing.T) {
	SetBuild("v1.2.3", "0123abcd")
	t.Cleanup(func() { SetBuild("", "") })
	got := gather(t, buildInfo(), "karpenter_build_info")
	want := map[string]float64{"commit=0123abcd goarch=" + runtime.GOARCH + " goversion=" + runtime.Version() + " version=v1.2.3 ": 1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("karpenter_build_info (-want +got):\n%s", diff)
	}
	SetBuild("", "")
	if v, _ := BuildStamp(); v == "v1.2.3" {
		t.Error("an empty version did not clear the stamp")
	}
}

// The provisioning_ families time a pod from the provisioner's times (see
// metrics.PodTimes): undecided from its ack until a decision, unbound and
// unstarted from the room found until it binds and starts; the durations are
// observed when it does, and the pod is then forgotten.
func TestProvisioningPodTimes(t *testing.T) {
	informer := &fakePodInformer{}
	collector, err := newClusterCollector(emptyReader{}, informer, noTypes, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	times := metrics.NewPodTimes()
	collector.TimePods(times)
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := created.Add(time.Minute)
	collector.now = func() time.Time { return now }
	pod := func(name string, mutate ...func(*corev1.Pod)) *corev1.Pod {
		p := testPod("shop", name)
		p.CreationTimestamp = metav1.NewTime(created)
		p.Status.Phase = corev1.PodPending
		for _, m := range mutate {
			m(p)
		}
		return p
	}
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "shop", Name: name} }
	h := informer.handler
	h.OnAdd(pod("waiting"), true)
	h.OnAdd(pod("planned"), true)
	h.OnAdd(pod("nowhere"), true)
	for _, name := range []string{"waiting", "planned", "nowhere"} {
		times.Ack(key(name), created.Add(10*time.Second))
	}
	times.Decide(key("planned"), true, created.Add(20*time.Second))
	times.Decide(key("nowhere"), false, created.Add(20*time.Second))

	want := func(what string, family string, series map[string]float64) {
		t.Helper()
		if diff := cmp.Diff(series, gather(t, collector, family)); diff != "" {
			t.Errorf("%s: %s (-want +got):\n%s", what, family, diff)
		}
	}
	want("pending", "karpenter_pods_provisioning_scheduling_undecided_time_seconds", map[string]float64{"name=waiting namespace=shop ": 50})
	want("pending", "karpenter_pods_provisioning_unbound_time_seconds", map[string]float64{"name=planned namespace=shop ": 40})
	want("pending", "karpenter_pods_provisioning_unstarted_time_seconds", map[string]float64{"name=planned namespace=shop ": 40})

	bound0, started0 := histogramCount(t, podProvisioningBoundDuration), histogramCount(t, podProvisioningStartupDuration)
	scheduled := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(30 * time.Second))}
	readyAt := corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(created.Add(45 * time.Second))}
	h.OnUpdate(nil, pod("planned", func(p *corev1.Pod) {
		p.Spec.NodeName = "node-1"
		p.Status.Conditions = []corev1.PodCondition{scheduled}
	}))
	want("bound", "karpenter_pods_provisioning_unbound_time_seconds", map[string]float64{})
	want("bound", "karpenter_pods_provisioning_unstarted_time_seconds", map[string]float64{"name=planned namespace=shop ": 40})
	if got := histogramCount(t, podProvisioningBoundDuration); got.n-bound0.n != 1 || got.sum-bound0.sum != 10 {
		t.Errorf("bound durations: %d observed summing %v, want one of 10 s (room found at 20 s, bound at 30 s)", got.n-bound0.n, got.sum-bound0.sum)
	}
	h.OnUpdate(nil, pod("planned", func(p *corev1.Pod) {
		p.Spec.NodeName = "node-1"
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{scheduled, readyAt}
	}))
	want("started", "karpenter_pods_provisioning_unstarted_time_seconds", map[string]float64{})
	if got := histogramCount(t, podProvisioningStartupDuration); got.n-started0.n != 1 || got.sum-started0.sum != 25 {
		t.Errorf("startup durations: %d observed summing %v, want one of 25 s (room found at 20 s, ready at 45 s)", got.n-started0.n, got.sum-started0.sum)
	}
	if got := times.Get(key("planned")); got != (metrics.PodTime{}) {
		t.Errorf("a started pod is still timed: %+v", got)
	}
	// Bound to room that came before a decision: no longer undecided. Deleted: forgotten.
	h.OnUpdate(nil, pod("waiting", func(p *corev1.Pod) { p.Spec.NodeName = "node-2" }))
	want("bound undecided", "karpenter_pods_provisioning_scheduling_undecided_time_seconds", map[string]float64{})
	h.OnDelete(pod("nowhere"))
	if got := times.Get(key("nowhere")); got != (metrics.PodTime{}) {
		t.Errorf("a deleted pod is still timed: %+v", got)
	}
}

type observed struct {
	n   uint64
	sum float64
}

func histogramCount(t *testing.T, h prometheus.Histogram) observed {
	t.Helper()
	m := &dto.Metric{}
	if err := h.Write(m); err != nil {
		t.Fatal(err)
	}
	return observed{m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()}
}
