package aws

import (
	"strings"
	"testing"

	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/cloudprovider"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// An account at its quota of fleet requests (MaxFleetCountExceeded) fails the
// launch as insufficient capacity, as Karpenter reads it: the offerings tried are
// avoided for a while and the claim's pods planned again.
func TestMaxFleetCountExceeded(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	e.fake.SetFleetQuotaExceeded(true)
	_, err := e.cloud.Create(t.Context(), e.claim(nc, "quota", req(v1.LabelInstanceType, "m5.large"), req(v1.CapacityTypeLabelKey, "on-demand")))
	if !cloudprovider.IsInsufficientCapacity(err) || !strings.Contains(err.Error(), "MaxFleetCountExceeded") {
		t.Fatalf("got %v, want insufficient capacity naming MaxFleetCountExceeded", err)
	}
	types, err := e.cloud.InstanceTypes(t.Context(), e.pool(nc))
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := offering(t, types, "m5.large", "us-east-1a", "on-demand"); !ok || o.Available {
		t.Errorf("m5.large on-demand in us-east-1a after the quota error: %+v, want unavailable", o)
	}
	if o, _ := offering(t, types, "m5.xlarge", "us-east-1a", "on-demand"); !o.Available {
		t.Error("an offering not tried was switched off")
	}
}

// An account without the EC2 Spot service-linked role, whose controller may not
// create it (AuthFailure.ServiceLinkedRoleCreationNotPermitted), gets no spot
// capacity at all for a while, as Karpenter: the launch fails as insufficient
// capacity naming the code, every spot offering is switched off, and the next
// launch of a claim that allows on-demand gets on-demand.
func TestSpotServiceLinkedRoleMissing(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	e.fake.SetSpotServiceLinkedRole(false)
	either := req(v1.CapacityTypeLabelKey, "spot", "on-demand")
	_, err := e.cloud.Create(t.Context(), e.claim(nc, "no-role", req(v1.LabelInstanceType, "m5.large"), either))
	if !cloudprovider.IsInsufficientCapacity(err) || !strings.Contains(err.Error(), "AuthFailure.ServiceLinkedRoleCreationNotPermitted") {
		t.Fatalf("got %v, want insufficient capacity naming the service-linked role", err)
	}
	types, err := e.cloud.InstanceTypes(t.Context(), e.pool(nc))
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		for _, o := range it.Offerings {
			if o.CapacityType == "spot" && o.Available {
				t.Fatalf("%s spot in %s still offered", it.Name, o.Zone)
			}
		}
	}
	got, err := e.cloud.Create(t.Context(), e.claim(nc, "no-role-2", req(v1.LabelInstanceType, "m5.large"), either))
	if err != nil {
		t.Fatal(err)
	}
	if ct := got.Labels[v1.CapacityTypeLabelKey]; ct != "on-demand" {
		t.Errorf("second launch is %s, want on-demand", ct)
	}
}
