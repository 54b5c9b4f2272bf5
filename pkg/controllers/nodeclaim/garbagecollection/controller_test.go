package garbagecollection

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/cloudprovider/fake"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

var kube client.Client

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kube)) }

// isolate removes the test's claims and Nodes when it ends: a collection reads
// every claim, and fake providers number their instances alike.
func isolate(t *testing.T) {
	t.Cleanup(func() {
		for _, kind := range []client.Object{&v1.NodeClaim{}, &corev1.Node{}} {
			if err := kube.DeleteAllOf(context.Background(), kind); err != nil {
				t.Error(err)
			}
		}
	})
}

var (
	simClass = testobj.SimClass("default")
	ec2Class = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
)

// newClaim builds a claim of the NodeClass ref; names are prefixed by the test's, as
// the tests share one API server.
func newClaim(t *testing.T, name string, ref *v1.NodeClassReference) *v1.NodeClaim {
	return testobj.NodeClaim(strings.ToLower(t.Name())+"-"+name, testobj.ClaimNodeClassRef(ref),
		testobj.ClaimRequirement(v1.LabelInstanceType, v1.NodeSelectorOpIn, "fake-it-0"))
}

// launchedClaim creates the claim, launches its instance and records it, launched at
// the clock's now.
func launchedClaim(t *testing.T, cloud *fake.CloudProvider, clk *clocktesting.FakeClock, name string, ref *v1.NodeClassReference) *v1.NodeClaim {
	t.Helper()
	ctx := t.Context()
	nc := newClaim(t, name, ref)
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	inst, err := cloud.Create(ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID = inst.Status.ProviderID
	testobj.ClaimCondition(v1.ConditionTypeLaunched, metav1.ConditionTrue, clk.Now())(nc)
	if err := kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	return nc
}

// node creates the Node of a claim, Ready or not.
func node(t *testing.T, nc *v1.NodeClaim, ready corev1.ConditionStatus) *corev1.Node {
	t.Helper()
	n := testobj.Node(nc.Name, "", "", testobj.ProviderID(nc.Status.ProviderID))
	if err := kube.Create(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	setReady(t, n, ready)
	return n
}

func setReady(t *testing.T, n *corev1.Node, ready corev1.ConditionStatus) {
	t.Helper()
	testobj.NodeReady(ready, time.Now())(n)
	if err := kube.Status().Update(t.Context(), n); err != nil {
		t.Fatal(err)
	}
}

func gone(t *testing.T, nc *v1.NodeClaim) bool {
	t.Helper()
	got := &v1.NodeClaim{}
	err := kube.Get(t.Context(), client.ObjectKeyFromObject(nc), got)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err != nil || got.DeletionTimestamp != nil
}

func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestLeaksAndVanishedInstances(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := fake.New(schedtest.SyntheticTypes(2))
	gc := NewController(kube, cloud, record.NewFakeRecorder(100), clk, time.Minute)

	// An instance whose claim recorded it, a second launch for the same claim that
	// the claim does not record (a retry that did not see the first), one whose
	// claim is still launching, and one nobody owns.
	owned := launchedClaim(t, cloud, clk, "owned", simClass)
	retry := owned.DeepCopy()
	retry.UID = "a-retry-with-another-token"
	duplicate, err := cloud.Create(ctx, retry)
	if err != nil {
		t.Fatal(err)
	}
	launching := newClaim(t, "launching", simClass)
	if err := kube.Create(ctx, launching); err != nil {
		t.Fatal(err)
	}
	if _, err := cloud.Create(ctx, launching); err != nil {
		t.Fatal(err)
	}
	if _, err := cloud.Create(ctx, newClaim(t, "leaked", simClass)); err != nil {
		t.Fatal(err)
	}

	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if cloud.Instances() != 4 {
		t.Fatalf("%d instances after the first pass; a leak is only terminated after the grace period", cloud.Instances())
	}
	clk.Step(Grace + time.Second)
	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if cloud.Instances() != 2 {
		t.Errorf("%d instances, want the leaked one and the duplicate terminated and the two owned kept", cloud.Instances())
	}
	if _, err := cloud.Get(ctx, duplicate.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("the duplicate launch %s is still there: %v", duplicate.Status.ProviderID, err)
	}
	if _, err := cloud.Get(ctx, owned.Status.ProviderID); err != nil {
		t.Errorf("the claim's own instance was terminated: %v", err)
	}
	// The owned claim's instance vanishes (it has no Node): the claim goes.
	if err := cloud.Delete(ctx, owned); err != nil {
		t.Fatal(err)
	}
	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if !gone(t, owned) {
		t.Error("the claim of a vanished instance was not deleted")
	}
}

// A failure to terminate one leak neither stops the other leaks nor the claims'
// collection; the pass returns the failure, naming the instance.
func TestCollectCarriesOnPastAFailure(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := fake.New(schedtest.SyntheticTypes(2))
	gc := NewController(kube, cloud, record.NewFakeRecorder(100), clk, time.Minute)
	vanished := launchedClaim(t, cloud, clk, "vanished", simClass)
	if err := cloud.Delete(ctx, vanished); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"leak-a", "leak-b"} {
		if _, err := cloud.Create(ctx, newClaim(t, name, simClass)); err != nil {
			t.Fatal(err)
		}
	}
	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(Grace + time.Second)
	boom := errors.New("throttled")
	cloud.NextErrors["Delete"] = []error{boom}
	err := gc.Collect(ctx)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "fake:///") {
		t.Errorf("Collect: %v, want the failure naming the instance", err)
	}
	if cloud.Instances() != 1 {
		t.Errorf("%d instances, want the leak whose termination failed left and the other terminated", cloud.Instances())
	}
	if !gone(t, vanished) {
		t.Error("the claim of a vanished instance was not deleted after a leak failed to terminate")
	}
	if err := gc.Collect(ctx); err != nil || cloud.Instances() != 0 {
		t.Errorf("the next pass: %v, %d instances; want the failed leak terminated", err, cloud.Instances())
	}
}

