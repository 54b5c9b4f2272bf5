package expiration

import (
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/pkg/cloudprovider/fake"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

var kube client.Client

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kube)) }

// An expired claim is deleted; an expired claim of a NodeClass the provider does not
// launch from (Karpenter's, during a cut-over) is its own controller's to expire.
func TestOnlyOwnClaimsExpire(t *testing.T) {
	ctx := t.Context()
	refs := map[string]*v1.NodeClassReference{
		"ours":   {Group: "tailor.sh", Kind: "SimNodeClass", Name: "default"},
		"theirs": {Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
	}
	for name, ref := range refs {
		nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeClaimSpec{NodeClassRef: ref,
			ExpireAfter: v1.MustParseNillableDuration("1h"), Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.CapacityTypeLabelKey, Operator: v1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeSpot}}}}}
		if err := kube.Create(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	c := NewController(kube, fake.New(schedtest.SyntheticTypes(1)), record.NewFakeRecorder(10), clocktesting.NewFakeClock(time.Now().Add(2*time.Hour)), nil)
	for name := range refs {
		if _, err := c.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := kube.Get(ctx, client.ObjectKey{Name: "ours"}, &v1.NodeClaim{}); client.IgnoreNotFound(err) != nil || err == nil {
		t.Errorf("our expired claim should be gone, got %v", err)
	}
	theirs := &v1.NodeClaim{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "theirs"}, theirs); err != nil || theirs.DeletionTimestamp != nil {
		t.Errorf("the foreign claim must not be expired by Tailor: %v, deleting %v", err, theirs.DeletionTimestamp)
	}
}
