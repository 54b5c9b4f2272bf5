// Package nodepool keeps NodePool status: the resources and nodes in use, whether
// its NodeClass is ready, whether the template can produce a NodeClaim the API
// server accepts, and the template hash (karpenter.sh/nodepool-hash) that drift
// detection compares, re-stamped on claims stamped by another hash version. A
// NodePool of another provider's NodeClass kind (Karpenter's) is left alone.
package nodepool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
)

// HashVersion changes when the hash function does, so drift can tell old hashes.
const HashVersion = "v1"

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodepools,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodepools/status,verbs=patch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch;create;patch

// Controller is the NodePool status controller.
type Controller struct {
	kube        client.Client
	nodeClasses []client.Object
	// staticCapacity is the StaticCapacity feature gate: without it a static
	// NodePool is told, in a condition, that its replicas are not kept.
	staticCapacity bool
	// admitted remembers, by NodePool name, the API server's answer to a dry-run
	// NodeClaim from each pool's template, for the generation it was asked for.
	mu       sync.Mutex
	admitted map[string]admission
}

// admission is the API server's answer for one generation of a NodePool.
type admission struct {
	uid        types.UID
	generation int64
	refused    string // why the NodeClaim was refused, or ""
}

// NewController returns the controller. nodeClasses are the NodeClass kinds the
// cloud provider serves (e.g. SimNodeClass): a change to one refreshes the
// NodePools that refer to it, so a NodeClass created or turning ready after its
// NodePool makes the NodePool ready; and only claims of those kinds have their
// nodepool hash re-stamped; NodePools of other kinds the cluster serves are
// another controller's, and left alone. staticCapacity is the StaticCapacity
// feature gate.
func NewController(kube client.Client, staticCapacity bool, nodeClasses ...client.Object) *Controller {
	return &Controller{kube: kube, nodeClasses: nodeClasses, staticCapacity: staticCapacity, admitted: map[string]admission{}}
}

// Name is the controller's name.
func (c *Controller) Name() string { return "nodepool.status" }

