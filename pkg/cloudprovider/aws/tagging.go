package aws

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
)

const (
	// TagName is EC2's display name of an instance: its node's name once the node
	// registered, as Karpenter sets it.
	TagName = "Name"
	// AnnotationInstanceTagged marks a NodeClaim whose instance has its Name tag,
	// as Karpenter marks it (so a claim Karpenter tagged is not tagged again).
	AnnotationInstanceTagged = awsv1.Group + "/tagged"
)

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch;patch

// TaggingController names each instance after its node: once a claim's node has
// registered (status.nodeName), the instance gets the tags Name (the node name),
// karpenter.sh/nodeclaim and eks:eks-cluster-name, and the claim the
// karpenter.k8s.aws/tagged annotation.
type TaggingController struct {
	kube    client.Client
	ec2     *ec2.Client
	cluster string
}

// NewTaggingController tags through ec2 the instances of the cluster's claims.
func NewTaggingController(kube client.Client, ec2Client *ec2.Client, cluster string) *TaggingController {
	return &TaggingController{kube: kube, ec2: ec2Client, cluster: cluster}
}

// Register adds the controller to mgr.
func (c *TaggingController) Register(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("aws.nodeclaim.tagging").
		For(&v1.NodeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			nc, ok := o.(*v1.NodeClaim)
			return ok && taggable(nc)
		}))).Complete(c)
}

// taggable reports a claim of an EC2NodeClass whose node has registered, not yet
// tagged, not being deleted.
func taggable(nc *v1.NodeClaim) bool {
	ref := nc.Spec.NodeClassRef
	return ref != nil && ref.Group == awsv1.Group && ref.Kind == "EC2NodeClass" && nc.Status.NodeName != "" &&
		nc.Status.ProviderID != "" && nc.DeletionTimestamp == nil && nc.Annotations[AnnotationInstanceTagged] != "true"
}

// Reconcile tags the claim's instance, then annotates the claim.
func (c *TaggingController) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &v1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !taggable(nc) {
		return reconcile.Result{}, nil
	}
	id, err := ParseProviderID(nc.Status.ProviderID)
	if err != nil {
		return reconcile.Result{}, nil // not an instance of ours: nothing to tag
	}
	_, err = c.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2Tags(map[string]string{
		TagName: nc.Status.NodeName, TagNodeClaim: nc.Name, TagEKSCluster: c.cluster,
	})})
	if errorCode(err) == "InvalidInstanceID.NotFound" {
		// Just launched and not visible yet, or gone: the claim's lifecycle settles
		// which; asked again meanwhile.
		return reconcile.Result{RequeueAfter: 10 * time.Second}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("tagging instance %s of nodeclaim %s: %w", id, nc.Name, err)
	}
	patch := client.MergeFrom(nc.DeepCopy())
	metav1.SetMetaDataAnnotation(&nc.ObjectMeta, AnnotationInstanceTagged, "true")
	return reconcile.Result{}, client.IgnoreNotFound(c.kube.Patch(ctx, nc, patch))
}
