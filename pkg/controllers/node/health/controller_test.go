package health

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/cloudprovider/fake"
	"github.com/nodetailor/tailor/pkg/disruption"
	"github.com/nodetailor/tailor/pkg/metrics"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

var kube client.Client

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kube)) }

// hold keeps a deleted claim around, as termination's finalizer would, so the test
// can read what repair wrote on it.
const hold = "test.tailor.sh/hold"

// node creates a node of pool whose Ready condition has had status since since, and
// its claim of the NodeClass kind.
func node(t *testing.T, name, pool, kind string, ready corev1.ConditionStatus, since time.Time) {
	t.Helper()
	ctx := t.Context()
	id := "fake:///" + name
	n := testobj.Node(name, "", "", testobj.ProviderID(id), testobj.NodeLabels(v1.NodePoolLabelKey, pool), testobj.NodeReady(ready, since))
	status := n.Status
	if err := kube.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	n.Status = status
	if err := kube.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	ref := testobj.SimClass("default")
	if kind != "SimNodeClass" {
		ref = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: kind, Name: "default"}
	}
	nc := testobj.NodeClaim(name, testobj.ClaimNodeClassRef(ref),
		testobj.ClaimLabels(v1.NodePoolLabelKey, pool, v1.CapacityTypeLabelKey, v1.CapacityTypeSpot),
		testobj.ClaimRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeSpot), testobj.ClaimNode(id, name))
	nc.Finalizers = []string{hold}
	claimStatus := nc.Status
	if err := kube.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status = claimStatus
	if err := kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		got := &v1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, got); err == nil {
			got.Finalizers = nil
			_ = kube.Update(ctx, got)
		}
	})
}

func claim(t *testing.T, name string) *v1.NodeClaim {
	t.Helper()
	nc := &v1.NodeClaim{}
	if err := kube.Get(t.Context(), client.ObjectKey{Name: name}, nc); err != nil {
		t.Fatal(err)
	}
	return nc
}

func events(recorder *record.FakeRecorder) string {
	var out []string
	for {
		select {
		case e := <-recorder.Events:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// A node NotReady past its toleration has its claim deleted with its termination
// timestamp set to now (no drain wait), an event and the metrics; a node within its
// toleration is repaired once it runs out; another provider's claim and the nodes
// of a NodePool mostly down are left alone, the latter with an event.
func TestRepair(t *testing.T) {
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	tol := disruption.KubeletRepairPolicies[0].Toleration
	node(t, "broken", "fleet", "SimNodeClass", corev1.ConditionFalse, clk.Now().Add(-tol-time.Minute))
	node(t, "silent", "fleet", "SimNodeClass", corev1.ConditionUnknown, clk.Now().Add(-tol+time.Minute))
	for i := range 4 {
		node(t, fmt.Sprintf("fine-%d", i), "fleet", "SimNodeClass", corev1.ConditionTrue, clk.Now().Add(-time.Hour))
	}
	node(t, "karpenters", "theirs", "EC2NodeClass", corev1.ConditionFalse, clk.Now().Add(-time.Hour))
	node(t, "down-0", "outage", "SimNodeClass", corev1.ConditionUnknown, clk.Now().Add(-time.Hour))
	node(t, "down-1", "outage", "SimNodeClass", corev1.ConditionUnknown, clk.Now().Add(-time.Hour))

	recorder := record.NewFakeRecorder(100)
	woken := 0
	c := NewController(kube, fake.New(schedtest.SyntheticTypes(1)), recorder, clk, disruption.KubeletRepairPolicies, func() { woken++ })
	disrupted := func() float64 {
		return testutil.ToFloat64(metrics.NodeClaimsDisrupted.WithLabelValues(metrics.ReasonUnhealthy, "fleet", v1.CapacityTypeSpot))
	}
	before := disrupted()
	if _, err := c.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	nc := claim(t, "broken")
	if nc.DeletionTimestamp == nil {
		t.Fatal("the claim of a node NotReady past its toleration was not deleted")
	}
	if got, want := nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey], clk.Now().UTC().Format(time.RFC3339); got != want {
		t.Errorf("termination timestamp %q, want %q (now: the drain is not waited for)", got, want)
	}
	if got := disrupted() - before; got != 1 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{reason=unhealthy} rose by %v, want 1", got)
	}
	if got := testutil.ToFloat64(UnhealthyDisrupted.WithLabelValues("ready", "fleet", v1.CapacityTypeSpot, "")); got != 1 {
		t.Errorf("karpenter_nodeclaims_unhealthy_disrupted_total{condition=ready} = %v, want 1", got)
	}
	if woken != 1 {
		t.Errorf("the provisioner was woken %d times, want 1", woken)
	}
	for _, name := range []string{"silent", "karpenters", "down-0", "down-1"} {
		if claim(t, name).DeletionTimestamp != nil {
			t.Errorf("%s was repaired", name)
		}
	}
	got := events(recorder)
	if !strings.Contains(got, "NodeRepair Node Ready has been False") || !strings.Contains(got, "NodeRepairBlocked Cannot repair Node: 2 of the 2 nodes of NodePool outage") {
		t.Errorf("events:\n%s", got)
	}

	clk.Step(2 * time.Minute)
	if _, err := c.Pass(ctx); err != nil {
		t.Fatal(err)
	}
	if claim(t, "silent").DeletionTimestamp == nil {
		t.Error("the node silent past its toleration was not repaired")
	}
	if claim(t, "karpenters").DeletionTimestamp != nil || claim(t, "down-0").DeletionTimestamp != nil {
		t.Error("a foreign claim, or a node of a NodePool mostly down, was repaired")
	}
	if got := events(recorder); strings.Contains(got, "NodeRepairBlocked") {
		t.Errorf("a blocked node was reported again for the same reason:\n%s", got)
	}
}

// providerHealth is a provider's view of its instances' health, by provider ID.
type providerHealth map[string][]corev1.NodeCondition

func (p providerHealth) NodeConditions(context.Context) (map[string][]corev1.NodeCondition, error) {
	return p, nil
}

// The provider's own health conditions (EC2's status checks, say) count as the
// node's, against the provider's policies: a Ready node whose instance the
// provider reports impaired past the toleration is repaired.
func TestProviderHealthFeedsRepair(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now().Truncate(time.Second))
	for i := range 5 {
		node(t, fmt.Sprintf("host-%d", i), "hosts", "SimNodeClass", corev1.ConditionTrue, clk.Now().Add(-time.Hour))
	}
	policies := append(slices.Clone(disruption.KubeletRepairPolicies),
		disruption.RepairPolicy{ConditionType: "HostOK", ConditionStatus: corev1.ConditionFalse, Toleration: 2 * time.Minute})
	impaired := providerHealth{"fake:///host-0": {{Type: "HostOK", Status: corev1.ConditionFalse,
		LastTransitionTime: metav1.NewTime(clk.Now().Add(-3 * time.Minute))}}}
	recorder := record.NewFakeRecorder(100)
	c := NewController(kube, fake.New(schedtest.SyntheticTypes(1)), recorder, clk, policies, nil).WithNodeHealth(impaired)
	dec, err := c.Pass(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(dec.Repairs) != 1 || dec.Repairs[0].Claim.Name != "host-0" || dec.Repairs[0].Condition.Type != "HostOK" {
		t.Fatalf("repairs %+v, want host-0's for HostOK", dec.Repairs)
	}
	if claim(t, "host-0").DeletionTimestamp == nil {
		t.Error("the impaired host's claim was not deleted")
	}
	if claim(t, "host-1").DeletionTimestamp != nil {
		t.Error("a healthy host was repaired")
	}
}
