package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/kubescheme"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	fakecloud "github.com/nodetailor/tailor/pkg/cloudprovider/fake"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// A node's heartbeats reconcile its claim again and again; only a change of the
// initialization conditions may cause a write.
func TestSetInitializedReportsOnlyNews(t *testing.T) {
	c := &Controller{clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	nc := &v1.NodeClaim{}
	steps := []struct {
		why  string
		news bool
	}{
		{"node is not ready", true},
		{"node is not ready", false},
		{"startup taint example.com/init is still there", true},
		{"", true},
		{"", false},
	}
	for i, s := range steps {
		if got := c.setInitialized(nc, s.why); got != s.news {
			t.Errorf("step %d (%q): news = %v, want %v", i, s.why, got, s.news)
		}
	}
	if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeReady) {
		t.Errorf("want Initialized and Ready, got %+v", nc.Status.Conditions)
	}
}

func TestNotInitialized(t *testing.T) {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	startup := corev1.Taint{Key: "example.com/init", Effect: corev1.TaintEffectNoSchedule}
	nc := &v1.NodeClaim{Spec: v1.NodeClaimSpec{StartupTaints: []corev1.Taint{startup}}}
	tests := []struct {
		name string
		node corev1.Node
		want string
	}{
		{"not ready", corev1.Node{}, "node is not ready"},
		{"startup taint", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{startup}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, "startup taint example.com/init is still there"},
		{"initialized", corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, ""},
	}
	for _, tt := range tests {
		if got := notInitialized(nc, &tt.node); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// A Node that appears before the cache has its claim's launch still wakes that
// claim: the launch write, which carries the provider ID, maps the Node to it.
func TestNodeMapsToAClaimWhoseLaunchIsNotCachedYet(t *testing.T) {
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	cached := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: "1"}}
	other := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "b", ResourceVersion: "1"}, Status: v1.NodeClaimStatus{ProviderID: "sim:///b"}}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cached, other).
		WithIndex(&v1.NodeClaim{}, nodeclaim.ProviderIDIndex, func(o client.Object) []string {
			return []string{o.(*v1.NodeClaim).Status.ProviderID}
		}).Build()
	c := NewController(kube, nil, nil, nil, clocktesting.NewFakeClock(time.Now()))
	node := func(id string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: corev1.NodeSpec{ProviderID: id}}
	}
	names := func(reqs []reconcile.Request) []string {
		var out []string
		for _, r := range reqs {
			out = append(out, r.Name)
		}
		return out
	}
	ctx := t.Context()
	if got := names(c.claimsOfNode(ctx, node("sim:///a"))); len(got) != 0 {
		t.Fatalf("a node mapped to %v before any launch", got)
	}
	launched := cached.DeepCopy()
	launched.ResourceVersion, launched.Status.ProviderID = "2", "sim:///a"
	c.writes.Wrote(launched)
	if got := names(c.claimsOfNode(ctx, node("sim:///a"))); !slices.Equal(got, []string{"a"}) {
		t.Errorf("the node of a launch not cached yet mapped to %v, want [a]", got)
	}
	if got := names(c.claimsOfNode(ctx, node("sim:///b"))); !slices.Equal(got, []string{"b"}) {
		t.Errorf("a cached claim's node mapped to %v, want [b]", got)
	}
	if got := names(c.claimsOfNode(ctx, node("sim:///c"))); len(got) != 0 {
		t.Errorf("a stranger's node mapped to %v", got)
	}
}

// A Node is registered from its claim's launch as soon as it appears, before the
// claim's own writes are done; a Node whose launch this process did not see is
// left to its claim's reconcile.
func TestRegisterNodeFromTheLaunch(t *testing.T) {
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	node := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "sim:///" + name,
			Taints: []corev1.Taint{v1.UnregisteredNoExecuteTaint}}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node("a"), node("b")).Build()
	c := NewController(kube, nil, nil, nil, clocktesting.NewFakeClock(time.Now()))
	launched := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-a", Labels: map[string]string{"team": "payments", v1.LabelInstanceType: "m5.large"}},
		Spec: v1.NodeClaimSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}}}
	c.launches.add("sim:///a", launched, nil)

	ctx := t.Context()
	for _, name := range []string{"a", "b"} {
		if _, err := c.RegisterNode(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
			t.Fatalf("node %s: %v", name, err)
		}
	}
	a := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "a"}, a); err != nil {
		t.Fatal(err)
	}
	if unregistered(a) || a.Labels["team"] != "payments" || a.Labels[v1.NodeRegisteredLabelKey] != "true" || a.Labels[v1.NodeInitializedLabelKey] != "true" ||
		!slices.Contains(a.Finalizers, v1.TerminationFinalizer) || !slices.ContainsFunc(a.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "dedicated" }) {
		t.Errorf("node a after registration: labels %v, finalizers %v, taints %v", a.Labels, a.Finalizers, a.Spec.Taints)
	}
	c.launches.add("sim:///gone", &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-gone"}}, nil)
	c.launches.forgetClaim("claim-gone")
	if c.launches.get("sim:///gone") != nil {
		t.Error("a deleted claim's launch is still remembered")
	}
	b := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "b"}, b); err != nil {
		t.Fatal(err)
	}
	if !unregistered(b) || b.Labels[v1.NodeRegisteredLabelKey] != "" {
		t.Errorf("node b, whose launch is unknown here, was registered: labels %v, taints %v", b.Labels, b.Spec.Taints)
	}
}

