// Package podevents records on each NodeClaim when a pod last arrived on or left its
// node (status.lastPodEventTime): consolidation waits consolidateAfter from then, so
// a node that is busy changing is left alone.
package podevents

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Dedupe is the resolution of lastPodEventTime: a busier node is written at most
// this often.
const Dedupe = 5 * time.Second

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// Controller is the pod events controller. Its requests name Nodes.
type Controller struct {
	kube  client.Client
	clock clock.Clock
}

// NewController returns the controller.
func NewController(kube client.Client, clk clock.Clock) *Controller {
	return &Controller{kube: kube, clock: clk}
}

// Name is the controller's name.
func (c *Controller) Name() string { return "nodeclaim.podevents" }

// Register adds the controller to mgr: a pod bound to a node, finishing, or deleted
// from one queues that node.
func (c *Controller) Register(_ context.Context, mgr ctrl.Manager) error {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], p *corev1.Pod) {
		if p.Spec.NodeName != "" && !scheduling.IsDaemonSetPod(p) {
			q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Spec.NodeName}})
		}
	}
	return ctrl.NewControllerManagedBy(mgr).Named(c.Name()).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Pod{}, handler.TypedFuncs[*corev1.Pod, reconcile.Request]{
			CreateFunc: func(_ context.Context, e event.TypedCreateEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				enqueue(q, e.Object)
			},
			UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				bound := e.ObjectOld.Spec.NodeName == "" && e.ObjectNew.Spec.NodeName != ""
				finished := !scheduling.IsTerminal(e.ObjectOld) && scheduling.IsTerminal(e.ObjectNew)
				terminating := e.ObjectOld.DeletionTimestamp == nil && e.ObjectNew.DeletionTimestamp != nil
				if bound || finished || terminating {
					enqueue(q, e.ObjectNew)
				}
			},
			DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				enqueue(q, e.Object)
			},
		})).
		Complete(c)
}

// lastStamp is when the claim's last pod event was stamped. A new node's pods
// arrive in a burst as it comes up, before and just after the claim records
// that; its initialization stands for them (consolidation counts from the later
// of the two), so the burst costs one write, at its end, not two.
func lastStamp(nc *v1.NodeClaim, now time.Time) time.Time {
	if !nc.Status.LastPodEventTime.IsZero() {
		return nc.Status.LastPodEventTime.Time
	}
	if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeInitialized); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return now // not initialized yet: look again in a while
}

// Reconcile stamps the node's claim.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	claims := &v1.NodeClaimList{}
	if node.Spec.ProviderID == "" {
		return reconcile.Result{}, nil
	}
	if err := c.kube.List(ctx, claims, client.MatchingFields{nodeclaim.ProviderIDIndex: node.Spec.ProviderID}); err != nil {
		return reconcile.Result{}, err
	}
	now := c.clock.Now()
	if len(claims.Items) == 0 {
		if _, ours := node.Labels[v1.NodePoolLabelKey]; ours {
			// A Node is registered, and takes pods, as soon as it appears; its
			// claim's launch write may not be cached yet. Look again then.
			return reconcile.Result{RequeueAfter: Dedupe}, nil
		}
		return reconcile.Result{}, nil
	}
	var res reconcile.Result
	for i := range claims.Items {
		nc := &claims.Items[i]
		if since := now.Sub(lastStamp(nc, now)); since < Dedupe {
			// Stamped a moment ago (or the node is new): stamp when the window
			// ends, so the last event of a burst is not lost.
			res.RequeueAfter = Dedupe - since
			continue
		}
		patch := client.MergeFrom(nc.DeepCopy())
		nc.Status.LastPodEventTime = metav1.NewTime(now)
		if err := c.kube.Status().Patch(ctx, nc, patch); client.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		}
	}
	return res, nil
}
