package operator

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

func noTypes(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return nil, nil }

// A scrape reads the pending count the pod informer's events keep; it never lists
// pods, which in a large cluster means copying tens of thousands of them.
func TestScrapeListsNoPods(t *testing.T) {
	ctx := t.Context()
	ns := newNamespace(t)
	scheme, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	opts := cacheOptions()
	opts.Scheme = scheme
	podCache, err := cache.New(env.cluster.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	informer, err := podCache.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	reader := &countingReader{Reader: podCache, lists: map[string]int{}}
	collector, err := newClusterCollector(reader, informer, noTypes, func() bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = podCache.Start(ctx) }()
	if !podCache.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not sync")
	}

	unschedulable := func(name string) {
		p := testPod(ns, name)
		if err := env.kube.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.Now()}}
		if err := env.kube.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// The gauge counts the whole cluster: other tests' pods may be pending too.
	base, _ := scrapePending(t, collector)
	unschedulable("a")
	unschedulable("b")
	bound := testPod(ns, "bound")
	bound.Spec.NodeName = "somewhere"
	notTriedYet := testPod(ns, "new")
	for _, p := range []*corev1.Pod{bound, notTriedYet} {
		if err := env.kube.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	wantPending := func(want float64) {
		t.Helper()
		eventually(t, wait, func() (bool, string) {
			got, ok := scrapePending(t, collector)
			return ok && got-base == want, fmt.Sprintf("tailor_pods_pending %v (reported: %v), want %v more than the %v before", got, ok, want, base)
		})
	}
	wantPending(2)
	if err := env.kube.Delete(ctx, testPod(ns, "a")); err != nil {
		t.Fatal(err)
	}
	wantPending(1)

	if n := reader.count("*v1.PodList"); n != 0 {
		t.Errorf("the scrapes listed pods %d times, want 0", n)
	}

	// A standby replica reports no cluster state: the Service scrapes both.
	collector.leading = func() bool { return false }
	if got, ok := scrapePending(t, collector); ok {
		t.Errorf("a standby replica reported tailor_pods_pending %v", got)
	}
	collector.leading = func() bool { return true }
	if _, ok := scrapePending(t, collector); !ok {
		t.Error("the leader reported no tailor_pods_pending")
	}
}

// The count follows each pod's latest state, whatever order and repetition the
// informer's events come in (a relist replays adds).
func TestPendingPodsFollowEvents(t *testing.T) {
	pending := func(name string) *corev1.Pod {
		p := testPod("default", name)
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		return p
	}
	bound := func(name string) *corev1.Pod {
		p := pending(name)
		p.Spec.NodeName = "n"
		return p
	}
	type event func(p *podTracker)
	add := func(pod *corev1.Pod) event { return func(p *podTracker) { p.OnAdd(pod, false) } }
	update := func(pod *corev1.Pod) event { return func(p *podTracker) { p.OnUpdate(nil, pod) } }
	del := func(obj any) event { return func(p *podTracker) { p.OnDelete(obj) } }
	for _, tc := range []struct {
		name   string
		events []event
		want   int
	}{
		{"adds", []event{add(pending("a")), add(pending("b")), add(bound("c")), add(testPod("default", "d"))}, 2},
		{"a relist adds again", []event{add(pending("a")), add(pending("a")), update(pending("a"))}, 1},
		{"bound", []event{add(pending("a")), update(bound("a"))}, 0},
		{"deleted", []event{add(pending("a")), add(pending("b")), del(pending("a"))}, 1},
		{"deleted, seen only by a relist", []event{add(pending("a")),
			del(toolscache.DeletedFinalStateUnknown{Key: "default/a", Obj: pending("a")})}, 0},
		{"not a pod", []event{add(pending("a")), func(p *podTracker) { p.OnAdd("junk", false) }}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPodTracker(time.Now)
			for _, e := range tc.events {
				e(p)
			}
			if got := p.count(); got != tc.want {
				t.Errorf("count %d, want %d", got, tc.want)
			}
		})
	}
}

// BenchmarkScrape scrapes a cluster of 20,000 pods, half of them pending.
func BenchmarkScrape(b *testing.B) {
	informer := &fakePodInformer{}
	collector, err := newClusterCollector(emptyReader{}, informer, noTypes, func() bool { return true })
	if err != nil {
		b.Fatal(err)
	}
	for i := range 20_000 {
		p := testPod("default", "p"+strconv.Itoa(i))
		if i%2 == 0 {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
		}
		informer.handler.OnAdd(p, true)
	}
	b.ReportAllocs()
	for b.Loop() {
		// Drained as it fills: the scrape reports a series per pod still unbound.
		ch := make(chan prometheus.Metric, 64)
		done := make(chan struct{})
		go func() {
			for range ch {
			}
			close(done)
		}()
		collector.Collect(ch)
		close(ch)
		<-done
	}
}

// BenchmarkPodEvent is what keeping the count costs per pod event.
func BenchmarkPodEvent(b *testing.B) {
	p := newPodTracker(time.Now)
	pod := testPod("default", "p")
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	b.ReportAllocs()
	for b.Loop() {
		p.OnUpdate(nil, pod)
	}
}

// wait is how long a test waits for the cache to see a change.
const wait = 30 * time.Second

func testPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
}

// scrapePending gathers the collector the way the metrics endpoint does and returns
// tailor_pods_pending, and whether it was reported.
func scrapePending(t *testing.T, c prometheus.Collector) (float64, bool) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "tailor_pods_pending" && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// countingReader counts List calls by list type.
type countingReader struct {
	client.Reader
	mu    sync.Mutex
	lists map[string]int
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.mu.Lock()
	r.lists[fmt.Sprintf("%T", list)]++
	r.mu.Unlock()
	return r.Reader.List(ctx, list, opts...)
}

func (r *countingReader) count(kind string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lists[kind]
}

// emptyReader is a cluster with no NodePools or NodeClaims.
type emptyReader struct{}

func (emptyReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return nil
}
func (emptyReader) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

type fakePodInformer struct {
	handler toolscache.ResourceEventHandler
}

func (f *fakePodInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	f.handler = h
	return synced{}, nil
}

type synced struct{}

func (synced) HasSynced() bool { return true }