// A batch's larger node keeps its unregistered taint while a smaller node of the
// batch is not settled, and registers once it is.
func TestRegistrationFollowsTheReleaseOrder(t *testing.T) {
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	large := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "large"}, Spec: corev1.NodeSpec{ProviderID: "sim:///large",
		Taints: []corev1.Taint{v1.UnregisteredNoExecuteTaint}}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(large).Build()
	clk := clocktesting.NewFakeClock(time.Now())
	order := nodeclaim.NewReleaseOrder(clk)
	batch := order.Batch([]float64{nodeclaim.NodeSize(2000, 4<<30), nodeclaim.NodeSize(4000, 32<<30)})
	batch.Add(0, "claim-small")
	batch.Add(1, "claim-large")
	c := NewController(kube, nil, nil, nil, clk).OrderReleases(order)
	c.launches.add("sim:///large", &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-large"}}, nil)

	ctx := t.Context()
	register := func() (reconcile.Result, *corev1.Node) {
		t.Helper()
		res, err := c.RegisterNode(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "large"}})
		if err != nil {
			t.Fatal(err)
		}
		n := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: "large"}, n); err != nil {
			t.Fatal(err)
		}
		return res, n
	}
	if res, n := register(); !unregistered(n) || res.RequeueAfter <= 0 {
		t.Fatalf("the large node registered (requeue %v, taints %v) with the small one not up", res.RequeueAfter, n.Spec.Taints)
	}
	order.Observe(func(string) bool { return true }, func(string) bool { return true }, func(string) bool { return false })
	res, n := register()
	if !unregistered(n) || res.RequeueAfter <= 0 || res.RequeueAfter > nodeclaim.ReleaseSettle {
		t.Fatalf("the large node registered (requeue %v) the moment the small one settled: its pods get %v to land", res.RequeueAfter, nodeclaim.ReleaseSettle)
	}
	clk.Step(res.RequeueAfter)
	if res, n := register(); unregistered(n) || res.RequeueAfter != 0 {
		t.Errorf("the large node not registered (requeue %v, taints %v) after the small one settled", res.RequeueAfter, n.Spec.Taints)
	}
}

