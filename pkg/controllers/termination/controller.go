// Package termination takes nodes down cleanly. Deleting a NodeClaim, or its Node,
// taints the node karpenter.sh/disrupted:NoSchedule, evicts its pods through the
// Eviction API (PodDisruptionBudgets decide; pods annotated karpenter.sh/do-not-disrupt
// wait; DaemonSet and system-critical pods go last; mirror pods stay), caps the wait
// at the claim's terminationGracePeriod, terminates the instance, and only then lets
// the Node and the NodeClaim go (the karpenter.sh/termination finalizer).
package termination

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
)

// NodeNameIndex indexes pods by the node they are bound to.
const NodeNameIndex = "spec.nodeName"

// Controller is the termination controller.
type Controller struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	recorder record.EventRecorder
	clock    clock.Clock
	backoff  *evictionBackoff
}

// NewController returns the controller.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, recorder record.EventRecorder, clk clock.Clock) *Controller {
	return &Controller{kube: kube, cloud: cloud, recorder: recorder, clock: clk, backoff: newEvictionBackoff()}
}

// Register adds the controller, and the pod index it reads by, to mgr. The
// lifecycle controller registers the provider ID indexes.
func (c *Controller) Register(ctx context.Context, mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, NodeNameIndex, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("termination").
		For(&v1.NodeClaim{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(nodeclaim.ClaimsOfNode(c.kube))).
		Complete(c)
}

// Reconcile drives one claim's termination.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	node, err := nodeclaim.NodeOf(ctx, c.kube, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if nc.DeletionTimestamp == nil {
		// Deleting the Node deletes its claim: the instance has to go too.
		if node != nil && node.DeletionTimestamp != nil {
			return reconcile.Result{}, client.IgnoreNotFound(c.kube.Delete(ctx, nc))
		}
		return reconcile.Result{}, nil
	}
	if !controllerutil.ContainsFinalizer(nc, v1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	if node != nil {
		if node.DeletionTimestamp == nil {
			if err := c.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, err
			}
			return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		drained, err := c.drain(ctx, nc, node)
		if err != nil {
			return reconcile.Result{}, err
		}
		if !drained {
			return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
		}
	}
	if nc.Status.ProviderID != "" {
		if err := c.cloud.Delete(ctx, nc); err != nil && !cloudprovider.IsNodeClaimNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("terminating the instance of nodeclaim %s: %w", nc.Name, err)
		}
	}
	if node != nil {
		if err := c.removeFinalizer(ctx, node); err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := c.removeFinalizer(ctx, nc); err != nil {
		return reconcile.Result{}, err
	}
	NodeClaimsTerminated.WithLabelValues(nc.Labels[v1.NodePoolLabelKey]).Inc()
	log.FromContext(ctx).Info("terminated", "nodeclaim", nc.Name, "providerID", nc.Status.ProviderID)
	return reconcile.Result{}, nil
}

func (c *Controller) removeFinalizer(ctx context.Context, o client.Object) error {
	if !controllerutil.ContainsFinalizer(o, v1.TerminationFinalizer) {
		return nil
	}
	patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
	controllerutil.RemoveFinalizer(o, v1.TerminationFinalizer)
	return client.IgnoreNotFound(c.kube.Patch(ctx, o, patch))
}

// drain taints the node and evicts what runs there; it reports true once nothing
// but mirror pods and finished pods is left.
func (c *Controller) drain(ctx context.Context, nc *v1.NodeClaim, node *corev1.Node) (bool, error) {
	if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == v1.DisruptedNoScheduleTaint.Key }) {
		patch := client.MergeFrom(node.DeepCopy())
		node.Spec.Taints = append(node.Spec.Taints, v1.DisruptedNoScheduleTaint)
		if err := c.kube.Patch(ctx, node, patch); err != nil {
			return false, client.IgnoreNotFound(err)
		}
	}
	pods := &corev1.PodList{}
	if err := c.kube.List(ctx, pods, client.MatchingFields{NodeNameIndex: node.Name}); err != nil {
		return false, err
	}
	expired := false
	if tgp := nc.Spec.TerminationGracePeriod; tgp != nil && node.DeletionTimestamp != nil {
		expired = !c.clock.Now().Before(node.DeletionTimestamp.Add(tgp.Duration))
	}
	plan := PlanDrain(pods.Items, expired)
	now := c.clock.Now()
	for _, p := range plan.Evict {
		if c.backoff.due(p.UID, now) {
			c.evict(ctx, p, now)
		}
	}
	for _, p := range plan.Delete {
		// terminationGracePeriod is up: the pod goes now, PDB or not.
		if err := c.kube.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return false, err
		}
		c.recorder.Eventf(p, corev1.EventTypeWarning, "Deleted", "Node %s reached its terminationGracePeriod", node.Name)
	}
	if len(plan.Waiting) > 0 {
		p := plan.Waiting[0]
		c.recorder.Eventf(node, corev1.EventTypeNormal, "DrainBlocked", "Waiting on pod %s/%s (%s)", p.Namespace, p.Name, plan.Why)
	}
	return plan.Done, nil
}

func (c *Controller) evict(ctx context.Context, p *corev1.Pod, now time.Time) {
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	err := c.kube.SubResource("eviction").Create(ctx, p, eviction)
	switch {
	case err == nil, apierrors.IsNotFound(err):
		c.backoff.forget(p.UID)
	case apierrors.IsTooManyRequests(err):
		// A PodDisruptionBudget said no: ask again after a backoff.
		next := c.backoff.refused(p.UID, now)
		c.recorder.Eventf(p, corev1.EventTypeWarning, "FailedEviction", "Eviction refused (PodDisruptionBudget), retrying in %s: %v",
			next.Sub(now).Round(time.Second), err)
	default:
		log.FromContext(ctx).Error(err, "evicting", "pod", client.ObjectKeyFromObject(p))
	}
}
