// Package expiration deletes NodeClaims that reached their expireAfter. Expiry is
// forceful, as in Karpenter v1: budgets do not hold it back, the claim is deleted and
// termination drains it (terminationGracePeriod caps the drain); its pods find new
// nodes through provisioning, which starts as soon as the node is going.
package expiration

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/disruption"
	"github.com/nodetailor/tailor/pkg/metrics"
)

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch;delete

// Controller is the expiration controller.
type Controller struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	recorder record.EventRecorder
	clock    clock.Clock
	wake     func()
}

// NewController returns the controller; cloud says which claims are Tailor's to
// expire, and wake tells the provisioner pods will need a place.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, recorder record.EventRecorder, clk clock.Clock, wake func()) *Controller {
	return &Controller{kube: kube, cloud: cloud, recorder: recorder, clock: clk, wake: wake}
}

// Name is the controller's name.
func (c *Controller) Name() string { return "nodeclaim.expiration" }

// Register adds the controller to mgr.
func (c *Controller) Register(_ context.Context, mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named(c.Name()).For(&v1.NodeClaim{}).Complete(c)
}

// Reconcile deletes an expired claim, or comes back when it expires.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	at, ok := disruption.ExpiresAt(nc)
	if !ok || nc.DeletionTimestamp != nil || !cloudprovider.Manages(c.cloud, nc) {
		return reconcile.Result{}, nil // a foreign claim expires by its own controller
	}
	if left := at.Sub(c.clock.Now()); left > 0 {
		return reconcile.Result{RequeueAfter: left}, nil
	}
	if err := c.kube.Delete(ctx, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("expired", "nodeclaim", nc.Name, "expireAfter", nc.Spec.ExpireAfter.String())
	c.recorder.Eventf(nc, corev1.EventTypeNormal, "Expired", "NodeClaim reached its expireAfter of %s", nc.Spec.ExpireAfter.String())
	metrics.NodeClaimsDisrupted.WithLabelValues(metrics.ReasonExpired, nc.Labels[v1.NodePoolLabelKey], nc.Labels[v1.CapacityTypeLabelKey]).Inc()
	if c.wake != nil {
		c.wake()
	}
	return reconcile.Result{}, nil
}
