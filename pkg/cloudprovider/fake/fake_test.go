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