// The pods planned for a node are told its name (status.nominatedNodeName) once
// nothing else keeps them off it and before it registers, and again while they
// wait if the kube-scheduler cleared it.
func TestNodeIsAnnouncedToItsPods(t *testing.T) {
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Spec: corev1.NodeSpec{ProviderID: "sim:///small",
		Taints: []corev1.Taint{v1.UnregisteredNoExecuteTaint, v1.KnownEphemeralTaints[0]}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	pod := func(name, nodeName, nominated string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: corev1.PodSpec{NodeName: nodeName},
			Status: corev1.PodStatus{NominatedNodeName: nominated}}
	}
	planned, preempting, bound := pod("planned", "", ""), pod("preempting", "", "elsewhere"), pod("bound", "other", "")
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node, planned, preempting, bound).
		WithStatusSubresource(&corev1.Pod{}).Build()
	clk := clocktesting.NewFakeClock(time.Now())
	order := nominatingOrder(clk)
	order.Plan(map[string][]types.NamespacedName{"claim": {
		client.ObjectKeyFromObject(planned), client.ObjectKeyFromObject(preempting), client.ObjectKeyFromObject(bound)}})
	c := NewController(kube, nil, nil, nil, clk).OrderReleases(order)
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim"}}
	c.launches.add("sim:///small", nc, nil)

	ctx := t.Context()
	register := func() time.Duration {
		t.Helper()
		res, err := c.RegisterNode(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(node)})
		if err != nil {
			t.Fatal(err)
		}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
			t.Fatal(err)
		}
		return res.RequeueAfter
	}
	nominated := func(p *corev1.Pod) string {
		t.Helper()
		got := &corev1.Pod{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			t.Fatal(err)
		}
		return got.Status.NominatedNodeName
	}
	if again := register(); !unregistered(node) || again <= 0 || nominated(planned) != "" {
		t.Fatalf("a node still not ready to pods registered (requeue %v, taints %v) or was announced (%q)", again, node.Spec.Taints, nominated(planned))
	}
	node.Spec.Taints = []corev1.Taint{v1.UnregisteredNoExecuteTaint}
	if err := kube.Update(ctx, node); err != nil {
		t.Fatal(err)
	}
	// Looked at again until the pods are told, AnnounceLead before it registers.
	again := register()
	for i := 0; nominated(planned) == "" && i < 10; i++ {
		if !unregistered(node) || again <= 0 {
			t.Fatalf("registered (requeue %v, taints %v) before its pods were told", again, node.Spec.Taints)
		}
		clk.Step(again)
		again = register()
	}
	if !unregistered(node) || again != nodeclaim.AnnounceLead {
		t.Fatalf("registered at once (requeue %v, taints %v), want %v for the kube-scheduler to see the nominations first", again, node.Spec.Taints, nodeclaim.AnnounceLead)
	}
	if got := nominated(planned); got != "small" {
		t.Errorf("the planned pod is nominated to %q, want the node", got)
	}
	if got := nominated(preempting); got != "elsewhere" {
		t.Errorf("a pod nominated by preemption was nominated again, to %q", got)
	}
	if got := nominated(bound); got != "" {
		t.Errorf("a bound pod was nominated, to %q", got)
	}
	clk.Step(again)
	if again := register(); unregistered(node) || again != 0 {
		t.Fatalf("not registered (requeue %v, taints %v) once the pods had their lead", again, node.Spec.Taints)
	}

	// A failed attempt cleared the nomination: it is made again while pods land.
	p := &corev1.Pod{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(planned), p); err != nil {
		t.Fatal(err)
	}
	p.Status.NominatedNodeName = ""
	if err := kube.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	if again := c.keepNominations(ctx, nc, node); again <= 0 || nominated(planned) != "small" {
		t.Errorf("a cleared nomination not made again (look again in %v, nominated %q)", again, nominated(planned))
	}
	clk.Step(nodeclaim.KeepNominations)
	if again := c.keepNominations(ctx, nc, node); again != 0 {
		t.Errorf("nominations still kept (look again in %v) %v after they were made", again, nodeclaim.KeepNominations)
	}
}

// nominatingOrder is a release order with one batch that nominates its pods:
// claim, a small node, and a larger one.
func nominatingOrder(clk *clocktesting.FakeClock) *nodeclaim.ReleaseOrder {
	order := nodeclaim.NewReleaseOrder(clk)
	batch := order.Batch([]float64{nodeclaim.NodeSize(2000, 4<<30), nodeclaim.NodeSize(8000, 64<<30)})
	batch.NominatePods()
	batch.Add(0, "claim")
	batch.Add(1, "larger")
	return order
}

// A nomination is only a hint: when the pod's status cannot be written, the node
// still registers, after the same lead.
func TestFailedNominationDoesNotHoldTheNode(t *testing.T) {
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Spec: corev1.NodeSpec{ProviderID: "sim:///small",
		Taints: []corev1.Taint{v1.UnregisteredNoExecuteTaint}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}
	writes := 0
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node, pod).WithStatusSubresource(&corev1.Pod{}).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
			writes++
			return apierrors.NewServiceUnavailable("injected")
		}}).Build()
	clk := clocktesting.NewFakeClock(time.Now())
	order := nominatingOrder(clk)
	order.Plan(map[string][]types.NamespacedName{"claim": {client.ObjectKeyFromObject(pod)}})
	c := NewController(kube, nil, nil, nil, clk).OrderReleases(order)
	c.launches.add("sim:///small", &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim"}}, nil)

	ctx := t.Context()
	var waited time.Duration
	for range 20 {
		res, err := c.RegisterNode(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(node)})
		if err != nil {
			t.Fatalf("RegisterNode: %v (a failed nomination is not an error)", err)
		}
		if res.RequeueAfter == 0 {
			break
		}
		clk.Step(res.RequeueAfter)
		waited += res.RequeueAfter
	}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(node), node); err != nil {
		t.Fatal(err)
	}
	if unregistered(node) || writes == 0 {
		t.Fatalf("registered %v after %v, nomination writes tried %d; want the node registered despite the failed writes", !unregistered(node), waited, writes)
	}
	if waited > nodeclaim.MaxReleaseHold {
		t.Errorf("held %v, more than MaxReleaseHold", waited)
	}
}

