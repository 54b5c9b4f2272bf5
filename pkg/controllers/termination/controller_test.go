package termination

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/kubescheme"
	"github.com/nodetailor/tailor/internal/localcluster"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/cloudprovider/fake"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// The controller runs against a real API server: cached reads through a manager's
// cache (with the indexes it lists by), uncached reads and every write to the API.
var (
	cached client.Client // the manager's client
	direct client.Client // uncached, for the tests' own reads and writes
	reader client.Reader // the manager's API reader
	// cloud is shared so provider IDs, and so Nodes, differ across tests.
	cloud = fake.New(schedtest.SyntheticTypes(2))
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	cluster, k, stop, err := testenv.Start(localcluster.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	direct = k
	ctrl.SetLogger(logr.Discard())
	scheme, err := kubescheme.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := ctrl.NewManager(cluster.Config, ctrl.Options{Scheme: scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := nodeclaim.IndexProviderIDs(ctx, mgr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := IndexFields(ctx, mgr.GetFieldIndexer()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "cache did not sync")
		return 1
	}
	cached, reader = mgr.GetClient(), mgr.GetAPIReader()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}

// env is one test's controller, with a fake clock that moves only when a
// reconcile asks to be called again later.
type env struct {
	t     *testing.T
	c     *Controller
	clock *clocktesting.FakeClock
	cloud cloudprovider.CloudProvider
}

func newEnv(t *testing.T, cp cloudprovider.CloudProvider) *env {
	clk := clocktesting.NewFakeClock(time.Now())
	return &env{t: t, c: NewController(cached, reader, cp, &record.FakeRecorder{}, clk), clock: clk, cloud: cp}
}

var simRef = &v1.NodeClassReference{Group: "tailor.sh", Kind: "SimNodeClass", Name: "default"}

// launch creates a claim of the NodeClass ref with an instance in the fake cloud
// and its registered, ready Node, both carrying the termination finalizer.
func (e *env) launch(name string, ref *v1.NodeClassReference, mutate ...func(*v1.NodeClaim)) (*v1.NodeClaim, *corev1.Node) {
	e.t.Helper()
	ctx := e.t.Context()
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{v1.TerminationFinalizer}},
		Spec: v1.NodeClaimSpec{NodeClassRef: ref, Requirements: []v1.NodeSelectorRequirementWithMinValues{
			{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"fake-it-0"}}}}}
	for _, m := range mutate {
		m(nc)
	}
	if err := direct.Create(ctx, nc); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { release(nc) })
	launched, err := cloud.Create(ctx, nc)
	if err != nil {
		e.t.Fatal(err)
	}
	nc.Status.ProviderID = launched.Status.ProviderID
	nc.Status.NodeName = name
	if err := direct.Status().Update(ctx, nc); err != nil {
		e.t.Fatal(err)
	}
	node := e.node(name, nc.Status.ProviderID, true)
	// The controller reads through the cache: wait until it shows both.
	e.eventually("the cache shows the claim and its node", func(ctx context.Context) bool {
		n, err := nodeclaim.NodeOf(ctx, cached, nc)
		return err == nil && n != nil
	})
	return nc, node
}

// node creates a Node carrying the termination finalizer.
func (e *env) node(name, providerID string, isReady bool) *corev1.Node {
	e.t.Helper()
	status := corev1.ConditionTrue
	if !isReady {
		status = corev1.ConditionFalse
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{v1.TerminationFinalizer}},
		Spec:   corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}}}
	if err := direct.Create(e.t.Context(), node); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { release(node) })
	return node
}

// release removes a test object whatever state the test left it in.
func release(o client.Object) {
	ctx := context.Background()
	if err := direct.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
		return
	}
	patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
	o.SetFinalizers(nil)
	_ = direct.Patch(ctx, o, patch)
	_ = direct.Delete(ctx, o)
}

// pod creates a pod bound to node.
func (e *env) pod(name, node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: map[string]string{}},
		Spec: corev1.PodSpec{NodeName: node, TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
	for _, m := range mutate {
		m(p)
	}
	if err := direct.Create(e.t.Context(), p); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		_ = direct.Delete(context.Background(), p, client.GracePeriodSeconds(0))
	})
	return p
}

