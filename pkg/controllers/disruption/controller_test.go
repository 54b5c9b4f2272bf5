package disruption

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/kubescheme"
	"github.com/nodetailor/tailor/internal/localcluster"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/cloudprovider/fake"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
	disrupt "github.com/nodetailor/tailor/pkg/disruption"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
	"github.com/nodetailor/tailor/pkg/state"
)

var cfg *rest.Config

func TestMain(m *testing.M) {
	cluster, _, stop, err := testenv.Start(localcluster.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cfg = cluster.Config
	code := m.Run()
	stop()
	os.Exit(code)
}

// manager starts a manager with the provider ID index the controller lists by, and
// returns its cached client and its API reader once the cache is synced.
func manager(t *testing.T) (client.Client, client.Reader) {
	t.Helper()
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := nodeclaim.IndexProviderIDs(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return mgr.GetClient(), mgr.GetAPIReader()
}

var (
	simClass     = testobj.SimClass("default")
	foreignClass = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
)

// node creates a registered, initialized, ready node and its claim of the NodeClass
// ref in NodePool pool.
func node(t *testing.T, kube client.Client, name, pool string, ref *v1.NodeClassReference, taints ...corev1.Taint) {
	t.Helper()
	ctx := t.Context()
	id := "fake:///" + name
	n := testobj.Node(name, "4", "8Gi", testobj.ProviderID(id), testobj.NodeTaints(taints...), testobj.NodeReady(corev1.ConditionTrue, time.Now()),
		testobj.NodeLabels(v1.NodePoolLabelKey, pool, v1.CapacityTypeLabelKey, v1.CapacityTypeOnDemand))
	status := n.Status
	if err := kube.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	n.Status = status
	if err := kube.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	nc := testobj.NodeClaim(name, testobj.ClaimLabels(v1.NodePoolLabelKey, pool), testobj.ClaimNodeClassRef(ref),
		testobj.ClaimRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeOnDemand),
		testobj.ClaimNode(id, name), testobj.Initialized(time.Now().Add(-time.Hour)))
	claimStatus := nc.Status
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status = claimStatus
	if err := kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond until it holds or a deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Claims of a NodeClass the provider does not launch from belong to another
// controller (Karpenter, during a cut-over): a disruption pass deletes an empty
// claim of its own and leaves an equally empty foreign one alone, in the same
// NodePool, and does not take the disrupted taint off a foreign node either.
func TestForeignClaimsAreLeftAlone(t *testing.T) {
	kube, reader := manager(t)
	ctx := t.Context()
	pool := testobj.NodePool("mixed", testobj.ConsolidationPolicy(v1.ConsolidationPolicyWhenEmptyOrUnderutilized),
		testobj.ConsolidateAfter("0s"), testobj.Budgets("100%"))
	if err := kube.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	node(t, kube, "ours", "mixed", simClass)
	node(t, kube, "theirs", "mixed", foreignClass)
	node(t, kube, "theirs-disrupting", "mixed", foreignClass, v1.DisruptedNoScheduleTaint)
	eventually(t, "the cache holds the claims", func() bool {
		claims := &v1.NodeClaimList{}
		return kube.List(ctx, claims) == nil && len(claims.Items) == 3 && slices.IndexFunc(claims.Items, func(nc v1.NodeClaim) bool {
			return len(nc.Status.Conditions) == 0
		}) < 0
	})

	types := schedtest.SyntheticTypes(4)
	cloud := fake.New(types)
	c := NewController(kube, reader, state.New(kube), cloud,
		func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		record.NewFakeRecorder(100), clock.RealClock{}, Options{ValidationDelay: 0, ReplacementTimeout: time.Minute}, nil)
	cmd, err := c.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if cmd == nil || len(cmd.Candidates) != 1 || cmd.Candidates[0].Claim.Name != "ours" {
		t.Fatalf("want the empty claim of our own deleted, and only it, got %v", cmd)
	}
	if err := reader.Get(ctx, client.ObjectKey{Name: "ours"}, &v1.NodeClaim{}); client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("our empty claim should be gone, got %v", err)
	}
	for _, name := range []string{"theirs", "theirs-disrupting"} {
		nc := &v1.NodeClaim{}
		if err := reader.Get(ctx, client.ObjectKey{Name: name}, nc); err != nil || nc.DeletionTimestamp != nil {
			t.Errorf("foreign claim %s must be left alone: %v, deleting %v", name, err, nc.DeletionTimestamp)
		}
	}
	tainted := func(name string) bool {
		n := &corev1.Node{}
		if err := reader.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(n.Spec.Taints, isDisrupted)
	}
	if tainted("theirs") {
		t.Error("the foreign empty node was tainted")
	}
	// A later pass releases stale taints of our own nodes, never a foreign one's.
	if _, err := c.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if !tainted("theirs-disrupting") {
		t.Error("the foreign node's disrupted taint (its own controller's) was taken off")
	}
}

// A pass writes the Drifted and Consolidatable conditions Karpenter writes on
// NodeClaims, and takes them away when they no longer hold; a claim being
// disrupted gets DisruptionReason.
func TestClaimConditions(t *testing.T) {
	kube, reader := manager(t)
	ctx := t.Context()
	pool := testobj.NodePool("conds", testobj.PoolAnnotations(v1.NodePoolHashAnnotationKey, "h1", v1.NodePoolHashVersionAnnotationKey, "v1"),
		testobj.ConsolidationPolicy(v1.ConsolidationPolicyWhenEmptyOrUnderutilized), testobj.ConsolidateAfter("0s"),
		testobj.Budgets("0")) // decide, but disrupt nothing yet
	if err := kube.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	node(t, kube, "drifted", "conds", simClass)
	annotate := func(hash string) {
		patch := []byte(`{"metadata":{"annotations":{"` + v1.NodePoolHashAnnotationKey + `":"` + hash + `","` + v1.NodePoolHashVersionAnnotationKey + `":"v1"}}}`)
		if err := kube.Patch(ctx, &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "drifted"}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	annotate("h0")
	// A finalizer of the test's keeps the claim readable once it is deleted.
	keep := []byte(`{"metadata":{"finalizers":["test.tailor.sh/keep"]}}`)
	if err := kube.Patch(ctx, &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "drifted"}}, client.RawPatch(types.MergePatchType, keep)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		release := []byte(`{"metadata":{"finalizers":null}}`)
		_ = kube.Patch(context.Background(), &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "drifted"}}, client.RawPatch(types.MergePatchType, release))
	})
	eventually(t, "the cache holds the claim", func() bool {
		got := &v1.NodeClaim{}
		return kube.Get(ctx, client.ObjectKey{Name: "drifted"}, got) == nil && got.Annotations[v1.NodePoolHashAnnotationKey] == "h0" &&
			meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeInitialized)
	})
	catalog := schedtest.SyntheticTypes(4)
	c := NewController(kube, reader, state.New(kube), fake.New(catalog),
		func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return catalog, nil },
		record.NewFakeRecorder(100), clock.RealClock{}, Options{ValidationDelay: 0, ReplacementTimeout: time.Minute}, nil)
	if cmd, err := c.Pass(ctx); err != nil || cmd != nil {
		t.Fatalf("pass: %v, %v; want no command under a budget of 0", cmd, err)
	}
	read := func() *v1.NodeClaim {
		got := &v1.NodeClaim{}
		if err := reader.Get(ctx, client.ObjectKey{Name: "drifted"}, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := read()
	drifted := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionTypeDrifted)
	if drifted == nil || drifted.Status != metav1.ConditionTrue || drifted.Reason != "NodePoolDrifted" {
		t.Errorf("Drifted condition %+v, want True NodePoolDrifted", drifted)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeConsolidatable) {
		t.Errorf("conditions %+v, want Consolidatable True", got.Status.Conditions)
	}
	if !meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeInitialized) {
		t.Error("the lifecycle's conditions were lost")
	}

	// The template changes back: no longer drifted, the condition goes.
	annotate("h1")
	eventually(t, "the cache holds the change", func() bool {
		c := &v1.NodeClaim{}
		return kube.Get(ctx, client.ObjectKey{Name: "drifted"}, c) == nil && c.Annotations[v1.NodePoolHashAnnotationKey] == "h1" &&
			meta.FindStatusCondition(c.Status.Conditions, v1.ConditionTypeDrifted) != nil
	})
	if _, err := c.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(read().Status.Conditions, v1.ConditionTypeDrifted); cond != nil {
		t.Errorf("Drifted %+v is still there", cond)
	}

	// Budgets open: the empty node is disrupted, and says why.
	p := &v1.NodePool{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "conds"}, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "100%"}}
	if err := kube.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cache holds the budget", func() bool {
		np := &v1.NodePool{}
		return kube.Get(ctx, client.ObjectKey{Name: "conds"}, np) == nil && np.Spec.Disruption.Budgets[0].Nodes == "100%"
	})
	cmd, err := c.Pass(ctx)
	if err != nil || cmd == nil {
		t.Fatalf("pass: %v, %v; want the empty node disrupted", cmd, err)
	}
	c.Wait()
	got = read()
	if got.DeletionTimestamp == nil {
		t.Error("the disrupted claim was not deleted")
	}
	if cond := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionTypeDisruptionReason); cond == nil || cond.Reason != string(cmd.Reason) {
		t.Errorf("DisruptionReason %+v, want %s", cond, cmd.Reason)
	}
}