// bootsAtOnce is a cloud whose instances register their Node before Create returns,
// as the simulated cloud's can with no registration delay.
type bootsAtOnce struct {
	*fakecloud.CloudProvider
	kube client.Client
}

func (b bootsAtOnce) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	launched, err := b.CloudProvider.Create(ctx, nc)
	if err != nil {
		return nil, err
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-of-" + nc.Name, Labels: launched.Labels},
		Spec:   corev1.NodeSpec{ProviderID: launched.Status.ProviderID, Taints: []corev1.Taint{v1.UnregisteredNoExecuteTaint}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	return launched, b.kube.Create(ctx, node)
}

// A Node that is there by the time the launch is written is registered and
// recorded in the launch's own status write.
func TestLaunchRecordsANodeAlreadyThere(t *testing.T) {
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	claim := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", Finalizers: []string{v1.TerminationFinalizer}, CreationTimestamp: metav1.NewTime(clk.Now())},
		Spec: v1.NodeClaimSpec{NodeClassRef: simClass}}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(claim).WithStatusSubresource(&v1.NodeClaim{}).
		WithIndex(&v1.NodeClaim{}, nodeclaim.ProviderIDIndex, func(o client.Object) []string {
			return []string{o.(*v1.NodeClaim).Status.ProviderID}
		}).
		WithIndex(&corev1.Node{}, nodeclaim.ProviderIDIndex, func(o client.Object) []string {
			return []string{o.(*corev1.Node).Spec.ProviderID}
		}).Build()
	cloud := bootsAtOnce{CloudProvider: fakecloud.New(schedtest.SyntheticTypes(2)), kube: kube}
	c := NewController(kube, cloud, cloudprovider.NewUnavailableOfferings(clk, time.Minute), record.NewFakeRecorder(10), clk)
	ctx := t.Context()
	res, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != 0 {
		t.Errorf("requeued after %s: the claim is registered and has nothing to wait for", res.RequeueAfter)
	}
	got := &v1.NodeClaim{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "a"}, got); err != nil {
		t.Fatal(err)
	}
	for _, cond := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized} {
		if !meta.IsStatusConditionTrue(got.Status.Conditions, cond) {
			t.Errorf("condition %s not true: %+v", cond, got.Status.Conditions)
		}
	}
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "node-of-a"}, node); err != nil {
		t.Fatal(err)
	}
	if got.Status.NodeName != node.Name || unregistered(node) || node.Labels[v1.NodeRegisteredLabelKey] != "true" {
		t.Errorf("claim's node %q; node labels %v, taints %v", got.Status.NodeName, node.Labels, node.Spec.Taints)
	}
}

// deletedWhileLaunching is a cloud whose Create returns after the claim was deleted
// (its termination saw no provider ID and let it go).
type deletedWhileLaunching struct {
	*fakecloud.CloudProvider
	kube client.Client
}

func (d deletedWhileLaunching) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	launched, err := d.CloudProvider.Create(ctx, nc)
	if err != nil {
		return nil, err
	}
	gone := nc.DeepCopy()
	gone.Finalizers = nil
	if err := d.kube.Update(ctx, gone); err != nil {
		return nil, err
	}
	return launched, d.kube.Delete(ctx, gone)
}

