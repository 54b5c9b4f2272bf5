package fake

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

func claim(reqs ...v1.NodeSelectorRequirementWithMinValues) *v1.NodeClaim {
	return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: v1.NodeClaimSpec{Requirements: reqs,
		NodeClassRef: &v1.NodeClassReference{Group: "tailor.sh", Kind: "SimNodeClass", Name: "default"}}}
}

func TestLifecycleAndInjectedFailures(t *testing.T) {
	cp := New(schedtest.SyntheticTypes(3))
	ctx := t.Context()
	nc, err := cp.Create(ctx, claim(v1.NodeSelectorRequirementWithMinValues{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"fake-it-1", "fake-it-2"}}))
	if err != nil {
		t.Fatal(err)
	}
	if nc.Labels[v1.LabelInstanceType] != "fake-it-1" || nc.Labels[v1.CapacityTypeLabelKey] != v1.CapacityTypeSpot {
		t.Errorf("launched %v, want the cheapest allowed offering (fake-it-1, spot)", nc.Labels)
	}
	if got, err := cp.Get(ctx, nc.Status.ProviderID); err != nil || got.Status.ProviderID != nc.Status.ProviderID {
		t.Errorf("Get: %v, %v", got, err)
	}
	if err := cp.Delete(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if err := cp.Delete(ctx, nc); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("second Delete: %v, want NodeClaimNotFound", err)
	}
	boom := errors.New("throttled")
	cp.NextErrors["Create"] = []error{boom}
	if _, err := cp.Create(ctx, claim()); !errors.Is(err, boom) {
		t.Errorf("Create with an injected error: %v", err)
	}
	for _, z := range schedtest.Zones {
		for _, ct := range []string{v1.CapacityTypeSpot, v1.CapacityTypeOnDemand} {
			cp.Unavailable[cloudprovider.UnavailableOffering{InstanceType: "fake-it-0", Zone: z, CapacityType: ct}] = true
		}
	}
	_, err = cp.Create(ctx, claim(v1.NodeSelectorRequirementWithMinValues{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"fake-it-0"}}))
	if !cloudprovider.IsInsufficientCapacity(err) {
		t.Errorf("Create with every offering unavailable: %v, want InsufficientCapacity", err)
	}
	if want := []string{"Create", "Get", "Delete", "Delete", "Create", "Create"}; len(cp.Calls) != len(want) {
		t.Errorf("calls %v, want %v", cp.Calls, want)
	}
}

// Launching again for a claim whose instance runs returns that instance, as a real
// cloud's client token does; another claim, or the same one after its instance
// is gone, gets a new one.
func TestCreateIsIdempotentPerClaim(t *testing.T) {
	cp := New(schedtest.SyntheticTypes(2))
	ctx := t.Context()
	a := claim()
	a.UID = "uid-a"
	first, err := cp.Create(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	again, err := cp.Create(ctx, a)
	if err != nil || again.Status.ProviderID != first.Status.ProviderID || again.Labels[v1.LabelInstanceType] != first.Labels[v1.LabelInstanceType] {
		t.Errorf("second launch for the claim: %v (%v), %v; want %s again", again.Status.ProviderID, again.Labels, err, first.Status.ProviderID)
	}
	b := claim()
	b.UID = "uid-b" // same name, another claim
	other, err := cp.Create(ctx, b)
	if err != nil || other.Status.ProviderID == first.Status.ProviderID {
		t.Errorf("another claim of the same name got %v, %v; want its own instance", other.Status.ProviderID, err)
	}
	if n := cp.Instances(); n != 2 {
		t.Errorf("%d instances, want 2", n)
	}
	if err := cp.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	relaunched, err := cp.Create(ctx, a)
	if err != nil || relaunched.Status.ProviderID == first.Status.ProviderID {
		t.Errorf("launch after the instance was terminated: %v, %v; want a new instance", relaunched.Status.ProviderID, err)
	}
}