// Commands do not wait for each other: while one waits out its validation delay,
// the next pass decides another within the budget, and a budget the first uses up
// holds the next back; both are carried out.
func TestCommandsInFlightAtOnce(t *testing.T) {
	kube, reader := manager(t)
	ctx := t.Context()
	pool := testobj.NodePool("parallel", testobj.ConsolidationPolicy(v1.ConsolidationPolicyWhenEmptyOrUnderutilized),
		testobj.ConsolidateAfter("0s"), testobj.Budgets("2"))
	if err := kube.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	cached := func(names ...string) {
		eventually(t, fmt.Sprintf("the cache holds %v", names), func() bool {
			for _, name := range names {
				nc := &v1.NodeClaim{}
				if kube.Get(ctx, client.ObjectKey{Name: name}, nc) != nil || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
					return false
				}
			}
			return true
		})
	}
	t.Cleanup(func() {
		for _, name := range []string{"first", "second", "third"} {
			_ = kube.Delete(context.Background(), &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}})
			_ = kube.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	})
	node(t, kube, "first", "parallel", simClass)
	cached("first")
	types := schedtest.SyntheticTypes(4)
	c := NewController(kube, reader, state.New(kube), fake.New(types),
		func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		record.NewFakeRecorder(100), clock.RealClock{}, Options{ValidationDelay: 5 * time.Second, ReplacementTimeout: time.Minute}, nil)
	names := func(cmd *disrupt.Command) []string {
		var out []string
		if cmd != nil {
			for _, cand := range cmd.Candidates {
				out = append(out, cand.Claim.Name)
			}
		}
		return out
	}
	start := time.Now()
	first, err := c.Pass(ctx)
	if err != nil || !slices.Equal(names(first), []string{"first"}) {
		t.Fatalf("first pass: %v, %v; want the empty node first", names(first), err)
	}
	if time.Since(start) > 3*time.Second {
		t.Errorf("the pass waited %s: it must not wait out the validation delay", time.Since(start))
	}
	node(t, kube, "second", "parallel", simClass)
	node(t, kube, "third", "parallel", simClass)
	cached("second", "third")
	second, err := c.Pass(ctx)
	if err != nil || len(names(second)) != 1 || slices.Contains(names(second), "first") {
		t.Fatalf("second pass: %v, %v; want one more empty node (the budget of 2 has one left), not the one in flight", names(second), err)
	}
	if third, err := c.Pass(ctx); err != nil || third != nil {
		t.Fatalf("third pass: %v, %v; want nothing while two commands use up the budget", names(third), err)
	}
	c.Wait()
	for _, name := range append(names(first), names(second)...) {
		nc := &v1.NodeClaim{}
		if err := reader.Get(ctx, client.ObjectKey{Name: name}, nc); client.IgnoreNotFound(err) != nil || (err == nil && nc.DeletionTimestamp == nil) {
			t.Errorf("claim %s was not deleted: %v", name, err)
		}
	}
}

