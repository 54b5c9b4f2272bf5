package provisioning

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// A claim carries the termination finalizer from its creation.
func TestNodeClaimHasTheFinalizer(t *testing.T) {
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	nc := NodeClaim(pool, &scheduling.NewNode{NodePool: "default"})
	if len(nc.Finalizers) != 1 || nc.Finalizers[0] != v1.TerminationFinalizer {
		t.Errorf("finalizers %v, want [%s]", nc.Finalizers, v1.TerminationFinalizer)
	}
}

// A pod the open batch already has does not signal again (and so does not hold the
// window open); a new pod does, and so does any pod once the batch closed.
func TestTriggerForSignalsNewPodsOnly(t *testing.T) {
	p := NewProvisioner(nil, nil, nil, nil, clocktesting.NewFakeClock(time.Now()), Options{})
	signalled := func() bool {
		select {
		case <-p.trigger:
			return true
		default:
			return false
		}
	}
	p.TriggerFor("a")
	if !signalled() {
		t.Fatal("the first pod did not open a batch")
	}
	p.TriggerFor("a")
	if signalled() {
		t.Error("a pod the batch has signalled again")
	}
	p.TriggerFor("b")
	if !signalled() {
		t.Error("a new pod did not signal")
	}
	p.Trigger()
	p.Trigger()
	if !signalled() {
		t.Error("a trigger without a pod did not signal")
	}
	p.closeBatch()
	p.TriggerFor("a")
	if !signalled() {
		t.Error("a pod did not signal in the next batch")
	}
}
