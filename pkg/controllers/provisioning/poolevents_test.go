package provisioning

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
	"github.com/nodetailor/tailor/pkg/state"
)

func TestLimitReason(t *testing.T) {
	for _, tc := range []struct{ reason, pool, want string }{
		{"NodePool a: limit cpu=10 reached (10 in use, the smallest instance type adds 2)", "a", "limit cpu=10 reached (10 in use, the smallest instance type adds 2)"},
		{"NodePool b: taint x not tolerated; NodePool a: limit cpu=4 leaves 1; pod requires more cpu", "a", "limit cpu=4 leaves 1"},
		{"NodePool ab: limit cpu=4 leaves 1", "a", ""},
		{"NodePool a: not Ready yet (no Ready condition)", "a", ""},
		{"NodePool b: limits reached", "b", "limits reached"},
	} {
		if got := limitReason(tc.reason, tc.pool); got != tc.want {
			t.Errorf("limitReason(%q, %q) = %q, want %q", tc.reason, tc.pool, got, tc.want)
		}
	}
}

// A NodePool is told why it launches nothing only while pods wait: not Ready (but
// not a static one, nor one whose instance types could not be read, which is
// looked at again within seconds), at a limit in the plan, or refused a claim at
// a limit just before creating it.
func TestBlockedPools(t *testing.T) {
	pool := func(name, unavailable string) *scheduling.NodePool {
		return &scheduling.NodePool{NodePool: &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}, Unavailable: unavailable}
	}
	pools := []*scheduling.NodePool{pool("ok", ""), pool("broken", "not Ready (NodeClassNotReady): SimNodeClass default not found"),
		pool("static", state.StaticUnavailable), pool("unread", "no such NodeClass"), pool("capped", ""), pool("tight", "")}
	stuck := []scheduling.Failure{
		{Reason: "NodePool ok: pod requires tier In [x] but nodes offer tier In [ok]; NodePool capped: limit cpu=1 leaves 1; pod requires 3 cpu"},
		{Reason: "NodePool capped: limit cpu=1 reached (1 in use, the smallest instance type adds 1)"},
	}
	refused := map[string]refusal{"tight": {why: "limit nodes=2 would be passed: 2 in use, the node adds 1", pods: 3}}
	describe := func(blocks []poolBlock) []string {
		var out []string
		for _, b := range blocks {
			out = append(out, b.pool.Name+" "+b.reason+": "+b.message)
		}
		return out
	}
	got := describe(blockedPools(pools, []string{"unread"}, stuck, refused))
	want := []string{
		"broken NotReady: Launching no nodes while not Ready (NodeClassNotReady): SimNodeClass default not found; 2 pending pods fit no node",
		"capped LimitReached: Launching no more nodes: limit cpu=1 leaves 1; 2 pending pods wait for room",
		"tight LimitReached: Launching no more nodes: limit nodes=2 would be passed: 2 in use, the node adds 1; 3 pending pods wait for room",
	}
	if !slices.Equal(got, want) {
		t.Errorf("blocked pools:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := describe(blockedPools(pools, nil, nil, nil)); len(got) != 0 {
		t.Errorf("with no pod waiting: %q, want nothing", got)
	}
}

// objectRecorder keeps each event with the kind and name of its object.
type objectRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *objectRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kind := fmt.Sprintf("%T", obj)
	if o, ok := obj.(metav1.Object); ok {
		kind += " " + o.GetName()
	}
	r.events = append(r.events, fmt.Sprintf("%s: %s %s %s", kind, eventtype, reason, message))
}

func (r *objectRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r *objectRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// taken returns the events of objects of type kind (a Go type, "*v1.NodePool") and
// forgets all.
func (r *objectRecorder) taken(kind string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if strings.HasPrefix(e, kind+" ") {
			out = append(out, e)
		}
	}
	r.events = nil
	return out
}

// `kubectl describe nodepool` says why a NodePool launches nothing for pods that
// wait: a limit, or not being Ready; once per PoolEventInterval while it lasts, not
// on every batch.
func TestNodePoolEventsSayWhyNothingLaunches(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	readyNodePool(t, "capped", func(np *v1.NodePool) { np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("1")} })
	broken := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "broken"}}
	broken.Spec.Template.Labels = map[string]string{"tier": "broken"}
	broken.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "tailor.sh", Kind: "SimNodeClass", Name: "missing"}
	if err := kube.Create(ctx, broken); err != nil {
		t.Fatal(err)
	}
	broken.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionFalse, Reason: "NodeClassNotReady",
		Message: "SimNodeClass missing not found", ObservedGeneration: broken.Generation, LastTransitionTime: metav1.Now()}}
	if err := kube.Status().Update(ctx, broken); err != nil {
		t.Fatal(err)
	}
	pendingPod(t, "big", "3", "capped")
	pendingPod(t, "orphan", "1", "broken")
	types := schedtest.SyntheticTypes(4) // fake-it-i has i+1 vCPU
	rec := &objectRecorder{}
	clk := clocktesting.NewFakeClock(time.Now())
	p := NewProvisioner(kube, state.New(kube), func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		rec, clk, Options{})
	if err := p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	got := rec.taken("*v1.NodePool")
	want := []string{
		"*v1.NodePool broken: Warning NotReady Launching no nodes while not Ready (NodeClassNotReady): SimNodeClass missing not found; 2 pending pods fit no node",
		"*v1.NodePool capped: Warning LimitReached Launching no more nodes: limit cpu=1 leaves 1",
	}
	if len(got) != len(want) {
		t.Fatalf("NodePool events %q, want %q", got, want)
	}
	slices.Sort(got)
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("event %q, want it to start %q", got[i], want[i])
		}
	}
	// The provisioner looks again every second while pods wait at a limit: the
	// NodePools are not told again before the interval has passed.
	clk.Step(time.Second)
	if err := p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.taken("*v1.NodePool"); len(got) != 0 {
		t.Errorf("a second later: %q, want no NodePool event", got)
	}
	clk.Step(PoolEventInterval)
	if err := p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rec.taken("*v1.NodePool"); len(got) != 2 {
		t.Errorf("an interval later: %q, want both again", got)
	}
}