// owned makes the pod a DaemonSet's (no DaemonSet controller runs here).
func owned(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds-" + p.Name, UID: "0"}}
}

// slow gives the pod a grace period: without a kubelet it then stays terminating.
func slow(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30) }

func (e *env) eventually(what string, cond func(ctx context.Context) bool) {
	e.t.Helper()
	if err := wait.PollUntilContextTimeout(e.t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	}); err != nil {
		e.t.Fatalf("%s: not within 30s", what)
	}
}

// reconcileUntil reconciles with r (a claim's or a node's reconcile) until done
// holds, moving the clock as each pass asks. It fails if done never holds.
func (e *env) reconcileUntil(what string, r func(context.Context, reconcile.Request) (reconcile.Result, error), name string, done func(ctx context.Context) bool) {
	e.t.Helper()
	var last string
	if err := wait.PollUntilContextTimeout(e.t.Context(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if done(ctx) {
			return true, nil
		}
		res, err := r(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
		last = fmt.Sprintf("result %+v, error %v", res, err)
		e.clock.Step(res.RequeueAfter)
		return false, nil
	}); err != nil {
		e.t.Fatalf("%s: not within 30s; last reconcile: %s", what, last)
	}
}

// passes reconciles n times, moving the clock as each pass asks.
func (e *env) passes(n int, r func(context.Context, reconcile.Request) (reconcile.Result, error), name string) {
	e.t.Helper()
	for range n {
		res, err := r(e.t.Context(), reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
		if err != nil {
			e.t.Fatalf("reconcile %s: %v", name, err)
		}
		e.clock.Step(max(res.RequeueAfter, time.Second))
	}
}

func gone(ctx context.Context, o client.Object) bool {
	return apierrors.IsNotFound(direct.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)))
}

func released(ctx context.Context, o client.Object) bool {
	cp := o.DeepCopyObject().(client.Object)
	err := direct.Get(ctx, client.ObjectKeyFromObject(o), cp)
	return apierrors.IsNotFound(err) || (err == nil && !controllerutil.ContainsFinalizer(cp, v1.TerminationFinalizer))
}

func (e *env) deleteObj(o client.Object) {
	e.t.Helper()
	if err := direct.Delete(e.t.Context(), o); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) instanceExists(providerID string) bool {
	_, err := cloud.Get(e.t.Context(), providerID)
	return err == nil
}

func (e *env) fresh(o client.Object) client.Object {
	e.t.Helper()
	cp := o.DeepCopyObject().(client.Object)
	if err := direct.Get(e.t.Context(), client.ObjectKeyFromObject(o), cp); err != nil {
		e.t.Fatalf("reading %s: %v", o.GetName(), err)
	}
	return cp
}

