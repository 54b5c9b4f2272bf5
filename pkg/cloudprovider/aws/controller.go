package aws

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
)

// ResolveInterval is how often a NodeClass is resolved again, so that new AMI
// releases, subnets and security groups are seen (and drift) without a change to it.
const ResolveInterval = 5 * time.Minute

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=karpenter.k8s.aws,resources=ec2nodeclasses,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=karpenter.k8s.aws,resources=ec2nodeclasses/status,verbs=patch

// NodeClassController keeps each EC2NodeClass's status: what its selectors
// resolve to, a condition per dependency, Ready naming what is missing, and its
// hash annotation.
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
	return ctrl.NewControllerManagedBy(mgr).Named("aws.nodeclass").For(&awsv1.EC2NodeClass{}).Complete(c)
}

// Reconcile resolves the NodeClass and writes its annotations and status.
func (c *NodeClassController) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if nc.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	before := nc.DeepCopy()
	if !ApplyResolution(nc, c.cloud.Resolve(ctx, nc)) {
		return reconcile.Result{RequeueAfter: ResolveInterval}, nil
	}
	if !equalJSON(before.Annotations, nc.Annotations) {
		status := nc.Status
		if err := c.kube.Patch(ctx, nc, client.MergeFrom(before)); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		before = nc.DeepCopy()
		nc.Status = status
	}
	if err := c.kube.Status().Patch(ctx, nc, client.MergeFrom(before)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{RequeueAfter: ResolveInterval}, nil
}
