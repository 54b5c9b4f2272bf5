// Package termination takes nodes down cleanly. Deleting a NodeClaim, or its Node,
// taints the node karpenter.sh/disrupted:NoSchedule, evicts its pods through the
// Eviction API in tiers (PodDisruptionBudgets decide; pods annotated
// karpenter.sh/do-not-disrupt wait; system-critical and DaemonSet pods go last; mirror
// pods, pods that tolerate the taint and pods stuck terminating stay), waits for the
// node's volumes to detach, caps those waits at the claim's terminationGracePeriod,
// terminates the instance, and only once the cloud reports it gone lets the Node and
// the NodeClaim go (the karpenter.sh/termination finalizer). A Node that carries the
// finalizer but has no NodeClaim is drained and released the same way.
//
// Only claims whose NodeClass the running provider launches from, and Nodes whose
// provider ID is of its scheme, are touched: another controller's claims and
// Nodes keep their finalizer, Node and instance.
package termination

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	cpmetrics "github.com/nodetailor/tailor/pkg/cloudprovider/metrics"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
)

// NodeNameIndex indexes pods, and VolumeAttachments, by the node they are on. It
// is also the pods' field selector on the API server, so a live List uses it too.
const NodeNameIndex = "spec.nodeName"

// Requeue intervals: between drain passes, and while the cloud terminates an
// instance.
const (
	drainRetry     = 2 * time.Second
	terminateRetry = 2 * time.Second
)

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims/status,verbs=patch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodepools,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=volumeattachments,verbs=get;list;watch

// Controller is the termination controller.
type Controller struct {
	kube client.Client
	// live reads past the cache: the last look at a node's pods before calling it
	// drained, and the rare reads not worth an informer.
	live     client.Reader
	cloud    cloudprovider.CloudProvider
	recorder record.EventRecorder
	clock    clock.Clock
	backoff  *evictionBackoff
	tainted  *taintedNodes
	// unclaimed holds the UIDs of deleting Nodes a live read found no claim for,
	// so their later drain passes trust the cache.
	unclaimed sync.Map
}

// NewController returns the controller. kube is the manager's (cached) client,
// live an uncached reader (the manager's API reader).
func NewController(kube client.Client, live client.Reader, cloud cloudprovider.CloudProvider, recorder record.EventRecorder, clk clock.Clock) *Controller {
	return &Controller{kube: kube, live: live, cloud: cloud, recorder: recorder, clock: clk,
		backoff: newEvictionBackoff(), tainted: newTaintedNodes()}
}

// Name is the controller's name.
func (c *Controller) Name() string { return ControllerName }

// Register adds the controller, and the indexes it reads by, to mgr. The lifecycle
// controller registers the provider ID indexes.
func (c *Controller) Register(ctx context.Context, mgr ctrl.Manager) error {
	if err := IndexFields(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("termination").
		For(&v1.NodeClaim{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(nodeclaim.ClaimsOfNode(c.kube))).
		Complete(nodeclaim.QuietConflicts(c)); err != nil {
		return err
	}
	deleting := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetDeletionTimestamp() != nil && controllerutil.ContainsFinalizer(o, v1.TerminationFinalizer)
	})
	return ctrl.NewControllerManagedBy(mgr).Named("termination.node").
		For(&corev1.Node{}, builder.WithPredicates(deleting)).
		Complete(nodeclaim.QuietConflicts(reconcile.Func(c.ReconcileNode)))
}

// IndexFields registers the cache indexes the controller lists by.
func IndexFields(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Pod{}, NodeNameIndex, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &storagev1.VolumeAttachment{}, NodeNameIndex, func(o client.Object) []string {
		return []string{o.(*storagev1.VolumeAttachment).Spec.NodeName}
	})
}

// Reconcile drives one claim's termination.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ctx = cpmetrics.WithController(ctx, ControllerName)
	nc := &v1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !cloudprovider.Manages(c.cloud, nc) {
		return reconcile.Result{}, nil // another controller's claim (Karpenter's, in a cut-over)
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
		wait, err := c.drainNode(ctx, node, claimDeadline(nc, node), disruptionReason(nc))
		if err != nil {
			return reconcile.Result{}, err
		}
		if wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
	}
	gone, err := c.terminate(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !gone {
		log.FromContext(ctx).V(1).Info("waiting for the instance to go", "nodeclaim", nc.Name, "providerID", nc.Status.ProviderID)
		return reconcile.Result{RequeueAfter: terminateRetry}, nil
	}
	if node != nil {
		had := controllerutil.ContainsFinalizer(node, v1.TerminationFinalizer)
		if err := c.removeFinalizer(ctx, node); err != nil {
			return reconcile.Result{}, err
		}
		if had {
			nodeReleased(node, c.clock.Now())
		}
		c.tainted.forget(node.UID)
	}
	if err := c.removeFinalizer(ctx, nc); err != nil {
		return reconcile.Result{}, err
	}
	claimReleased(nc, c.clock.Now())
	log.FromContext(ctx).Info("terminated", "nodeclaim", nc.Name, "providerID", nc.Status.ProviderID)
	return reconcile.Result{}, nil
}