// An instance whose claim went while it launched is terminated at once, and its
// Node, should it appear, is not registered: it would take pods for no claim.
func TestClaimDeletedWhileLaunching(t *testing.T) {
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	claim := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", Finalizers: []string{v1.TerminationFinalizer}, CreationTimestamp: metav1.NewTime(clk.Now())},
		Spec: v1.NodeClaimSpec{NodeClassRef: simClass}}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(claim).WithStatusSubresource(&v1.NodeClaim{}).
		WithIndex(&corev1.Node{}, nodeclaim.ProviderIDIndex, func(o client.Object) []string {
			return []string{o.(*corev1.Node).Spec.ProviderID}
		}).Build()
	cloud := deletedWhileLaunching{CloudProvider: fakecloud.New(schedtest.SyntheticTypes(2)), kube: kube}
	c := NewController(kube, cloud, cloudprovider.NewUnavailableOfferings(clk, time.Minute), record.NewFakeRecorder(10), clk)
	if _, err := c.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	if n := cloud.Instances(); n != 0 {
		t.Errorf("%d instances left running for a deleted claim", n)
	}
	if len(c.launches.byID) != 0 {
		t.Errorf("the launch of a deleted claim is remembered for registration: %v", c.launches.byID)
	}

	// The deletion seen first: a launch still in flight then is refused.
	c.launches.forgetClaim("b")
	if c.launches.add("sim:///late", &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, nil) || c.launches.get("sim:///late") != nil {
		t.Error("the late launch of a deleted claim was remembered")
	}
	clk.Step(LaunchTimeout + time.Second)
	c.launches.forgetClaim("c")
	if _, kept := c.launches.deleted["b"]; kept {
		t.Error("a deletion older than any launch is still remembered")
	}
}

// launchTest is a lifecycle controller over a fake cluster holding claims, and the
// fake cloud it launches through.
func launchTest(t *testing.T, clk *clocktesting.FakeClock, claims ...*v1.NodeClaim) (*Controller, client.Client, *fakecloud.CloudProvider, *record.FakeRecorder) {
	t.Helper()
	objs := make([]client.Object, len(claims))
	for i, nc := range claims {
		objs[i] = nc
	}
	return launchTestWith(t, clk, interceptor.Funcs{}, objs...)
}

// launchTestWith is launchTest over a client whose calls funcs may intercept.
func launchTestWith(t *testing.T, clk *clocktesting.FakeClock, funcs interceptor.Funcs, objs ...client.Object) (*Controller, client.Client, *fakecloud.CloudProvider, *record.FakeRecorder) {
	t.Helper()
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1.NodeClaim{}).WithInterceptorFuncs(funcs).
		WithIndex(&corev1.Node{}, nodeclaim.ProviderIDIndex, func(o client.Object) []string {
			return []string{o.(*corev1.Node).Spec.ProviderID}
		}).
		WithIndex(&v1.NodeClaim{}, nodeclaim.ProviderIDIndex, func(o client.Object) []string {
			return []string{o.(*v1.NodeClaim).Status.ProviderID}
		})
	for _, o := range objs {
		b = b.WithObjects(o)
	}
	kube := b.Build()
	cloud := fakecloud.New(schedtest.SyntheticTypes(2))
	recorder := record.NewFakeRecorder(10)
	return NewController(kube, cloud, cloudprovider.NewUnavailableOfferings(clk, time.Minute), recorder, clk), kube, cloud, recorder
}

// simClass is a NodeClass of the kind the fake cloud launches from.
var simClass = &v1.NodeClassReference{Group: "tailor.sh", Kind: "SimNodeClass", Name: "default"}

func pendingClaim(name string, created time.Time) *v1.NodeClaim {
	return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Finalizers: []string{v1.TerminationFinalizer},
		CreationTimestamp: metav1.NewTime(created)},
		Spec: v1.NodeClaimSpec{NodeClassRef: simClass, Requirements: []v1.NodeSelectorRequirementWithMinValues{
			{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"fake-it-0"}},
			{Key: v1.CapacityTypeLabelKey, Operator: v1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeSpot}},
			{Key: v1.LabelZone, Operator: v1.NodeSelectorOpIn, Values: []string{"zone-a"}}}}}
}

func reconcileClaim(t *testing.T, c *Controller, name string) (reconcile.Result, error) {
	t.Helper()
	return c.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
}

func deleting(t *testing.T, kube client.Client, name string) bool {
	t.Helper()
	nc := &v1.NodeClaim{}
	err := kube.Get(t.Context(), client.ObjectKey{Name: name}, nc)
	return err != nil || nc.DeletionTimestamp != nil
}

func event(recorder *record.FakeRecorder, reason string) bool {
	for {
		select {
		case e := <-recorder.Events:
			if strings.Contains(e, reason) {
				return true
			}
		default:
			return false
		}
	}
}

