package provisioning

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// A pod the open batch already has does not signal again (and so does not hold the
// window open); a new pod does, and so does any pod once the batch closed.
func TestTriggerForSignalsNewPodsOnly(t *testing.T) {
	p := NewProvisioner(nil, nil, nil, nil, clocktesting.NewFakeClock(time.Now()), Options{})
	signalled := func() bool {
		select {
		case <-p.trigger:
			return true
		default:
			return false
		}
	}
	p.TriggerFor("a")
	if !signalled() {
		t.Fatal("the first pod did not open a batch")
	}
	p.TriggerFor("a")
	if signalled() {
		t.Error("a pod the batch has signalled again")
	}
	p.TriggerFor("b")
	if !signalled() {
		t.Error("a new pod did not signal")
	}
	p.Trigger()
	p.Trigger()
	if !signalled() {
		t.Error("a trigger without a pod did not signal")
	}
	p.closeBatch()
	p.TriggerFor("a")
	if !signalled() {
		t.Error("a pod did not signal in the next batch")
	}
}

// A pod waiting for its claim opens a batch but does not hold one open: only new
// pods do.
func TestTriggerForAWaitingPodOnlyWakes(t *testing.T) {
	p := NewProvisioner(nil, nil, nil, nil, clocktesting.NewFakeClock(time.Now()), Options{})
	p.waiting["w"] = true
	p.TriggerFor("w")
	select {
	case <-p.trigger:
		t.Error("a waiting pod triggered as a new one, holding the window open")
	default:
	}
	select {
	case <-p.wake:
	default:
		t.Error("a waiting pod did not open a batch")
	}
	p.TriggerFor("n")
	select {
	case <-p.trigger:
	default:
		t.Error("a new pod did not trigger")
	}
}

// A batch closes once no new pod came for BatchIdle, or BatchMax after it opened
// however busy; each new pod restarts the idle wait.
func TestBatchWindow(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		triggerAt []time.Duration // new pods, after the batch opened
		closeAt   time.Duration
	}{
		{"idle", nil, time.Second},
		{"a new pod restarts the idle wait", []time.Duration{500 * time.Millisecond}, 1500 * time.Millisecond},
		{"busy until the maximum", []time.Duration{500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second,
			2500 * time.Millisecond, 3 * time.Second, 3500 * time.Millisecond, 4 * time.Second, 4500 * time.Millisecond}, 5 * time.Second},
	} {
		clk := clocktesting.NewFakeClock(start)
		p := NewProvisioner(nil, nil, nil, nil, clk, Options{BatchIdle: time.Second, BatchMax: 5 * time.Second})
		closed := make(chan time.Time, 1)
		go func() {
			p.waitForBatch(t.Context())
			closed <- clk.Now()
		}()
		// The clock moves only once the batch waits on it: for its maximum and its
		// idle time, and after each new pod for a new idle time.
		waiters := func(n int) {
			for clk.Waiters() < n {
				time.Sleep(time.Millisecond)
			}
		}
		waiters(2)
		step := 100 * time.Millisecond
		var got time.Time
	loop:
		for elapsed := step; elapsed <= 10*time.Second; elapsed += step {
			before := clk.Waiters()
			clk.Step(step)
			if clk.Waiters() < before {
				// A timer fired: the batch closes now, or it was an idle wait a
				// new pod replaced, which nothing listens to any more.
				select {
				case got = <-closed:
					break loop
				case <-time.After(500 * time.Millisecond):
				}
			}
			if slices.Contains(tc.triggerAt, elapsed) {
				n := clk.Waiters()
				p.TriggerFor(types.UID(elapsed.String()))
				waiters(n + 1)
			}
		}
		if got.Sub(start) != tc.closeAt {
			t.Errorf("%s: the batch closed after %s, want %s", tc.name, got.Sub(start), tc.closeAt)
		}
	}
}

func TestNodePoolChangeMatters(t *testing.T) {
	ready := func(np *v1.NodePool, status metav1.ConditionStatus) *v1.NodePool {
		cp := np.DeepCopy()
		cp.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: status, ObservedGeneration: np.Generation}}
		return cp
	}
	base := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", Generation: 1}}
	counted := base.DeepCopy()
	counted.Status.Resources = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	changed := base.DeepCopy()
	changed.Generation = 2
	// Ready for generation 1 when generation 2 came, then found Ready for it.
	unconfirmed := ready(base, metav1.ConditionTrue)
	unconfirmed.Generation = 2
	confirmed := ready(changed, metav1.ConditionTrue)
	for _, tc := range []struct {
		name     string
		old, new *v1.NodePool
		want     bool
	}{
		{"status counts", base, counted, false},
		{"spec", base, changed, true},
		{"turned ready", ready(base, metav1.ConditionFalse), ready(base, metav1.ConditionTrue), true},
		{"still ready", ready(base, metav1.ConditionTrue), ready(counted, metav1.ConditionTrue), false},
		{"ready for the new generation", unconfirmed, confirmed, true},
	} {
		if got := NodePoolChangeMatters(tc.old, tc.new); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// karpenter_scheduler_unfinished_work_seconds reports a round while it runs, for
// as long as it has run, and not once it ended.
func TestUnfinishedWork(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	u := &unfinishedWork{clock: clk, started: map[[2]string]time.Time{}}
	done := u.start(ControllerName, "7")
	clk.Step(3 * time.Second)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(u)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 1 || families[0].GetName() != "karpenter_scheduler_unfinished_work_seconds" || len(families[0].Metric) != 1 {
		t.Fatalf("gathered %v, want one series of karpenter_scheduler_unfinished_work_seconds", families)
	}
	m := families[0].Metric[0]
	labels := map[string]string{}
	for _, l := range m.Label {
		labels[l.GetName()] = l.GetValue()
	}
	if m.GetGauge().GetValue() != 3 || labels["controller"] != ControllerName || labels["scheduling_id"] != "7" {
		t.Errorf("series %v = %v, want controller=%s scheduling_id=7 at 3s", labels, m.GetGauge().GetValue(), ControllerName)
	}
	done()
	if families, err = reg.Gather(); err != nil || len(families) != 0 {
		t.Errorf("after the round: %v, %v; want no series", families, err)
	}
}

// A batch nominates its pods only when they are of more than one shape.
func TestPodShapes(t *testing.T) {
	node := func(pods ...*corev1.Pod) *scheduling.NewNode { return &scheduling.NewNode{Pods: pods} }
	for _, tc := range []struct {
		name  string
		nodes []*scheduling.NewNode
		want  int
	}{
		{"none", nil, 0},
		{"one shape over nodes", []*scheduling.NewNode{node(testobj.Pod("a", "1", "1Gi"), testobj.Pod("b", "1", "1Gi")), node(testobj.Pod("c", "1000m", "1024Mi"))}, 1},
		{"two shapes", []*scheduling.NewNode{node(testobj.Pod("a", "1", "1Gi")), node(testobj.Pod("b", "250m", "1Gi"))}, 2},
		{"memory alone differs", []*scheduling.NewNode{node(testobj.Pod("a", "1", "1Gi"), testobj.Pod("b", "1", "2Gi"))}, 2},
	} {
		if got := podShapes(tc.nodes); got != tc.want {
			t.Errorf("%s: %d shapes, want %d", tc.name, got, tc.want)
		}
	}
}