// ReconcileNode releases a Node being deleted that carries the termination
// finalizer but has no NodeClaim (its claim was removed by hand, or never
// recorded the launch): drained like any other, its instance terminated if the
// provider manages it, then the finalizer removed. A Node with a claim is left to
// the claim's termination; one whose provider ID is another cloud's, or whose
// NodePool launches from another provider's NodeClass, to its own controller.
func (c *Controller) ReconcileNode(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ctx = cpmetrics.WithController(ctx, ControllerName)
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if node.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(node, v1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	// The provider would call another cloud's instance not found, which must not
	// read as gone: Karpenter, if it runs, drains and releases the node.
	if id := node.Spec.ProviderID; id != "" && !cloudprovider.OwnsProviderID(c.cloud, id) {
		log.FromContext(ctx).V(1).Info("leaving a node of another cloud to its own controller", "node", node.Name, "providerID", id)
		return reconcile.Result{}, nil
	}
	if claimed, err := c.claimed(ctx, node); err != nil || claimed {
		return reconcile.Result{}, err
	}
	pool, err := c.poolOf(ctx, node)
	if err != nil {
		return reconcile.Result{}, err
	}
	var tgp *metav1.Duration
	if pool != nil {
		if !cloudprovider.ManagesPool(c.cloud, pool) {
			return reconcile.Result{}, nil // another controller's node
		}
		tgp = pool.Spec.Template.Spec.TerminationGracePeriod
	}
	wait, err := c.drainNode(ctx, node, deadline(node, tgp), "")
	if err != nil {
		return reconcile.Result{}, err
	}
	if wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if node.Spec.ProviderID != "" {
		gone, err := c.terminateUnclaimed(ctx, node)
		if err != nil {
			return reconcile.Result{}, err
		}
		if !gone {
			return reconcile.Result{RequeueAfter: terminateRetry}, nil
		}
	}
	if err := c.removeFinalizer(ctx, node); err != nil {
		return reconcile.Result{}, err
	}
	nodeReleased(node, c.clock.Now())
	c.tainted.forget(node.UID)
	c.unclaimed.Delete(node.UID)
	log.FromContext(ctx).Info("released a node without a nodeclaim", "node", node.Name, "providerID", node.Spec.ProviderID)
	return reconcile.Result{}, nil
}

// claimed reports whether some NodeClaim has the node's provider ID. The cache is
// asked first; a node it finds no claim for is confirmed with a live read, since
// a claim's launch may not have reached the cache yet.
func (c *Controller) claimed(ctx context.Context, node *corev1.Node) (bool, error) {
	if node.Spec.ProviderID == "" {
		return false, nil
	}
	claims := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.MatchingFields{nodeclaim.ProviderIDIndex: node.Spec.ProviderID}); err != nil {
		return false, err
	}
	if len(claims.Items) > 0 {
		return true, nil
	}
	if _, ok := c.unclaimed.Load(node.UID); ok {
		return false, nil
	}
	if err := c.live.List(ctx, claims); err != nil {
		return false, fmt.Errorf("looking for the nodeclaim of node %s: %w", node.Name, err)
	}
	if slices.ContainsFunc(claims.Items, func(nc v1.NodeClaim) bool { return nc.Status.ProviderID == node.Spec.ProviderID }) {
		return true, nil
	}
	c.unclaimed.Store(node.UID, struct{}{})
	return false, nil
}

// poolOf returns the NodePool the node's karpenter.sh/nodepool label names, or nil.
func (c *Controller) poolOf(ctx context.Context, node *corev1.Node) (*v1.NodePool, error) {
	name := node.Labels[v1.NodePoolLabelKey]
	if name == "" {
		return nil, nil
	}
	pool := &v1.NodePool{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, pool); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading nodepool %s of node %s: %w", name, node.Name, err)
	}
	return pool, nil
}