// A node running DaemonSet pods that tolerate every taint (kube-proxy, a log
// agent) is removed: those pods are neither evicted nor waited for, while an
// ordinary DaemonSet pod is evicted, after the ordinary pods.
func TestTolerateEverythingDaemonSetDoesNotHoldTheNode(t *testing.T) {
	e := newEnv(t, cloud)
	nc, node := e.launch("tolerant-ds", simRef)
	tolerateAll := func(p *corev1.Pod) { p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }
	proxy := e.pod("kube-proxy-1", node.Name, owned, tolerateAll, slow, func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" })
	logs := e.pod("log-agent-1", node.Name, owned, tolerateAll, slow)
	agent := e.pod("agent-1", node.Name, owned)
	web := e.pod("web-1", node.Name)
	e.eventually("the cache shows the pods", func(ctx context.Context) bool {
		pods := &corev1.PodList{}
		return cached.List(ctx, pods, client.MatchingFields{NodeNameIndex: node.Name}) == nil && len(pods.Items) == 4
	})
	e.deleteObj(nc)
	e.reconcileUntil("the claim terminated", e.c.Reconcile, nc.Name, func(ctx context.Context) bool {
		// Tiers: the DaemonSet pod only once the ordinary one is gone.
		if gone(ctx, agent) && !gone(ctx, web) {
			t.Fatal("the DaemonSet pod was evicted before the ordinary pod")
		}
		return gone(ctx, nc)
	})
	if !gone(t.Context(), web) || !gone(t.Context(), agent) {
		t.Error("the ordinary pod and the DaemonSet pod that does not tolerate the taint were not evicted")
	}
	for _, p := range []*corev1.Pod{proxy, logs} {
		if got := e.fresh(p); got.GetDeletionTimestamp() != nil {
			t.Errorf("pod %s tolerates the disrupted taint but was evicted", p.Name)
		}
	}
	if !released(t.Context(), node) || e.instanceExists(nc.Status.ProviderID) {
		t.Error("the node was not released or its instance not terminated")
	}
}

// A pod stuck terminating (its kubelet will never confirm) holds the drain only
// until it is past its grace period.
func TestPodStuckTerminatingDoesNotHoldTheNode(t *testing.T) {
	e := newEnv(t, cloud)
	nc, node := e.launch("stuck-pod", simRef)
	stuck := e.pod("stuck-1", node.Name, slow)
	e.eventually("the cache shows the pod", func(ctx context.Context) bool {
		return cached.Get(ctx, client.ObjectKeyFromObject(stuck), &corev1.Pod{}) == nil
	})
	e.deleteObj(nc)
	e.reconcileUntil("the claim terminated", e.c.Reconcile, nc.Name, func(ctx context.Context) bool { return gone(ctx, nc) })
	p := e.fresh(stuck).(*corev1.Pod)
	if p.DeletionTimestamp == nil {
		t.Fatal("the pod was never evicted")
	}
	if limit := p.DeletionTimestamp.Time; e.clock.Now().Before(limit) {
		t.Errorf("terminated at %s, before the pod was stuck (%s)", e.clock.Now(), limit)
	}
	// Not as long again: past its grace period the pod is not waited for.
	if late := p.DeletionTimestamp.Add(15 * time.Second); e.clock.Now().After(late) {
		t.Errorf("terminated at %s, well after the pod's grace period ended (%s)", e.clock.Now(), p.DeletionTimestamp.Time)
	}
}

// A NotReady node whose instance the cloud reports gone is released at once: no
// drain, no waiting on its pods.
func TestDeadNodeIsReleasedAtOnce(t *testing.T) {
	e := newEnv(t, cloud)
	nc, node := e.launch("dead", simRef)
	held := e.pod("held-1", node.Name, func(p *corev1.Pod) { p.Annotations[v1.DoNotDisruptAnnotationKey] = "true" })
	base := node.DeepCopy()
	node.Status.Conditions[0].Status = corev1.ConditionUnknown
	if err := direct.Status().Patch(t.Context(), node, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	if err := cloud.Delete(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	e.eventually("the cache shows the node NotReady", func(ctx context.Context) bool {
		n := &corev1.Node{}
		return cached.Get(ctx, client.ObjectKeyFromObject(node), n) == nil && !ready(n)
	})
	start := e.clock.Now()
	e.deleteObj(nc)
	e.reconcileUntil("the claim terminated", e.c.Reconcile, nc.Name, func(ctx context.Context) bool { return gone(ctx, nc) })
	// Only the short requeues while the Node's deletion reaches the cache.
	if waited := e.clock.Since(start); waited >= drainRetry {
		t.Errorf("waited %s before releasing a dead node", waited)
	}
	if !released(t.Context(), node) {
		t.Error("the node kept its finalizer")
	}
	if got := e.fresh(held); got.GetDeletionTimestamp() != nil {
		t.Error("a pod of a dead node was evicted")
	}
}

// A Node with the termination finalizer and no NodeClaim is drained, its
// instance terminated, and released; one whose NodePool launches from another
// controller's NodeClass is left alone.
func TestNodeWithoutClaimIsReleased(t *testing.T) {
	e := newEnv(t, cloud)
	orphan := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}, Spec: v1.NodeClaimSpec{NodeClassRef: simRef,
		Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"fake-it-0"}}}}}
	inst, err := cloud.Create(t.Context(), orphan)
	if err != nil {
		t.Fatal(err)
	}
	node := e.node("orphan", inst.Status.ProviderID, true)
	web := e.pod("orphan-web", node.Name)
	e.eventually("the cache shows the pod", func(ctx context.Context) bool {
		return cached.Get(ctx, client.ObjectKeyFromObject(web), &corev1.Pod{}) == nil
	})
	e.deleteObj(node)
	e.reconcileUntil("the node released", e.c.ReconcileNode, node.Name, func(ctx context.Context) bool { return gone(ctx, node) })
	if !gone(t.Context(), web) {
		t.Error("the node's pod was not evicted")
	}
	if e.instanceExists(inst.Status.ProviderID) {
		t.Error("the node's instance was not terminated")
	}

	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "karpenters"}}
	pool.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	if err := direct.Create(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { release(pool) })
	foreign := e.node("foreign-orphan", "aws:///us-east-1a/i-0123", true)
	base := foreign.DeepCopy()
	foreign.Labels = map[string]string{v1.NodePoolLabelKey: pool.Name}
	if err := direct.Patch(t.Context(), foreign, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	e.eventually("the cache shows the pool and the node's label", func(ctx context.Context) bool {
		n := &corev1.Node{}
		return cached.Get(ctx, client.ObjectKey{Name: pool.Name}, &v1.NodePool{}) == nil &&
			cached.Get(ctx, client.ObjectKeyFromObject(foreign), n) == nil && n.Labels[v1.NodePoolLabelKey] == pool.Name
	})
	e.deleteObj(foreign)
	e.eventually("the cache shows the node deleting", func(ctx context.Context) bool {
		n := &corev1.Node{}
		return cached.Get(ctx, client.ObjectKeyFromObject(foreign), n) == nil && n.DeletionTimestamp != nil
	})
	e.passes(5, e.c.ReconcileNode, foreign.Name)
	if got := e.fresh(foreign).(*corev1.Node); !controllerutil.ContainsFinalizer(got, v1.TerminationFinalizer) ||
		slices.ContainsFunc(got.Spec.Taints, isDisruptedTaint) {
		t.Errorf("another controller's node was touched: finalizers %v, taints %v", got.Finalizers, got.Spec.Taints)
	}
}

