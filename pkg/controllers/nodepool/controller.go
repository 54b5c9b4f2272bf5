// Package nodepool keeps NodePool status: the resources and nodes in use, whether
// its NodeClass is ready, whether the template passes runtime validation, and the
// template hash (karpenter.sh/nodepool-hash) that drift detection compares.
package nodepool

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// HashVersion changes when the hash function does, so drift can tell old hashes.
const HashVersion = "v1"

// Controller is the NodePool status controller.
type Controller struct {
	kube        client.Client
	nodeClasses []client.Object
}

// NewController returns the controller. nodeClasses are the NodeClass kinds the
// cloud provider serves (e.g. SimNodeClass): a change to one refreshes the
// NodePools that refer to it, so a NodeClass created or turning ready after its
// NodePool makes the NodePool ready.
func NewController(kube client.Client, nodeClasses ...client.Object) *Controller {
	return &Controller{kube: kube, nodeClasses: nodeClasses}
}

// Register adds the controller to mgr; NodeClaim changes refresh their pool, and
// NodeClass changes the pools that refer to it.
func (c *Controller) Register(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named("nodepool.status").
		For(&v1.NodePool{}).
		Watches(&v1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if pool := o.GetLabels()[v1.NodePoolLabelKey]; pool != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: pool}}}
			}
			return nil
		}))
	for _, kind := range c.nodeClasses {
		gvk, err := apiutil.GVKForObject(kind, mgr.GetScheme())
		if err != nil {
			return err
		}
		b = b.Watches(kind, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return c.poolsReferring(ctx, gvk.GroupKind(), o.GetName())
		}))
	}
	return b.Complete(c)
}

// poolsReferring lists the NodePools whose template names the NodeClass.
func (c *Controller) poolsReferring(ctx context.Context, kind schema.GroupKind, name string) []reconcile.Request {
	pools := &v1.NodePoolList{}
	if err := c.kube.List(ctx, pools, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, np := range pools.Items {
		if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil && ref.Group == kind.Group && ref.Kind == kind.Kind && ref.Name == name {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Name: np.Name}})
		}
	}
	return out
}

// Reconcile refreshes one NodePool.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if hash := Hash(np); np.Annotations[v1.NodePoolHashAnnotationKey] != hash {
		patch := client.MergeFrom(np.DeepCopy())
		metav1.SetMetaDataAnnotation(&np.ObjectMeta, v1.NodePoolHashAnnotationKey, hash)
		metav1.SetMetaDataAnnotation(&np.ObjectMeta, v1.NodePoolHashVersionAnnotationKey, HashVersion)
		if err := c.kube.Patch(ctx, np, patch); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	base := np.DeepCopy()
	claims := &v1.NodeClaimList{}
	// Read only, and every claim event lands here: no copies of hundreds of claims.
	if err := c.kube.List(ctx, claims, client.MatchingLabels{v1.NodePoolLabelKey: np.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, err
	}
	resources := corev1.ResourceList{}
	var nodes int64
	for _, nc := range claims.Items {
		nodes++
		for name, q := range nc.Status.Capacity {
			sum := resources[name]
			sum.Add(q)
			resources[name] = sum
		}
	}
	resources["nodes"] = *resource.NewQuantity(nodes, resource.DecimalSI)
	np.Status.Resources = resources
	np.Status.Nodes = &nodes

	classReady, classReason, classMessage := c.nodeClassReady(ctx, np)
	setCondition(np, v1.ConditionTypeNodeClassReady, classReady, classReason, classMessage)
	valid, why := Validate(np)
	validReason := "Valid"
	if !valid {
		validReason = "InvalidTemplate"
	}
	setCondition(np, v1.ConditionTypeValidationSucceeded, valid, validReason, why)
	ready, reason, message := true, "Ready", ""
	switch {
	case !valid:
		ready, reason, message = false, "ValidationFailed", why
	case !classReady:
		ready, reason, message = false, "NodeClassNotReady", classMessage
	}
	setCondition(np, v1.ConditionTypeReady, ready, reason, message)
	if equality.Semantic.DeepEqual(base.Status, np.Status) {
		return reconcile.Result{}, nil // an empty patch is still a request
	}
	return reconcile.Result{}, client.IgnoreNotFound(c.kube.Status().Patch(ctx, np, client.MergeFrom(base)))
}

func setCondition(np *v1.NodePool, kind string, ok bool, reason, message string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: kind, Status: status, Reason: reason,
		Message: message, ObservedGeneration: np.Generation})
}

// nodeClassReady looks the NodeClass up generically (any provider's kind) and reads
// its Ready condition; a NodeClass without conditions counts as ready once it exists.
func (c *Controller) nodeClassReady(ctx context.Context, np *v1.NodePool) (bool, string, string) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return false, "NodeClassNotFound", "the template has no nodeClassRef"
	}
	mapping, err := c.kube.RESTMapper().RESTMapping(schema.GroupKind{Group: ref.Group, Kind: ref.Kind})
	if err != nil {
		return false, "NodeClassNotFound", fmt.Sprintf("%s/%s is not a kind this cluster serves", ref.Group, ref.Kind)
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := c.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, obj); err != nil {
		return false, "NodeClassNotFound", fmt.Sprintf("%s %s/%s: %v", ref.Kind, ref.Group, ref.Name, err)
	}
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, raw := range conditions {
		cond, _ := raw.(map[string]any)
		if cond["type"] == "Ready" && cond["status"] != "True" {
			return false, "NodeClassNotReady", fmt.Sprintf("%s %s is not ready: %v", ref.Kind, ref.Name, cond["message"])
		}
	}
	return true, "NodeClassReady", ""
}

var labelValue = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)

// Validate checks what the CRD cannot (CEL over unbounded map values would exceed
// the API server's cost budget): template label values are valid label values.
func Validate(np *v1.NodePool) (bool, string) {
	for k, v := range np.Spec.Template.Labels {
		if !labelValue.MatchString(v) {
			return false, fmt.Sprintf("spec.template.metadata.labels[%s]: %q is not a valid label value", k, v)
		}
	}
	return true, ""
}

// Hash fingerprints the parts of the template that shape a node; a node whose claim
// carries another hash has drifted.
func Hash(np *v1.NodePool) string {
	t := np.Spec.Template
	data, _ := json.Marshal(struct {
		Labels, Annotations map[string]string
		Taints, Startup     []corev1.Taint
		NodeClass           *v1.NodeClassReference
		ExpireAfter         string
		Grace               *metav1.Duration
	}{t.Labels, t.Annotations, t.Spec.Taints, t.Spec.StartupTaints, t.Spec.NodeClassRef, t.Spec.ExpireAfter.String(), t.Spec.TerminationGracePeriod})
	h := fnv.New64a()
	h.Write(data)
	return strconv.FormatUint(h.Sum64(), 10)
}