// deadline is when the drain of a node being deleted stops waiting: its deletion
// plus the terminationGracePeriod, if there is one.
func deadline(node *corev1.Node, tgp *metav1.Duration) *time.Time {
	if tgp == nil || node.DeletionTimestamp == nil {
		return nil
	}
	t := node.DeletionTimestamp.Add(tgp.Duration)
	return &t
}

// claimDeadline is the earlier of the node's terminationGracePeriod deadline and
// the claim's karpenter.sh/nodeclaim-termination-timestamp annotation: node repair
// sets that annotation to the moment it gives a broken node up, so nothing on it is
// waited for.
func claimDeadline(nc *v1.NodeClaim, node *corev1.Node) *time.Time {
	until := deadline(node, nc.Spec.TerminationGracePeriod)
	at, err := time.Parse(time.RFC3339, nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey])
	if err != nil {
		return until
	}
	if until == nil || at.Before(*until) {
		return &at
	}
	return until
}

// drainNode takes one step of a node's drain and returns how long to wait before
// the next, or 0 once the node is drained and its volumes detached (or the cloud
// reports its instance gone).
// reason is why the node is disrupted (its claim's DisruptionReason), for the
// drained-pods count.
func (c *Controller) drainNode(ctx context.Context, node *corev1.Node, until *time.Time, reason string) (time.Duration, error) {
	if gone, err := c.deadNode(ctx, node); err != nil || gone {
		return 0, err
	}
	now := c.clock.Now()
	if !slices.ContainsFunc(node.Spec.Taints, isDisruptedTaint) {
		patch := client.MergeFrom(node.DeepCopy())
		node.Spec.Taints = append(node.Spec.Taints, v1.DisruptedNoScheduleTaint)
		if err := c.kube.Patch(ctx, node, patch); err != nil {
			return drainRetry, client.IgnoreNotFound(err)
		}
		log.FromContext(ctx).V(1).Info("tainted a node for termination", "node", node.Name, "deadline", until)
		if until != nil {
			c.recorder.Eventf(node, corev1.EventTypeWarning, ReasonTerminationGracePeriodExpiring, "All pods will be deleted by %s", until.UTC().Format(time.RFC3339))
		}
	}
	tainted := c.tainted.seen(node.UID, now)
	expired := until != nil && !now.Before(*until)
	pods := &corev1.PodList{}
	if err := c.kube.List(ctx, pods, client.MatchingFields{NodeNameIndex: node.Name}); err != nil {
		return 0, err
	}
	if plan := PlanDrain(pods.Items, now, until); !plan.Done {
		return drainRetry, c.apply(ctx, node, plan, now, reason)
	}
	if left := settleLeft(tainted, now); left > 0 {
		return left, nil
	}
	// The cache may not show a pod bound an instant ago: look at the API itself.
	if err := c.live.List(ctx, pods, client.MatchingFields{NodeNameIndex: node.Name}); err != nil {
		return 0, fmt.Errorf("listing the pods of node %s: %w", node.Name, err)
	}
	if plan := PlanDrain(pods.Items, now, until); !plan.Done {
		return drainRetry, c.apply(ctx, node, plan, now, reason)
	}
	if c.tainted.drained(node.UID, now) {
		nodeDrained(node)
	}
	if expired {
		return 0, nil
	}
	blocking, err := c.blockingAttachments(ctx, node, pods.Items, now)
	if err != nil {
		return 0, err
	}
	if len(blocking) > 0 {
		c.recorder.Eventf(node, corev1.EventTypeNormal, "AwaitingVolumeDetachment", "Waiting on %d VolumeAttachments (first %s)", len(blocking), blocking[0].Name)
		log.FromContext(ctx).V(1).Info("drained; waiting for volumes to detach", "node", node.Name, "volumeAttachments", len(blocking))
		return drainRetry, nil
	}
	log.FromContext(ctx).V(1).Info("drained", "node", node.Name, "gracePeriodUp", expired)
	return 0, nil
}

func isDisruptedTaint(t corev1.Taint) bool {
	return t.Key == v1.DisruptedNoScheduleTaint.Key && t.Effect == v1.DisruptedNoScheduleTaint.Effect
}

// deadNode reports a node whose kubelet is not ready and whose instance the cloud
// reports gone: nothing runs there to drain, and waiting would never end.
func (c *Controller) deadNode(ctx context.Context, node *corev1.Node) (bool, error) {
	if node.Spec.ProviderID == "" || ready(node) {
		return false, nil
	}
	if _, err := c.cloud.Get(ctx, node.Spec.ProviderID); err != nil {
		if cloudprovider.IsNodeClaimNotFound(err) {
			log.FromContext(ctx).Info("not draining a node whose instance is gone", "node", node.Name, "providerID", node.Spec.ProviderID)
			return true, nil
		}
		return false, fmt.Errorf("looking up the instance %s of node %s: %w", node.Spec.ProviderID, node.Name, err)
	}
	return false, nil
}