// A claim of a NodeClass kind the provider does not launch from (Karpenter's
// EC2NodeClass while running the sim provider) keeps its finalizer; its Node is
// neither deleted nor drained, its instance not terminated.
func TestOtherProvidersClaimIsLeftAlone(t *testing.T) {
	e := newEnv(t, cloud)
	nc, node := e.launch("ec2", &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"})
	web := e.pod("ec2-web", node.Name)
	e.deleteObj(nc)
	e.eventually("the cache shows the claim deleting", func(ctx context.Context) bool {
		got := &v1.NodeClaim{}
		return cached.Get(ctx, client.ObjectKeyFromObject(nc), got) == nil && got.DeletionTimestamp != nil
	})
	e.passes(5, e.c.Reconcile, nc.Name)
	// Karpenter deletes the Node too: the node side leaves it to the claim's owner.
	e.deleteObj(node)
	e.eventually("the cache shows the node deleting", func(ctx context.Context) bool {
		n := &corev1.Node{}
		return cached.Get(ctx, client.ObjectKeyFromObject(node), n) == nil && n.DeletionTimestamp != nil
	})
	e.passes(5, e.c.Reconcile, nc.Name)
	e.passes(5, e.c.ReconcileNode, node.Name)
	if gone(t.Context(), node) || gone(t.Context(), nc) {
		t.Fatal("the claim or its node was released")
	}
	if got := e.fresh(nc); !controllerutil.ContainsFinalizer(got, v1.TerminationFinalizer) {
		t.Error("the claim lost its finalizer")
	}
	got := e.fresh(node).(*corev1.Node)
	if !controllerutil.ContainsFinalizer(got, v1.TerminationFinalizer) || slices.ContainsFunc(got.Spec.Taints, isDisruptedTaint) {
		t.Errorf("the node was touched: finalizers %v, taints %v", got.Finalizers, got.Spec.Taints)
	}
	if p := e.fresh(web); p.GetDeletionTimestamp() != nil {
		t.Error("the node's pod was evicted")
	}
	if !e.instanceExists(nc.Status.ProviderID) {
		t.Error("the instance was terminated")
	}
}

// staleCache is the manager's client whose cache has not seen any pod bound yet.
type staleCache struct{ client.Client }

func (s staleCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.PodList); ok {
		return nil
	}
	return s.Client.List(ctx, list, opts...)
}