// A failure to delete one vanished claim does not stop the next; each failure gets
// an event on its claim.
func TestClaimFailuresAreReportedPerClaim(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := fake.New(schedtest.SyntheticTypes(2))
	rec := record.NewFakeRecorder(100)
	gc := NewController(kube, cloud, rec, clk, time.Minute)
	first := launchedClaim(t, cloud, clk, "a", simClass)
	second := launchedClaim(t, cloud, clk, "b", simClass)
	for _, nc := range []*v1.NodeClaim{first, second} {
		if err := cloud.Delete(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	clk.Step(Grace + time.Second)
	boom := errors.New("cloud unreachable")
	cloud.NextErrors["Get"] = []error{boom}
	err := gc.Collect(ctx)
	if !errors.Is(err, boom) {
		t.Errorf("Collect: %v, want the lookup failure", err)
	}
	if gone(t, first) == gone(t, second) {
		t.Errorf("deleted: %v and %v; want the claim whose lookup failed kept and the other deleted", gone(t, first), gone(t, second))
	}
	var failed int
	for _, e := range events(rec) {
		if strings.Contains(e, "GarbageCollectionFailed") {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("%d GarbageCollectionFailed events, want 1", failed)
	}
}

// A claim whose Node is Ready keeps its claim however long the cloud's list misses
// the instance; once the Node is no longer Ready and the cloud confirms the
// instance is gone, the claim goes.
func TestReadyNodeKeepsItsClaim(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := fake.New(schedtest.SyntheticTypes(2))
	gc := NewController(kube, cloud, record.NewFakeRecorder(100), clk, time.Minute)
	nc := launchedClaim(t, cloud, clk, "ready", simClass)
	n := node(t, nc, corev1.ConditionTrue)
	if err := cloud.Delete(ctx, nc); err != nil {
		t.Fatal(err)
	}
	clk.Step(Grace + time.Second)
	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if gone(t, nc) {
		t.Fatal("the claim of a Ready Node was deleted")
	}
	setReady(t, n, corev1.ConditionUnknown)
	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if !gone(t, nc) {
		t.Error("the claim of a vanished instance whose Node stopped reporting was not deleted")
	}
}

// hidingList is a cloud whose list misses some instances, as an eventually
// consistent API does; Get still finds them.
type hidingList struct {
	*fake.CloudProvider
	hidden map[string]bool
}

func (h *hidingList) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	all, err := h.CloudProvider.List(ctx)
	var out []*v1.NodeClaim
	for _, inst := range all {
		if !h.hidden[inst.Status.ProviderID] {
			out = append(out, inst)
		}
	}
	return out, err
}

// An instance missing from the list but found by Get keeps its claim.
func TestListMissIsConfirmedWithGet(t *testing.T) {
	isolate(t)
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := &hidingList{CloudProvider: fake.New(schedtest.SyntheticTypes(2)), hidden: map[string]bool{}}
	rec := record.NewFakeRecorder(100)
	gc := NewController(kube, cloud, rec, clk, time.Minute)
	nc := launchedClaim(t, cloud.CloudProvider, clk, "listed-late", simClass)
	cloud.hidden[nc.Status.ProviderID] = true
	clk.Step(Grace + time.Second)
	if err := gc.Collect(t.Context()); err != nil {
		t.Fatal(err)
	}
	if gone(t, nc) {
		t.Error("a claim was deleted while its instance exists (the list only missed it)")
	}
	if got := events(rec); len(got) != 0 {
		t.Errorf("events %v, want none", got)
	}
}

// Claims and instances of a NodeClass the provider does not launch from belong to
// another controller (Karpenter, during a cut-over): never collected.
func TestForeignClaimsAndInstancesAreLeftAlone(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := fake.New(schedtest.SyntheticTypes(2))
	rec := record.NewFakeRecorder(100)
	gc := NewController(kube, cloud, rec, clk, time.Minute)
	theirs := launchedClaim(t, cloud, clk, "karpenters", ec2Class)
	if err := cloud.Delete(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	if _, err := cloud.Create(ctx, newClaim(t, "karpenters-unclaimed", ec2Class)); err != nil {
		t.Fatal(err)
	}
	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Step(Grace + time.Second)
	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if gone(t, theirs) {
		t.Error("the claim of an EC2NodeClass was deleted by the sim provider's collection")
	}
	if cloud.Instances() != 1 {
		t.Errorf("%d instances, want the EC2NodeClass instance left running", cloud.Instances())
	}
	if got := events(rec); len(got) != 0 {
		t.Errorf("events %v, want none", got)
	}
}

// An unowned instance that disappears by other means is forgotten.
func TestFirstSeenForgetsInstancesNoLongerListed(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := fake.New(schedtest.SyntheticTypes(2))
	gc := NewController(kube, cloud, record.NewFakeRecorder(100), clk, time.Minute)
	inst, err := cloud.Create(ctx, newClaim(t, "short-lived", simClass))
	if err != nil {
		t.Fatal(err)
	}
	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := gc.firstSeen[inst.Status.ProviderID]; !ok {
		t.Fatal("an unowned instance was not recorded")
	}
	if err := cloud.Delete(ctx, inst); err != nil {
		t.Fatal(err)
	}
	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if len(gc.firstSeen) != 0 {
		t.Errorf("firstSeen %v, want the vanished instance forgotten", gc.firstSeen)
	}
}