// A claim's launch and registration are Events on it, once each, as `kubectl
// describe nodeclaim` shows them; a NodeClass not ready is one too, once while it
// lasts, though the claim is looked at again every 10 seconds.
func TestLaunchAndRegistrationEvents(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c, kube, cloud, recorder := launchTest(t, clk, pendingClaim("a", clk.Now()))
	cloud.NextErrors["Create"] = []error{
		&cloudprovider.NodeClassNotReadyError{Kind: "SimNodeClass", Name: "default", Reason: "not found"},
		&cloudprovider.NodeClassNotReadyError{Kind: "SimNodeClass", Name: "default", Reason: "not found"},
	}
	for range 2 {
		if _, err := reconcileClaim(t, c, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reconcileClaim(t, c, "a"); err != nil {
		t.Fatal(err)
	}
	nc := &v1.NodeClaim{}
	if err := kube.Get(t.Context(), client.ObjectKey{Name: "a"}, nc); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Spec:   corev1.NodeSpec{ProviderID: nc.Status.ProviderID, Taints: []corev1.Taint{v1.UnregisteredNoExecuteTaint}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if err := kube.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	for range 2 { // a node heartbeat reconciles the claim again
		if _, err := reconcileClaim(t, c, "a"); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		`Warning NodeClassNotReady Cannot launch: `,
		"Normal Launched Launched " + nc.Status.ProviderID + ": fake-it-0, spot, zone-a",
		"Normal Registered Registered Node node-a",
	}
	got := drainEvents(recorder)
	if len(got) != len(want) {
		t.Fatalf("events %q, want %d: %q", got, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("event %d: %q, want %q", i, got[i], want[i])
		}
	}
}

func drainEvents(recorder *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// Insufficient capacity for every allowed offering deletes the claim, so its pods
// are planned again, and marks the offerings unavailable so that plan avoids them.
func TestInsufficientCapacityDeletesTheClaim(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c, kube, cloud, recorder := launchTest(t, clk, pendingClaim("scarce", clk.Now()))
	offering := cloudprovider.UnavailableOffering{InstanceType: "fake-it-0", Zone: "zone-a", CapacityType: v1.CapacityTypeSpot}
	cloud.Unavailable[offering] = true
	if _, err := reconcileClaim(t, c, "scarce"); err != nil {
		t.Fatal(err)
	}
	if !deleting(t, kube, "scarce") || !event(recorder, "Warning InsufficientCapacityError ") {
		t.Error("the claim was not deleted with an InsufficientCapacityError event (Karpenter's reason)")
	}
	for _, it := range c.unavailable.Apply(schedtest.SyntheticTypes(2)) {
		for _, o := range it.Offerings {
			if it.Name == offering.InstanceType && o.Zone == offering.Zone && o.CapacityType == offering.CapacityType && o.Available {
				t.Error("the offering that had no capacity is still offered to the next plan")
			}
		}
	}
	if cloud.Instances() != 0 {
		t.Errorf("%d instances launched", cloud.Instances())
	}
}

// A NodeClass that is not ready says so on the claim (Launched False) and is asked
// again later; other cloud errors are returned, so the controller retries with
// backoff, and the launch succeeds once the cloud answers.
func TestLaunchErrorsAreRetried(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c, kube, cloud, _ := launchTest(t, clk, pendingClaim("a", clk.Now()))
	cloud.NextErrors["Create"] = []error{
		&cloudprovider.NodeClassNotReadyError{Kind: "SimNodeClass", Name: "default", Reason: "not found"},
		errors.New("cloud API throttled"),
	}
	res, err := reconcileClaim(t, c, "a")
	if err != nil || res.RequeueAfter == 0 {
		t.Fatalf("NodeClassNotReady: result %+v, error %v; want a requeue and no error", res, err)
	}
	nc := &v1.NodeClaim{}
	if err := kube.Get(t.Context(), client.ObjectKey{Name: "a"}, nc); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeLaunched); cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "NodeClassNotReady" {
		t.Errorf("Launched condition %+v, want False/NodeClassNotReady", cond)
	}
	if _, err := reconcileClaim(t, c, "a"); err == nil || !strings.Contains(err.Error(), "throttled") {
		t.Errorf("a cloud error: %v, want it returned for a retry", err)
	}
	if _, err := reconcileClaim(t, c, "a"); err != nil {
		t.Fatal(err)
	}
	if err := kube.Get(t.Context(), client.ObjectKey{Name: "a"}, nc); err != nil {
		t.Fatal(err)
	}
	if nc.Status.ProviderID == "" || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeLaunched) || cloud.Instances() != 1 {
		t.Errorf("after the errors: provider ID %q, conditions %v, %d instances; want launched once", nc.Status.ProviderID, nc.Status.Conditions, cloud.Instances())
	}
}

// A claim not launched within LaunchTimeout, or whose Node does not register within
// RegistrationTimeout of its launch, is deleted.
func TestLivenessTimeouts(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	stuck := pendingClaim("stuck", clk.Now().Add(-LaunchTimeout-time.Second))
	young := pendingClaim("young", clk.Now().Add(-LaunchTimeout+time.Minute))
	c, kube, cloud, recorder := launchTest(t, clk, stuck, young)
	cloud.NextErrors["Create"] = []error{errors.New("cloud down")}
	if _, err := reconcileClaim(t, c, "young"); err == nil {
		t.Fatal("a failing launch reported no error")
	}
	if deleting(t, kube, "young") {
		t.Error("a claim inside its launch timeout was deleted")
	}
	if _, err := reconcileClaim(t, c, "stuck"); err != nil {
		t.Fatal(err)
	}
	if !deleting(t, kube, "stuck") || !event(recorder, "LaunchTimedOut") {
		t.Error("a claim past its launch timeout was not deleted with a LaunchTimedOut event")
	}

	// young launches; its Node never comes.
	if _, err := reconcileClaim(t, c, "young"); err != nil {
		t.Fatal(err)
	}
	clk.Step(RegistrationTimeout - time.Minute)
	if _, err := reconcileClaim(t, c, "young"); err != nil {
		t.Fatal(err)
	}
	if deleting(t, kube, "young") {
		t.Error("a claim inside its registration timeout was deleted")
	}
	clk.Step(2 * time.Minute)
	if _, err := reconcileClaim(t, c, "young"); err != nil {
		t.Fatal(err)
	}
	if !deleting(t, kube, "young") || !event(recorder, "RegistrationTimedOut") {
		t.Error("a claim past its registration timeout was not deleted with a RegistrationTimedOut event")
	}
}

// failOnce fails the first write that fails matches, as a transient API error.
func failOnce(fails func(subResource string, obj client.Object) bool) interceptor.Funcs {
	failed := false
	fail := func(sub string, obj client.Object) bool {
		if failed || !fails(sub, obj) {
			return false
		}
		failed = true
		return true
	}
	return interceptor.Funcs{
		Patch: func(ctx context.Context, kube client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if fail("", obj) {
				return apierrors.NewServiceUnavailable("injected: the patch did not go through")
			}
			return kube.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, kube client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if fail(sub, obj) {
				return apierrors.NewServiceUnavailable("injected: the status patch did not go through")
			}
			return kube.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}
}

// A launch whose labels or status could not be written is written again on the
// retry, not launched again: the cloud is asked once and one instance exists.
func TestFailedLaunchWriteDoesNotLaunchAgain(t *testing.T) {
	tests := []struct {
		name  string
		fails func(sub string, obj client.Object) bool
	}{
		{"labels", func(sub string, obj client.Object) bool {
			_, claim := obj.(*v1.NodeClaim)
			return claim && sub == "" && obj.GetLabels()[v1.LabelInstanceType] != ""
		}},
		{"status", func(sub string, obj client.Object) bool {
			_, claim := obj.(*v1.NodeClaim)
			return claim && sub == "status"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			c, kube, cloud, _ := launchTestWith(t, clk, failOnce(tt.fails), pendingClaim("a", clk.Now()))
			if _, err := reconcileClaim(t, c, "a"); err == nil {
				t.Fatal("a failed launch write reported no error")
			}
			if _, err := reconcileClaim(t, c, "a"); err != nil {
				t.Fatal(err)
			}
			nc := &v1.NodeClaim{}
			if err := kube.Get(t.Context(), client.ObjectKey{Name: "a"}, nc); err != nil {
				t.Fatal(err)
			}
			instances, err := cloud.List(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			creates := 0
			for _, call := range cloud.Calls {
				if call == "Create" {
					creates++
				}
			}
			if creates != 1 || len(instances) != 1 || instances[0].Status.ProviderID != nc.Status.ProviderID {
				t.Errorf("%d Create calls, instances %v, claim's provider ID %q: want one launch, recorded on the claim",
					creates, providerIDs(instances), nc.Status.ProviderID)
			}
			if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeLaunched) || nc.Labels[v1.LabelInstanceType] == "" {
				t.Errorf("claim after the retry: labels %v, conditions %v; want it launched", nc.Labels, nc.Status.Conditions)
			}
			if len(c.launches.byClaim) != 0 {
				t.Errorf("a recorded launch is still held for retries: %v", c.launches.byClaim)
			}
		})
	}
}

func providerIDs(ncs []*v1.NodeClaim) []string {
	out := make([]string, len(ncs))
	for i, nc := range ncs {
		out[i] = nc.Status.ProviderID
	}
	return out
}

// A claim of a NodeClass kind the provider does not launch from (Karpenter's, in
// a cut-over) is not touched: no finalizer, no launch, and its Node, unregistered,
// is not registered.
func TestForeignClaimsAreLeftAlone(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	ec2 := &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	pending := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "karpenter-pending", UID: "uid-pending", CreationTimestamp: metav1.NewTime(clk.Now())},
		Spec: v1.NodeClaimSpec{NodeClassRef: ec2}}
	launched := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "karpenter-launched", UID: "uid-launched", CreationTimestamp: metav1.NewTime(clk.Now()),
		Finalizers: []string{v1.TerminationFinalizer}, Labels: map[string]string{"team": "payments"}},
		Spec:   v1.NodeClaimSpec{NodeClassRef: ec2},
		Status: v1.NodeClaimStatus{ProviderID: "aws:///us-east-1a/i-0abc"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-0-1"}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0abc",
		Taints: []corev1.Taint{v1.UnregisteredNoExecuteTaint}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	c, kube, cloud, _ := launchTestWith(t, clk, interceptor.Funcs{}, pending, launched, node)
	ctx := t.Context()
	before := map[string]client.Object{}
	for _, o := range []client.Object{&v1.NodeClaim{ObjectMeta: pending.ObjectMeta}, &v1.NodeClaim{ObjectMeta: launched.ObjectMeta}, &corev1.Node{ObjectMeta: node.ObjectMeta}} {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Fatal(err)
		}
		before[o.GetName()] = o
	}
	for _, name := range []string{"karpenter-pending", "karpenter-launched"} {
		if res, err := reconcileClaim(t, c, name); err != nil || res != (reconcile.Result{}) {
			t.Errorf("claim %s: result %+v, error %v; want nothing to do", name, res, err)
		}
	}
	if _, err := c.RegisterNode(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(node)}); err != nil {
		t.Fatal(err)
	}
	for name, was := range before {
		now := was.DeepCopyObject().(client.Object)
		if err := kube.Get(ctx, client.ObjectKeyFromObject(was), now); err != nil {
			t.Fatal(err)
		}
		if now.GetResourceVersion() != was.GetResourceVersion() {
			t.Errorf("%s was written: finalizers %v, labels %v", name, now.GetFinalizers(), now.GetLabels())
		}
	}
	if len(cloud.Calls) != 0 {
		t.Errorf("the cloud was called for foreign claims: %v", cloud.Calls)
	}
}