// Register adds the controller to mgr; NodeClaim changes refresh their pool, and
// NodeClass changes the pools that refer to it.
func (c *Controller) Register(_ context.Context, mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named(c.Name()).
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
		if apierrors.IsNotFound(err) {
			c.mu.Lock()
			delete(c.admitted, req.Name)
			c.mu.Unlock()
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	kinds, err := c.kinds()
	if err != nil {
		return reconcile.Result{}, err
	}
	mine, err := c.mine(np, kinds)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !mine {
		log.FromContext(ctx).V(1).Info("leaving a NodePool of another provider's NodeClass kind to its controller", "nodepool", klog.KObj(np))
		return reconcile.Result{}, nil
	}
	if hash := Hash(np); np.Annotations[v1.NodePoolHashAnnotationKey] != hash || np.Annotations[v1.NodePoolHashVersionAnnotationKey] != HashVersion {
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
	var errs []error
	if err := c.restamp(ctx, np, claims.Items, kinds); err != nil {
		errs = append(errs, err)
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
	// A claim being deleted still counts: its instance runs until termination ends.
	resources["nodes"] = *resource.NewQuantity(nodes, resource.DecimalSI)
	np.Status.Resources = resources
	np.Status.Nodes = &nodes

	if np.IsStatic() && !c.staticCapacity {
		setCondition(np, v1.ConditionTypeStaticCapacity, false, "FeatureGateDisabled",
			"spec.replicas is set but the StaticCapacity feature gate is off: no nodes are kept for this NodePool, and it is not used for pending pods (set --feature-gates StaticCapacity=true)")
	} else {
		meta.RemoveStatusCondition(&np.Status.Conditions, v1.ConditionTypeStaticCapacity)
	}
	classReady, classReason, classMessage := c.nodeClassReady(ctx, np, kinds)
	setCondition(np, v1.ConditionTypeNodeClassReady, classReady, classReason, classMessage)
	valid, why := Validate(np)
	unknown := false
	if valid {
		var err error
		if why, err = c.admits(ctx, np); err != nil {
			// Unknown: leave validity and readiness as they were, and ask again.
			unknown = true
			errs = append(errs, err)
		}
		valid = why == ""
	}
	if !unknown {
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
	}
	if !equality.Semantic.DeepEqual(base.Status, np.Status) { // an empty patch is still a request
		// The lock keeps conditions other controllers set on the pool meanwhile: a
		// merge patch replaces the whole list.
		err := c.kube.Status().Patch(ctx, np, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, errors.Join(errs...)
		}
		if client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("NodePool %s: updating status: %w", np.Name, err))
		}
	}
	return reconcile.Result{}, errors.Join(errs...)
}

// admits asks the API server, with a dry-run create, whether it accepts a NodeClaim
// made from the pool's template, once per generation: the NodeClaim's schema and
// metadata rules are not all the NodePool's, and a template that passes its own but
// not the claim's would have every create refused. It returns why the claim was
// refused, or "", or an error when the answer is unknown.
func (c *Controller) admits(ctx context.Context, np *v1.NodePool) (string, error) {
	c.mu.Lock()
	known, ok := c.admitted[np.Name]
	c.mu.Unlock()
	if ok && known.uid == np.UID && known.generation == np.Generation {
		return known.refused, nil
	}
	refused := ""
	if nc, err := nodeclaim.FromTemplate(np); err != nil {
		refused = err.Error()
	} else if err := c.kube.Create(ctx, nc, client.DryRunAll); apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		refused = "a NodeClaim from the template is refused: " + err.Error()
	} else if err != nil {
		return "", fmt.Errorf("NodePool %s: dry-run creating a NodeClaim from its template: %w", np.Name, err)
	}
	c.mu.Lock()
	c.admitted[np.Name] = admission{uid: np.UID, generation: np.Generation, refused: refused}
	c.mu.Unlock()
	return refused, nil
}

// kinds are the NodeClass kinds the provider serves.
func (c *Controller) kinds() ([]schema.GroupKind, error) {
	kinds := make([]schema.GroupKind, 0, len(c.nodeClasses))
	for _, obj := range c.nodeClasses {
		gvk, err := apiutil.GVKForObject(obj, c.kube.Scheme())
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, gvk.GroupKind())
	}
	return kinds, nil
}

// mine reports whether the NodePool's status and annotations are this
// controller's to write. A NodePool of a NodeClass kind the provider does not
// serve, but the cluster does (Karpenter's EC2NodeClass beside the sim provider),
// is another controller's: writing our hash, or a Ready it does not share, would
// have the two rewrite it in turn, and Karpenter provisions only from NodePools it
// holds Ready. A kind nothing in the cluster serves is ours to report as not
// supported (see nodeClassReady).
func (c *Controller) mine(np *v1.NodePool, kinds []schema.GroupKind) (bool, error) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil || served(kinds, ref) {
		return true, nil
	}
	_, err := c.kube.RESTMapper().RESTMapping(schema.GroupKind{Group: ref.Group, Kind: ref.Kind})
	switch {
	case err == nil:
		return false, nil
	case meta.IsNoMatchError(err):
		return true, nil
	default:
		return false, fmt.Errorf("NodePool %s: looking up NodeClass kind %s/%s: %w", np.Name, ref.Group, ref.Kind, err)
	}
}

func served(kinds []schema.GroupKind, ref *v1.NodeClassReference) bool {
	return slices.Contains(kinds, schema.GroupKind{Group: ref.Group, Kind: ref.Kind})
}

