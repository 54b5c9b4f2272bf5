package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
)

// ResolveInterval is how often a NodeClass is resolved again, so that new AMI
// releases, subnets and security groups are seen (and drift) without a change to it.
const ResolveInterval = 5 * time.Minute

// ResolveRetry is how soon a NodeClass whose reads failed is resolved again.
const ResolveRetry = 30 * time.Second

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
	resolved := c.cloud.Resolve(ctx, nc)
	if ApplyResolution(nc, resolved) {
		if err := c.write(ctx, before, nc); err != nil {
			if apierrors.IsNotFound(err) {
				return reconcile.Result{}, nil
			}
			return reconcile.Result{}, err
		}
	}
	if err := c.restamp(ctx, nc); err != nil {
		return reconcile.Result{}, err
	}
	// Instances leave reservations without the status changing (expiry, moves).
	if err := c.relabelLapsed(ctx, nc); err != nil {
		return reconcile.Result{}, err
	}
	if err := resolved.Err(); err != nil {
		// Not found is a verdict (the conditions say it); a failed read is tried
		// again soon, what was resolved before held meanwhile.
		log.FromContext(ctx).Info("resolving the EC2NodeClass: reads failed, trying again", "ec2nodeclass", nc.Name, "error", err.Error())
		return reconcile.Result{RequeueAfter: ResolveRetry}, nil
	}
	return reconcile.Result{RequeueAfter: ResolveInterval}, nil
}

// restamp gives the NodeClass's claims that carry its hash of another hash
// version (Karpenter's, after a cut-over) its hash of Tailor's version. A hash of
// another version cannot be compared with Tailor's, and Karpenter does not tag
// its instances with the hash: without this, no later change to the NodeClass
// would ever drift such a claim. So it is taken as launched from the NodeClass
// as it is now, as Karpenter does when its own hash version changes and as the
// NodePool controller does with the NodePool hash. Claims without the annotation
// (Tailor's own, whose instances carry the hash as a tag) are left alone. (The
// NodeClaim patch is granted to Tailor's NodePool and termination controllers.)
func (c *NodeClassController) restamp(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	claims := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, claims); err != nil {
		return fmt.Errorf("listing nodeclaims to re-stamp with the hash of EC2NodeClass %s: %w", nc.Name, err)
	}
	hash := NodeClassHash(nc)
	var errs []error
	for i := range claims.Items {
		claim := &claims.Items[i]
		if !NeedsRestamp(claim, nc.Name) {
			continue
		}
		stamped := claim.DeepCopy()
		metav1.SetMetaDataAnnotation(&stamped.ObjectMeta, AnnotationNodeClassHash, hash)
		metav1.SetMetaDataAnnotation(&stamped.ObjectMeta, AnnotationNodeClassHashVersion, NodeClassHashVersion)
		if err := c.kube.Patch(ctx, stamped, client.MergeFrom(claim)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("nodeclaim %s: re-stamping annotation %s: %w", claim.Name, AnnotationNodeClassHash, err))
		}
	}
	return errors.Join(errs...)
}

// NeedsRestamp reports a claim of the EC2NodeClass named nodeClass, not being
// deleted, whose NodeClass hash is of another hash version than Tailor's.
func NeedsRestamp(claim *v1.NodeClaim, nodeClass string) bool {
	ref := claim.Spec.NodeClassRef
	if ref == nil || ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" || ref.Name != nodeClass || claim.DeletionTimestamp != nil {
		return false
	}
	version, ok := claim.Annotations[AnnotationNodeClassHashVersion]
	return ok && version != NodeClassHashVersion
}

// write stores the NodeClass's annotations and status, changed from before.
func (c *NodeClassController) write(ctx context.Context, before, nc *awsv1.EC2NodeClass) error {
	if !equalJSON(before.Annotations, nc.Annotations) {
		status := nc.Status
		if err := c.kube.Patch(ctx, nc, client.MergeFrom(before)); err != nil {
			return err
		}
		before = nc.DeepCopy()
		nc.Status = status
	}
	return c.kube.Status().Patch(ctx, nc, client.MergeFrom(before))
}

// relabelLapsed finds the NodeClass's reserved NodeClaims whose instance EC2 no
// longer shows in a reservation (it expired or was cancelled) and, as Karpenter
// does, labels them and their Nodes on-demand, without the reservation labels.
// (The NodeClaim and Node patches are granted to Tailor's termination controller.)
func (c *NodeClassController) relabelLapsed(ctx context.Context, nc *awsv1.EC2NodeClass) error {
	if !c.cloud.opts.ReservedCapacity {
		return nil
	}
	claims := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.MatchingLabels{v1.CapacityTypeLabelKey: CapacityTypeReserved}); err != nil {
		return fmt.Errorf("listing reserved nodeclaims: %w", err)
	}
	claims.Items = slices.DeleteFunc(claims.Items, func(claim v1.NodeClaim) bool {
		ref := claim.Spec.NodeClassRef
		return ref == nil || ref.Group != awsv1.Group || ref.Name != nc.Name || claim.Status.ProviderID == ""
	})
	if len(claims.Items) == 0 {
		return nil
	}
	// The provider's List, called here outside the CloudProvider interface, gets
	// the deadline that interface's List has: a hung DescribeInstances must not
	// hold the NodeClass controller's worker (the reconcile is retried instead).
	listCtx, cancel := context.WithTimeout(ctx, c.cloud.opts.CallTimeout)
	defer cancel()
	instances, err := c.cloud.List(listCtx)
	if err != nil {
		return fmt.Errorf("listing instances to relabel lapsed reservations: %w", err)
	}
	reservationOf := map[string]string{} // by provider ID
	for _, inst := range instances {
		reservationOf[inst.Status.ProviderID] = inst.Labels[LabelCapacityReservationID]
	}
	for i := range claims.Items {
		claim := &claims.Items[i]
		id, listed := reservationOf[claim.Status.ProviderID]
		if !listed {
			continue // gone, or not visible yet: other controllers see to it
		}
		labels, changed := LapsedReservation(claim.Labels, id)
		if !changed {
			continue
		}
		before := claim.DeepCopy()
		claim.Labels = labels
		if err := c.kube.Patch(ctx, claim, client.MergeFrom(before)); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("relabelling nodeclaim %s on-demand: %w", claim.Name, err)
		}
		if claim.Status.NodeName == "" {
			continue
		}
		node := &corev1.Node{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: claim.Status.NodeName}, node); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if nodeLabels, changed := LapsedReservation(node.Labels, ""); changed {
			beforeNode := node.DeepCopy()
			node.Labels = nodeLabels
			if err := c.kube.Patch(ctx, node, client.MergeFrom(beforeNode)); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("relabelling node %s on-demand: %w", node.Name, err)
			}
		}
	}
	return nil
}