// Registration gives the Node the NodePool template's annotations (not the claim's
// bookkeeping), and leaves its taints alone when its kubelet registered them itself
// and says so with karpenter.sh/do-not-sync-taints.
func TestRegistrationAnnotationsAndDoNotSyncTaints(t *testing.T) {
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: "sim:///" + name,
			Taints: []corev1.Taint{v1.UnregisteredNoExecuteTaint, {Key: "own", Effect: corev1.TaintEffectNoSchedule}}}}
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(node("synced", nil),
		node("kept", map[string]string{v1.NodeDoNotSyncTaintsLabelKey: "true"})).Build()
	c := NewController(kube, nil, nil, nil, clocktesting.NewFakeClock(time.Now()))
	claim := func(name string) *v1.NodeClaim {
		return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			"example.com/owner": "team-a", v1.NodePoolHashAnnotationKey: "123", v1.NodePoolHashVersionAnnotationKey: "v3"}},
			Spec: v1.NodeClaimSpec{Taints: []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}}}
	}
	c.launches.add("sim:///synced", claim("claim-synced"), nil)
	c.launches.add("sim:///kept", claim("claim-kept"), nil)
	ctx := t.Context()
	for _, name := range []string{"synced", "kept"} {
		if _, err := c.RegisterNode(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
			t.Fatalf("node %s: %v", name, err)
		}
	}
	taintKeys := func(n *corev1.Node) []string {
		var keys []string
		for _, t := range n.Spec.Taints {
			keys = append(keys, t.Key)
		}
		slices.Sort(keys)
		return keys
	}
	for name, want := range map[string][]string{"synced": {"dedicated", "own"}, "kept": {"own"}} {
		n := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		if got := taintKeys(n); !slices.Equal(got, want) {
			t.Errorf("node %s: taints %v, want %v", name, got, want)
		}
		if n.Annotations["example.com/owner"] != "team-a" || n.Annotations[v1.NodePoolHashAnnotationKey] != "" {
			t.Errorf("node %s: annotations %v, want the template's and not the hash", name, n.Annotations)
		}
	}
}