// An empty node is not terminated the instant it is tainted: the taint settles
// first, and a pod bound in that time (one the cache may not show yet) is evicted.
func TestEmptyNodeWaitsForTheTaintToSettle(t *testing.T) {
	e := newEnv(t, cloud)
	e.c.kube = staleCache{cached}
	nc, node := e.launch("settle", simRef)
	e.deleteObj(nc)
	e.eventually("the cache shows the claim deleting", func(ctx context.Context) bool {
		got := &v1.NodeClaim{}
		return cached.Get(ctx, client.ObjectKeyFromObject(nc), got) == nil && got.DeletionTimestamp != nil
	})
	// The first pass deletes the Node; a later one taints it. The clock stands still.
	tainted := e.clock.Now()
	e.eventually("the node tainted", func(ctx context.Context) bool {
		if _, err := e.c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}); err != nil {
			t.Fatal(err)
		}
		n := &corev1.Node{}
		if err := direct.Get(ctx, client.ObjectKeyFromObject(node), n); err != nil {
			t.Fatalf("the node went the moment it was tainted: %v", err)
		}
		return slices.ContainsFunc(n.Spec.Taints, isDisruptedTaint)
	})
	if !e.instanceExists(nc.Status.ProviderID) {
		t.Fatal("the instance was terminated the moment its node was tainted")
	}
	e.eventually("the cache shows the taint", func(ctx context.Context) bool {
		n := &corev1.Node{}
		return cached.Get(ctx, client.ObjectKeyFromObject(node), n) == nil && slices.ContainsFunc(n.Spec.Taints, isDisruptedTaint)
	})
	// The scheduler binds a pod from its view of the node before the taint.
	late := e.pod("late-1", node.Name)
	for e.clock.Since(tainted) < TaintSettle {
		res, err := e.c.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)})
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter <= 0 {
			t.Fatalf("the node counted as drained %s after the taint", e.clock.Since(tainted))
		}
		e.clock.Step(res.RequeueAfter)
	}
	if !e.instanceExists(nc.Status.ProviderID) {
		t.Fatal("the instance was terminated before the taint settled")
	}
	e.reconcileUntil("the claim terminated", e.c.Reconcile, nc.Name, func(ctx context.Context) bool { return gone(ctx, nc) })
	if !gone(t.Context(), late) {
		t.Error("the pod bound after the taint was not evicted before the instance went")
	}
}

func (e *env) attachment(name, node, pv string) *storagev1.VolumeAttachment {
	e.t.Helper()
	va := &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "csi.example.com", NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}}}
	if err := direct.Create(e.t.Context(), va); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { release(va) })
	return va
}