// restamp gives the pool's claims stamped by another hash version the pool's
// current hash and version. Hashes of different versions cannot be compared (the
// claims of a Karpenter being replaced carry its version), so such a claim is taken
// as launched from the template it runs under, never as drifted; but a claim
// already marked Drifted (by Karpenter before the cut-over) keeps its old hash
// under the new version, so it stays drifted, as Karpenter does when its own hash
// version changes. Only claims of kinds, the NodeClass kinds this provider serves,
// are touched.
func (c *Controller) restamp(ctx context.Context, np *v1.NodePool, claims []v1.NodeClaim, kinds []schema.GroupKind) error {
	hash, version := np.Annotations[v1.NodePoolHashAnnotationKey], np.Annotations[v1.NodePoolHashVersionAnnotationKey]
	if hash == "" || version != HashVersion {
		return nil
	}
	var errs []error
	for i := range claims {
		nc := &claims[i] // the cache's own: read only
		if !NeedsRestamp(nc, version, kinds) {
			continue
		}
		stamped := nc.DeepCopy()
		if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeDrifted) {
			metav1.SetMetaDataAnnotation(&stamped.ObjectMeta, v1.NodePoolHashAnnotationKey, hash)
		}
		metav1.SetMetaDataAnnotation(&stamped.ObjectMeta, v1.NodePoolHashVersionAnnotationKey, version)
		if err := c.kube.Patch(ctx, stamped, client.MergeFrom(nc)); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("NodeClaim %s: re-stamping annotation %s: %w", nc.Name, v1.NodePoolHashAnnotationKey, err))
		}
	}
	return errors.Join(errs...)
}

// NeedsRestamp reports a claim of one of kinds whose hash version is not version.
func NeedsRestamp(nc *v1.NodeClaim, version string, kinds []schema.GroupKind) bool {
	ref := nc.Spec.NodeClassRef
	if ref == nil || !slices.Contains(kinds, schema.GroupKind{Group: ref.Group, Kind: ref.Kind}) {
		return false
	}
	return nc.Annotations[v1.NodePoolHashVersionAnnotationKey] != version
}

func setCondition(np *v1.NodePool, kind string, ok bool, reason, message string) {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&np.Status.Conditions, metav1.Condition{Type: kind, Status: status, Reason: reason,
		Message: message, ObservedGeneration: np.Generation})
}

// nodeClassReady looks the NodeClass up generically and reads its Ready condition;
// a NodeClass without conditions counts as ready once it exists. One of a kind
// not in kinds, the provider's, is not supported.
func (c *Controller) nodeClassReady(ctx context.Context, np *v1.NodePool, kinds []schema.GroupKind) (bool, string, string) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return false, "NodeClassNotFound", "the template has no nodeClassRef"
	}
	if !served(kinds, ref) {
		supported := make([]string, len(kinds))
		for i, k := range kinds {
			supported[i] = fmt.Sprintf("%s (%s)", k.Kind, k.Group)
		}
		return false, "NodeClassNotSupported", fmt.Sprintf("NodeClassRef kind %s (%s) is not supported by this cloud provider, which launches from %s",
			ref.Kind, ref.Group, strings.Join(supported, ", "))
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

// Validate checks what the NodePool's CRD cannot (CEL over unbounded map keys and
// values would exceed the API server's cost budget) but the API server checks on
// every NodeClaim: the template's labels and annotations, and the NodePool's name
// as the value of the karpenter.sh/nodepool label, by the API server's own rules.
func Validate(np *v1.NodePool) (bool, string) {
	tmpl := field.NewPath("spec", "template", "metadata")
	errs := metav1validation.ValidateLabels(np.Spec.Template.Labels, tmpl.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(np.Spec.Template.Annotations, tmpl.Child("annotations"))...)
	for _, msg := range validation.IsValidLabelValue(np.Name) {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), np.Name, "as the value of label "+v1.NodePoolLabelKey+": "+msg))
	}
	if cost, ok := np.Annotations[v1alpha1.PerNodeCostAnnotationKey]; ok {
		if _, err := v1alpha1.ParsePerNodeCost(cost); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "annotations").Key(v1alpha1.PerNodeCostAnnotationKey), cost, err.Error()))
		}
	}
	if len(errs) > 0 {
		return false, errs.ToAggregate().Error()
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
