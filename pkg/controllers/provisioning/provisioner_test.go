package provisioning

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