// A busy drifted node of a static NodePool is replaced within the pool: once it is
// tainted the pool's controller launches a node of the template, and the node goes
// only when that one is up.
func TestStaticDriftWaitsForTheRefill(t *testing.T) {
	kube, reader := manager(t)
	ctx := t.Context()
	pool := testobj.NodePool("fixed", testobj.PoolAnnotations(v1.NodePoolHashAnnotationKey, "h1", v1.NodePoolHashVersionAnnotationKey, "v1"),
		testobj.Replicas(1), testobj.Budgets("100%"))
	if err := kube.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	node(t, kube, "fixed-old", "fixed", simClass)
	stale := []byte(`{"metadata":{"annotations":{"` + v1.NodePoolHashAnnotationKey + `":"h0","` + v1.NodePoolHashVersionAnnotationKey + `":"v1"}}}`)
	if err := kube.Patch(ctx, &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "fixed-old"}}, client.RawPatch(types.MergePatchType, stale)); err != nil {
		t.Fatal(err)
	}
	web := testobj.Pod("fixed-web", "", "", testobj.NodeName("fixed-old"))
	if err := kube.Create(ctx, web); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), web, client.GracePeriodSeconds(0)) })
	eventually(t, "the cache holds the drifted claim and its pod", func() bool {
		nc, p := &v1.NodeClaim{}, &corev1.Pod{}
		return kube.Get(ctx, client.ObjectKey{Name: "fixed-old"}, nc) == nil && nc.Annotations[v1.NodePoolHashAnnotationKey] == "h0" &&
			meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) && kube.Get(ctx, client.ObjectKeyFromObject(web), p) == nil
	})
	types := schedtest.SyntheticTypes(4)
	c := NewController(kube, reader, state.New(kube), fake.New(types),
		func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		record.NewFakeRecorder(100), clock.RealClock{}, Options{ReplacementTimeout: time.Minute}, nil)
	cmd, err := c.Pass(ctx)
	if err != nil || cmd == nil || !cmd.Refill || cmd.Candidates[0].Claim.Name != "fixed-old" {
		t.Fatalf("pass: %v, %v; want the busy drifted node replaced within its static pool", cmd, err)
	}
	eventually(t, "the drifted node tainted", func() bool {
		n := &corev1.Node{}
		return reader.Get(ctx, client.ObjectKey{Name: "fixed-old"}, n) == nil && slices.ContainsFunc(n.Spec.Taints, isDisrupted)
	})
	time.Sleep(1500 * time.Millisecond)
	old := &v1.NodeClaim{}
	if err := reader.Get(ctx, client.ObjectKey{Name: "fixed-old"}, old); err != nil || old.DeletionTimestamp != nil {
		t.Fatalf("the drifted node went before the pool's refill was up: %v", err)
	}
	// The pool's controller and the lifecycle would bring this up.
	node(t, kube, "fixed-refill", "fixed", simClass)
	c.Wait()
	if err := reader.Get(ctx, client.ObjectKey{Name: "fixed-old"}, old); client.IgnoreNotFound(err) != nil || (err == nil && old.DeletionTimestamp == nil) {
		t.Errorf("the drifted claim was not deleted once the refill was up: %v", err)
	}
}
