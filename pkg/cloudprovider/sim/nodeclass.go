package sim

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/nodetailor/tailor/api/v1alpha1"
)

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=tailor.sh,resources=simnodeclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=tailor.sh,resources=simnodeclasses/status,verbs=update

// NodeClassController marks a SimNodeClass Ready when its catalog loads under its
// kubelet settings.
type NodeClassController struct {
	kube  client.Client
	cloud *CloudProvider
}

// NewNodeClassController returns the controller.
func NewNodeClassController(kube client.Client, cloud *CloudProvider) *NodeClassController {
	return &NodeClassController{kube: kube, cloud: cloud}
}

// Register adds the controller to mgr.
func (c *NodeClassController) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("sim.nodeclass").For(&v1alpha1.SimNodeClass{}).Complete(c)
}

// Reconcile sets the Ready condition.
func (c *NodeClassController) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1alpha1.SimNodeClass{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: nc.Generation}
	if _, err := c.cloud.instanceTypes(nc); err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "CatalogUnavailable", err.Error()
	}
	if !meta.SetStatusCondition(&nc.Status.Conditions, cond) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, client.IgnoreNotFound(c.kube.Status().Update(ctx, nc))
}
