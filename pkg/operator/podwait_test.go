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
