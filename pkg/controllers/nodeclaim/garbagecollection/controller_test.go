package garbagecollection

import (
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/localcluster"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/cloudprovider/fake"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

var kube client.Client

func TestMain(m *testing.M) {
	_, k, stop, err := testenv.Start(localcluster.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kube = k
	code := m.Run()
	stop()
	os.Exit(code)
}

func TestLeaksAndVanishedInstances(t *testing.T) {
	ctx := t.Context()
	clk := clocktesting.NewFakeClock(time.Now())
	cloud := fake.New(schedtest.SyntheticTypes(2))
	gc := NewController(kube, cloud, record.NewFakeRecorder(10), clk, time.Minute)

	ref := &v1.NodeClassReference{Group: "tailor.sh", Kind: "SimNodeClass", Name: "default"}
	newClaim := func(name string) *v1.NodeClaim {
		return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeClaimSpec{NodeClassRef: ref,
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"fake-it-0"}}}}}
	}
	// An instance whose claim recorded it, a second launch for the same claim that
	// the claim does not record (a retry that did not see the first), one whose
	// claim is still launching, and one nobody owns.
	owned := newClaim("owned")
	if err := kube.Create(ctx, owned); err != nil {
		t.Fatal(err)
	}
	launchedOwned, _ := cloud.Create(ctx, owned)
	duplicate, _ := cloud.Create(ctx, owned)
	owned.Status.ProviderID = launchedOwned.Status.ProviderID
	meta.SetStatusCondition(&owned.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(clk.Now())})
	if err := kube.Status().Update(ctx, owned); err != nil {
		t.Fatal(err)
	}
	launching := newClaim("launching")
	if err := kube.Create(ctx, launching); err != nil {
		t.Fatal(err)
	}
	_, _ = cloud.Create(ctx, launching)
	_, _ = cloud.Create(ctx, newClaim("leaked"))

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
	if _, err := cloud.Get(ctx, launchedOwned.Status.ProviderID); err != nil {
		t.Errorf("the claim's own instance was terminated: %v", err)
	}
	// The owned claim's instance vanishes: the claim goes.
	if err := cloud.Delete(ctx, launchedOwned); err != nil {
		t.Fatal(err)
	}
	if err := gc.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(owned), owned); err == nil && owned.DeletionTimestamp == nil {
		t.Error("the claim of a vanished instance was not deleted")
	}
}
