package termination

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// A deleting Node with the termination finalizer and no NodeClaim is left to its
// own controller when its provider ID is another cloud's (aws:/// while this
// provider's are fake:///), whatever its NodePool label says, or when its NodePool
// launches from another provider's NodeClass: not tainted, its pods not evicted,
// its finalizer kept. The provider would call another cloud's instance not found,
// and that must not read as "gone".
func TestOtherCloudsNodeWithoutClaimIsLeftAlone(t *testing.T) {
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "ec2-pool"}}
	pool.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	if err := direct.Create(t.Context(), pool); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { release(pool) })
	for _, tc := range []struct{ name, providerID, pool string }{
		{"aws-no-pool", "aws:///us-east-1a/i-0aaa", ""},
		{"aws-pool-gone", "aws:///us-east-1a/i-0bbb", "deleted-pool"},
		// The provider's own scheme, but a pool of another's NodeClass.
		{"ec2-pool", "fake:///us-east-1a/i-0ccc", pool.Name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, cloud)
			node := e.node(tc.name, tc.providerID, true)
			if tc.pool != "" {
				base := node.DeepCopy()
				node.Labels = map[string]string{v1.NodePoolLabelKey: tc.pool}
				if err := direct.Patch(t.Context(), node, client.MergeFrom(base)); err != nil {
					t.Fatal(err)
				}
			}
			web := e.pod(tc.name+"-web", node.Name)
			e.eventually("the cache shows the pod", func(ctx context.Context) bool {
				return cached.Get(ctx, client.ObjectKeyFromObject(web), &corev1.Pod{}) == nil &&
					cached.Get(ctx, client.ObjectKeyFromObject(pool), &v1.NodePool{}) == nil
			})
			e.deleteObj(node)
			e.eventually("the cache shows the node deleting", func(ctx context.Context) bool {
				n := &corev1.Node{}
				return cached.Get(ctx, client.ObjectKeyFromObject(node), n) == nil && n.DeletionTimestamp != nil &&
					n.Labels[v1.NodePoolLabelKey] == tc.pool
			})
			e.passes(5, e.c.ReconcileNode, node.Name)
			got := e.fresh(node).(*corev1.Node)
			if !controllerutil.ContainsFinalizer(got, v1.TerminationFinalizer) || slices.ContainsFunc(got.Spec.Taints, isDisruptedTaint) {
				t.Errorf("another controller's node was touched: finalizers %v, taints %v", got.Finalizers, got.Spec.Taints)
			}
			if p := e.fresh(web); p.GetDeletionTimestamp() != nil {
				t.Error("a pod of another controller's node was evicted")
			}
		})
	}
}