func ready(node *corev1.Node) bool {
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// apply carries out one drain pass.
func (c *Controller) apply(ctx context.Context, node *corev1.Node, plan Drain, now time.Time, reason string) error {
	log.FromContext(ctx).V(1).Info("draining", "node", node.Name, "evicting", len(plan.Evict), "deleting", len(plan.Delete),
		"waiting", len(plan.Waiting), "why", plan.Why)
	for _, p := range plan.Evict {
		if c.backoff.due(p.UID, now) {
			c.evict(ctx, node, p, now, reason)
		}
	}
	for _, p := range plan.Delete {
		// terminationGracePeriod is up: the pod goes now, PDB or not.
		if err := c.kube.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting pod %s/%s from node %s: %w", p.Namespace, p.Name, node.Name, err)
		}
		c.recorder.Eventf(p, corev1.EventTypeNormal, ReasonDisrupted, "Deleted at once: node %s reached its terminationGracePeriod; its PodDisruptionBudget and %s are bypassed",
			node.Name, v1.DoNotDisruptAnnotationKey)
	}
	for _, p := range plan.Early {
		// Its own grace period would outlast the node's: it goes now, with what
		// time is left.
		grace := int64(plan.EarlyGrace / time.Second)
		if err := c.kube.Delete(ctx, p, client.GracePeriodSeconds(grace)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting pod %s/%s from node %s: %w", p.Namespace, p.Name, node.Name, err)
		}
		c.recorder.Eventf(p, corev1.EventTypeNormal, ReasonDisrupted,
			"Deleted with a grace period of %ds, the time left before node %s reaches its terminationGracePeriod; its PodDisruptionBudget and %s are bypassed",
			grace, node.Name, v1.DoNotDisruptAnnotationKey)
	}
	if len(plan.Waiting) > 0 {
		p := plan.Waiting[0]
		c.recorder.Eventf(node, corev1.EventTypeWarning, ReasonFailedDraining, "Failed to drain node: %d pods are waiting to be evicted, first %s/%s (%s)",
			len(plan.Waiting), p.Namespace, p.Name, plan.Why)
	}
	return nil
}

// blockingAttachments lists the node's VolumeAttachments that its termination waits
// for (see BlockingAttachments); pods are the node's pods.
func (c *Controller) blockingAttachments(ctx context.Context, node *corev1.Node, pods []corev1.Pod, now time.Time) ([]*storagev1.VolumeAttachment, error) {
	attachments := &storagev1.VolumeAttachmentList{}
	if err := c.kube.List(ctx, attachments, client.MatchingFields{NodeNameIndex: node.Name}); err != nil {
		return nil, fmt.Errorf("listing the VolumeAttachments of node %s: %w", node.Name, err)
	}
	if len(attachments.Items) == 0 {
		return nil, nil
	}
	kept := map[string]bool{}
	for i := range pods {
		p := &pods[i]
		if !StaysOnNode(p, now) {
			continue
		}
		for _, claim := range claimNames(p) {
			pvc := &corev1.PersistentVolumeClaim{}
			if err := c.live.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: claim}, pvc); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("reading PersistentVolumeClaim %s/%s of pod %s: %w", p.Namespace, claim, p.Name, err)
			}
			if pvc.Spec.VolumeName != "" {
				kept[pvc.Spec.VolumeName] = true
			}
		}
	}
	return BlockingAttachments(attachments.Items, kept), nil
}

// claimNames are the PersistentVolumeClaims a pod's volumes use, generic ephemeral
// volumes included (their claim is named <pod>-<volume>).
func claimNames(p *corev1.Pod) []string {
	var out []string
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, p.Name+"-"+v.Name)
		}
	}
	return out
}

