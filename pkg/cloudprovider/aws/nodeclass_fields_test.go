package aws

import (
	"github.com/aws/aws-sdk-go-v2/aws"

	"testing"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
)

// These tests check that each EC2NodeClass field reaches EC2 as its
// documentation says, through the SDK, against the fake's checks.

// launchOne launches one on-demand m5.large (or the given types) for nc and
// returns the fake's instance.
func (e *testEnv) launchOne(t *testing.T, nc *awsv1.EC2NodeClass, name string, types ...string) (*v1.NodeClaim, fakeaws.Instance) {
	t.Helper()
	if len(types) == 0 {
		types = []string{"m5.large"}
	}
	got, err := e.cloud.Create(t.Context(), e.claim(nc, name, req(v1.LabelInstanceType, types...), req(v1.CapacityTypeLabelKey, "on-demand")))
	if err != nil {
		t.Fatal(err)
	}
	id, err := ParseProviderID(got.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	inst, ok := e.fake.Instance(id)
	if !ok {
		t.Fatalf("no instance %s", id)
	}
	return got, inst
}

func TestContextReachesCreateFleet(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) { nc.Spec.Context = aws.String("ctx-0123") })
	_, inst := e.launchOne(t, nc, "with-context")
	if inst.FleetContext != "ctx-0123" {
		t.Errorf("CreateFleet Context = %q, want ctx-0123", inst.FleetContext)
	}
	plain := e.nodeClass(t, nil)
	if _, inst := e.launchOne(t, plain, "without-context"); inst.FleetContext != "" {
		t.Errorf("a NodeClass without context sent Context %q", inst.FleetContext)
	}
}
