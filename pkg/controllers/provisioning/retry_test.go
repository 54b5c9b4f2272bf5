package provisioning

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
	"github.com/nodetailor/tailor/pkg/state"
)

// A NodePool whose instance types cannot be read yet (its NodeClass not resolved
// in this process's cache) leaves its pods pending with nothing watched bound to
// change: the provisioner looks again by itself, backing off, and provisions once
// the types can be read. Without the look, the pod waited for another trigger that
// never came (an operator test on the fake AWS, under load).
func TestLooksAgainWhenInstanceTypesFail(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	readyNodePool(t, "unresolved", nil)
	pendingPod(t, "web", "1", "unresolved")
	types := schedtest.SyntheticTypes(20)
	resolved := false
	p := NewProvisioner(kube, state.New(kube), func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) {
		if !resolved {
			return nil, &cloudprovider.NodeClassNotReadyError{Kind: "EC2NodeClass", Name: "unresolved", Reason: "not resolved yet"}
		}
		return types, nil
	}, record.NewFakeRecorder(100), clocktesting.NewFakeClock(time.Now()), Options{})

	var waits []time.Duration
	for range 7 {
		if err := p.Provision(ctx); err != nil {
			t.Fatal(err)
		}
		after, ok := p.recheckAfter()
		if !ok {
			t.Fatalf("no look again planned with the pod unschedulable and the types unreadable")
		}
		waits = append(waits, after)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, maxTypesBackoff, maxTypesBackoff}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("looks again after %v, want %v", waits, want)
		}
	}
	resolved = true
	if err := p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	claims := poolClaims(t, "unresolved")
	if len(claims) != 1 {
		t.Fatalf("%d claims once the types can be read, want one", len(claims))
	}
	// Waiting for its claim now, the pod is looked at on the nominations' pace.
	if after, ok := p.recheckAfter(); !ok || after != NominationGrace/3 || p.typesBackoff != 0 {
		t.Errorf("looks again after %v (%v), backoff %v; want the nominations' pace and the backoff reset", after, ok, p.typesBackoff)
	}
}

// The provisioner says, as the claims are made, which pods wait for each claim's
// node: registration names the node to them (see nodeclaim.ReleaseOrder.Plan).
func TestProvisionerTellsThePlannedPods(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	readyNodePool(t, "planned", nil)
	web := pendingPod(t, "web", "1", "planned")
	types := schedtest.SyntheticTypes(20)
	p := NewProvisioner(kube, state.New(kube), func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) {
		return types, nil
	}, record.NewFakeRecorder(100), clocktesting.NewFakeClock(time.Now()), Options{})
	if err := p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	claims := poolClaims(t, "planned")
	if len(claims) != 1 {
		t.Fatalf("%d claims, want one", len(claims))
	}
	got := p.podsByClaim()[claims[0].Name]
	if len(got) != 1 || got[0] != client.ObjectKeyFromObject(web) {
		t.Errorf("%v waiting for %s, want %s", got, claims[0].Name, client.ObjectKeyFromObject(web))
	}
}