// terminate has the cloud terminate the claim's instance and reports whether it is
// gone. Termination is asked for once (the claim then carries InstanceTerminating);
// later passes only look, until the cloud reports the instance not found.
func (c *Controller) terminate(ctx context.Context, nc *v1.NodeClaim) (bool, error) {
	if nc.Status.ProviderID == "" {
		return true, nil // never launched; a launch that lands later is abandoned by the lifecycle controller
	}
	if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInstanceTerminating) {
		if err := c.cloud.Delete(ctx, nc); err != nil {
			if cloudprovider.IsNodeClaimNotFound(err) {
				return true, nil
			}
			return false, fmt.Errorf("terminating the instance %s of nodeclaim %s: %w", nc.Status.ProviderID, nc.Name, err)
		}
		base := nc.DeepCopy()
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeInstanceTerminating,
			Status: metav1.ConditionTrue, Reason: "InstanceTerminating", Message: "the cloud is terminating the instance",
			ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())})
		if err := c.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
			return false, client.IgnoreNotFound(err)
		}
	}
	return c.instanceGone(ctx, nc.Status.ProviderID, nc.Name)
}

// terminateUnclaimed terminates the instance of a node without a claim, if the
// provider has it and manages it, and reports whether it is gone (or not ours).
func (c *Controller) terminateUnclaimed(ctx context.Context, node *corev1.Node) (bool, error) {
	inst, err := c.cloud.Get(ctx, node.Spec.ProviderID)
	if err != nil {
		if cloudprovider.IsNodeClaimNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("looking up the instance %s of node %s: %w", node.Spec.ProviderID, node.Name, err)
	}
	// A provider finds only instances it launched; one that says which NodeClass
	// it came from must name a kind the provider manages.
	if inst.Spec.NodeClassRef != nil && !cloudprovider.Manages(c.cloud, inst) {
		return true, nil
	}
	if err := c.cloud.Delete(ctx, inst); err != nil {
		if cloudprovider.IsNodeClaimNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("terminating the instance %s of node %s: %w", node.Spec.ProviderID, node.Name, err)
	}
	return c.instanceGone(ctx, node.Spec.ProviderID, node.Name)
}

// instanceGone asks the cloud whether the instance is gone; owner names whose it is.
func (c *Controller) instanceGone(ctx context.Context, providerID, owner string) (bool, error) {
	if _, err := c.cloud.Get(ctx, providerID); err != nil {
		if cloudprovider.IsNodeClaimNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("looking up the instance %s of %s: %w", providerID, owner, err)
	}
	return false, nil
}

func (c *Controller) removeFinalizer(ctx context.Context, o client.Object) error {
	if !controllerutil.ContainsFinalizer(o, v1.TerminationFinalizer) {
		return nil
	}
	patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
	controllerutil.RemoveFinalizer(o, v1.TerminationFinalizer)
	return client.IgnoreNotFound(c.kube.Patch(ctx, o, patch))
}

func (c *Controller) evict(ctx context.Context, node *corev1.Node, p *corev1.Pod, now time.Time, reason string) {
	eviction := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace}}
	err := c.kube.SubResource("eviction").Create(ctx, p, eviction)
	evictionRequested(err)
	if err == nil {
		PodsDrained.WithLabelValues(reason).Inc()
		c.recorder.Eventf(p, corev1.EventTypeNormal, ReasonEvicted, "Evicted pod: %s", evictedBecause(reason))
	}
	switch {
	case err == nil, apierrors.IsNotFound(err):
		c.backoff.forget(p.UID)
	case apierrors.IsTooManyRequests(err):
		// A PodDisruptionBudget said no: ask again after a backoff.
		next := c.backoff.refused(p.UID, now)
		c.recorder.Eventf(node, corev1.EventTypeWarning, ReasonFailedDraining, "Failed to drain node: evicting pod %s/%s violates a PodDisruptionBudget, retrying in %s: %v",
			p.Namespace, p.Name, next.Sub(now).Round(time.Second), err)
	default:
		log.FromContext(ctx).Error(err, "evicting", "pod", client.ObjectKeyFromObject(p))
	}
}

// Event reasons, Karpenter's.
const (
	// ReasonEvicted, on a pod the drain evicted.
	ReasonEvicted = "Evicted"
	// ReasonDisrupted, on a pod deleted past its PodDisruptionBudget because its
	// node's terminationGracePeriod runs out.
	ReasonDisrupted = "Disrupted"
	// ReasonFailedDraining, on a node whose drain waits: pods not evictable yet
	// (do-not-disrupt, terminating) or an eviction a PodDisruptionBudget refused.
	ReasonFailedDraining = "FailedDraining"
	// ReasonTerminationGracePeriodExpiring, on a node whose drain has a deadline.
	ReasonTerminationGracePeriodExpiring = "TerminationGracePeriodExpiring"
)

// evictedBecause is why a pod was evicted, as the event says it: its node's
// disruption reason, if recorded.
func evictedBecause(reason string) string {
	if reason == "" {
		return "the node is being terminated"
	}
	return reason
}
