package provisioning

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// A claim carries the termination finalizer from its creation.
func TestNodeClaimHasTheFinalizer(t *testing.T) {
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	nc := NodeClaim(pool, &scheduling.NewNode{NodePool: "default"})
	if len(nc.Finalizers) != 1 || nc.Finalizers[0] != v1.TerminationFinalizer {
		t.Errorf("finalizers %v, want [%s]", nc.Finalizers, v1.TerminationFinalizer)
	}
}

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

// A claim records the instance-type options, the well-known keys and the keys its
// NodePool constrains, but not the lists of families, sizes and processor counts
// the options imply; the types those requirements allow are still exactly the
// options, so a launch picks from the same list.
func TestNodeClaimRequirementsLeaveOutWhatTheOptionsImply(t *testing.T) {
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pool.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: "karpenter.k8s.aws/instance-category", Operator: v1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
		{Key: "karpenter.k8s.aws/instance-generation", Operator: v1.NodeSelectorOpGt, Values: []string{"5"}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "d", UID: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("4Gi")}}}}}}
	plan, err := scheduling.Solve(&scheduling.Input{Pods: []*corev1.Pod{pod},
		NodePools: []*scheduling.NodePool{{NodePool: pool, InstanceTypes: types}}}, scheduling.Options{})
	if err != nil || len(plan.NewNodes) != 1 {
		t.Fatalf("plan: %v, %d new nodes", err, len(plan.NewNodes))
	}
	planned := plan.NewNodes[0]
	nc := NodeClaim(pool, planned)
	keys := map[string]bool{}
	for _, r := range nc.Spec.Requirements {
		keys[r.Key] = true
	}
	for _, key := range []string{v1.LabelInstanceType, v1.CapacityTypeLabelKey, v1.LabelArch, v1.NodePoolLabelKey,
		"karpenter.k8s.aws/instance-category", "karpenter.k8s.aws/instance-generation"} {
		if !keys[key] {
			t.Errorf("the claim has no requirement on %s: %v", key, nc.Spec.Requirements)
		}
	}
	for _, key := range []string{"karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-size"} {
		if !keys[key] {
			continue
		}
		t.Errorf("the claim lists %s, which its options imply", key)
	}
	reqs, err := scheduling.FromNodePool(nc.Spec.Requirements, nil)
	if err != nil {
		t.Fatal(err)
	}
	var allowed, options []string
	for _, it := range types {
		if _, ok := reqs.Intersects(it.Requirements); ok {
			allowed = append(allowed, it.Name)
		}
	}
	for _, it := range planned.InstanceTypes {
		options = append(options, it.Name)
	}
	slices.Sort(allowed)
	slices.Sort(options)
	if !slices.Equal(allowed, options) {
		t.Errorf("the claim allows %d types %v, the plan offered %d %v", len(allowed), allowed, len(options), options)
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

// A claim planned with its NodePool's minValues relaxed (--min-values-policy
// BestEffort) says so, and records the relaxed minValues.
func TestNodeClaimMinValuesRelaxed(t *testing.T) {
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pool.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
		{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge", "m5.24xlarge"}, MinValues: ptr(3)}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "d", UID: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("20"), corev1.ResourceMemory: resource.MustParse("4Gi")}}}}}}
	in := &scheduling.Input{Pods: []*corev1.Pod{pod}, NodePools: []*scheduling.NodePool{{NodePool: pool, InstanceTypes: types}}}
	if plan, err := scheduling.Solve(in, scheduling.Options{}); err != nil || len(plan.Unschedulable) != 1 {
		t.Fatalf("strict plan: %v, want the pod unschedulable (only m5.24xlarge holds 20 cpu)", err)
	}
	plan, err := scheduling.Solve(in, scheduling.Options{MinValuesPolicy: scheduling.MinValuesPolicyBestEffort})
	if err != nil || len(plan.NewNodes) != 1 {
		t.Fatalf("best-effort plan: %v, %d new nodes", err, len(plan.NewNodes))
	}
	nc := NodeClaim(pool, plan.NewNodes[0])
	if nc.Annotations[v1.NodeClaimMinValuesRelaxedAnnotationKey] != "true" {
		t.Errorf("annotations %v, want %s=true", nc.Annotations, v1.NodeClaimMinValuesRelaxedAnnotationKey)
	}
	for _, r := range nc.Spec.Requirements {
		if r.Key == v1.LabelInstanceType && (r.MinValues == nil || *r.MinValues != 1) {
			t.Errorf("instance-type requirement %+v, want minValues relaxed to 1", r)
		}
	}
}