// After the drain, termination waits for the node's volumes to detach, except
// those of pods that stay on the node, and not past terminationGracePeriod.
func TestVolumesDetachBeforeTheInstanceGoes(t *testing.T) {
	e := newEnv(t, cloud)
	nc, node := e.launch("volumes", simRef)
	// A log agent that stays on the node, with its own persistent volume.
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "agent-data", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-agent", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if err := direct.Create(t.Context(), pvc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { release(pvc) })
	e.pod("agent-vol", node.Name, owned, func(p *corev1.Pod) {
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}
	})
	data := e.attachment("volumes-data", node.Name, "pv-data")
	e.attachment("volumes-agent", node.Name, "pv-agent")
	e.eventually("the cache shows the attachments", func(ctx context.Context) bool {
		vas := &storagev1.VolumeAttachmentList{}
		return cached.List(ctx, vas, client.MatchingFields{NodeNameIndex: node.Name}) == nil && len(vas.Items) == 2
	})
	e.deleteObj(nc)
	e.passes(10, e.c.Reconcile, nc.Name)
	if !e.instanceExists(nc.Status.ProviderID) || released(t.Context(), nc) {
		t.Fatal("the instance was terminated while a volume was still attached")
	}
	// The attach-detach controller detaches it; the agent's volume is not waited for.
	release(data)
	e.reconcileUntil("the claim terminated", e.c.Reconcile, nc.Name, func(ctx context.Context) bool { return gone(ctx, nc) })
	if e.instanceExists(nc.Status.ProviderID) {
		t.Error("the instance was not terminated")
	}

	// A volume that never detaches holds the node only until terminationGracePeriod.
	capped, cappedNode := e.launch("volumes-tgp", simRef, func(nc *v1.NodeClaim) {
		nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Minute}
	})
	e.attachment("volumes-tgp-data", cappedNode.Name, "pv-stuck")
	e.eventually("the cache shows the attachment", func(ctx context.Context) bool {
		vas := &storagev1.VolumeAttachmentList{}
		return cached.List(ctx, vas, client.MatchingFields{NodeNameIndex: cappedNode.Name}) == nil && len(vas.Items) == 1
	})
	e.deleteObj(capped)
	var nodeDeleted time.Time
	e.reconcileUntil("the claim terminated", e.c.Reconcile, capped.Name, func(ctx context.Context) bool {
		if n := (&corev1.Node{}); direct.Get(ctx, client.ObjectKeyFromObject(cappedNode), n) == nil && n.DeletionTimestamp != nil {
			nodeDeleted = n.DeletionTimestamp.Time
		}
		return gone(ctx, capped)
	})
	if nodeDeleted.IsZero() || e.clock.Now().Before(nodeDeleted.Add(time.Minute)) {
		t.Errorf("terminated at %s with a volume attached, before terminationGracePeriod ended", e.clock.Now())
	}
}

// shuttingDown is a cloud whose instances take a while to go: Delete starts the
// shutdown, Get still finds the instance until the test says it is gone.
type shuttingDown struct {
	cloudprovider.CloudProvider
	mu       sync.Mutex
	deletes  int
	finished bool
}

func (s *shuttingDown) Delete(ctx context.Context, nc *v1.NodeClaim) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deletes++
	if s.finished {
		return s.CloudProvider.Delete(ctx, nc)
	}
	return nil
}

func (s *shuttingDown) finish(ctx context.Context, nc *v1.NodeClaim) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.finished = true
	return s.CloudProvider.Delete(ctx, nc)
}

// The finalizers stay until the cloud reports the instance gone, not merely
// asked to terminate; termination is asked for once.
func TestFinalizersStayUntilTheInstanceIsGone(t *testing.T) {
	slowCloud := &shuttingDown{CloudProvider: cloud}
	e := newEnv(t, slowCloud)
	nc, node := e.launch("shutdown", simRef)
	e.deleteObj(nc)
	e.reconcileUntil("termination asked for", e.c.Reconcile, nc.Name, func(ctx context.Context) bool {
		slowCloud.mu.Lock()
		defer slowCloud.mu.Unlock()
		return slowCloud.deletes > 0
	})
	e.eventually("the claim marked InstanceTerminating", func(ctx context.Context) bool {
		got := &v1.NodeClaim{}
		return cached.Get(ctx, client.ObjectKeyFromObject(nc), got) == nil &&
			meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeInstanceTerminating)
	})
	e.passes(5, e.c.Reconcile, nc.Name)
	if released(t.Context(), nc) || released(t.Context(), node) {
		t.Fatal("finalizers removed while the instance was still shutting down")
	}
	if err := slowCloud.finish(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	e.reconcileUntil("the claim terminated", e.c.Reconcile, nc.Name, func(ctx context.Context) bool { return gone(ctx, nc) })
	if !released(t.Context(), node) {
		t.Error("the node kept its finalizer")
	}
	slowCloud.mu.Lock()
	defer slowCloud.mu.Unlock()
	if slowCloud.deletes != 1 {
		t.Errorf("termination asked for %d times, want once", slowCloud.deletes)
	}
}
