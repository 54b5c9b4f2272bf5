package static

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=nodes;pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Controller keeps static NodePools at their replicas.
type Controller struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	recorder record.EventRecorder
}

// NewController returns the controller. Only NodePools of the NodeClass kinds
// cloud launches from are kept; another's (Karpenter's) are left to it.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, recorder record.EventRecorder) *Controller {
	return &Controller{kube: kube, cloud: cloud, recorder: recorder}
}

// Name is the controller's name.
func (c *Controller) Name() string { return "nodepool.static" }

// Register adds the controller to mgr: a NodePool, or a change to one of its
// NodeClaims or Nodes, reconciles the pool.
func (c *Controller) Register(_ context.Context, mgr ctrl.Manager) error {
	toPool := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		if pool := o.GetLabels()[v1.NodePoolLabelKey]; pool != "" {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: pool}}}
		}
		return nil
	})
	return ctrl.NewControllerManagedBy(mgr).Named(c.Name()).
		For(&v1.NodePool{}).
		Watches(&v1.NodeClaim{}, toPool).
		Watches(&corev1.Node{}, toPool).
		Complete(c)
}

// Reconcile brings one static NodePool to its replicas.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !np.IsStatic() || np.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	// Ready or not (Karpenter keeps its own NodePools' Ready), no claim made for it
	// would be launched, and its claims are not ours to delete.
	if !cloudprovider.ManagesPool(c.cloud, np) {
		log.FromContext(ctx).V(1).Info("leaving a static NodePool of another provider's NodeClass kind to its controller", "nodepool", klog.KObj(np))
		return reconcile.Result{}, nil
	}
	claims, err := c.gather(ctx, np)
	if err != nil {
		return reconcile.Result{}, err
	}
	d := Decide(*np.Spec.Replicas, nodeLimit(np), claims)
	if d.Held > 0 {
		limit := np.Spec.Limits["nodes"]
		c.recorder.Eventf(np, corev1.EventTypeWarning, "LimitReached",
			"spec.replicas is %d but spec.limits.nodes %s holds back %d NodeClaims", *np.Spec.Replicas, limit.String(), d.Held)
	}
	if d.Create > 0 {
		// A pool not Ready (its NodeClass missing, a template the API server refuses)
		// would have every claim refused; its Ready change reconciles it again.
		if ready, why := state.NodePoolReady(np); !ready {
			log.FromContext(ctx).V(1).Info("static NodePool short of replicas but not Ready", "nodepool", klog.KObj(np), "reason", why)
			d.Create = 0
		}
	}
	return reconcile.Result{}, c.act(ctx, np, d)
}

// gather reads the pool's claims, whether their nodes are being disrupted, and, only
// when the pool may have to shrink, the pods on their nodes.
func (c *Controller) gather(ctx context.Context, np *v1.NodePool) ([]Claim, error) {
	ncs := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, ncs, client.MatchingLabels{v1.NodePoolLabelKey: np.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("NodePool %s: listing its NodeClaims: %w", np.Name, err)
	}
	nodes := &corev1.NodeList{}
	if err := c.kube.List(ctx, nodes, client.MatchingLabels{v1.NodePoolLabelKey: np.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("NodePool %s: listing its Nodes: %w", np.Name, err)
	}
	disrupted := map[string]bool{} // by provider ID
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.Spec.ProviderID != "" && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == v1.DisruptedNoScheduleTaint.Key && t.Effect == v1.DisruptedNoScheduleTaint.Effect
		}) {
			disrupted[n.Spec.ProviderID] = true
		}
	}
	claims := make([]Claim, 0, len(ncs.Items))
	staying := 0
	for i := range ncs.Items {
		nc := &ncs.Items[i]
		cl := Claim{Name: nc.Name, Deleting: nc.DeletionTimestamp != nil,
			Disrupting:  nc.Status.ProviderID != "" && disrupted[nc.Status.ProviderID],
			Launched:    meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeLaunched),
			Registered:  meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeRegistered),
			Initialized: meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized),
			Created:     nc.CreationTimestamp.Time}
		if !cl.Deleting && !cl.Disrupting {
			staying++
		}
		claims = append(claims, cl)
	}
	if int64(staying) <= *np.Spec.Replicas {
		return claims, nil
	}
	pods := &corev1.PodList{}
	if err := c.kube.List(ctx, pods, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("NodePool %s: listing pods: %w", np.Name, err)
	}
	onNode := map[string]int{}
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Spec.NodeName != "" && scheduling.Reschedulable(p) {
			onNode[p.Spec.NodeName]++
		}
	}
	for i := range ncs.Items {
		if name := ncs.Items[i].Status.NodeName; name != "" {
			claims[i].Pods = onNode[name]
		}
	}
	return claims, nil
}

// act creates and deletes the claims, then waits until the cache shows it, so the
// next reconcile counts what this one did.
func (c *Controller) act(ctx context.Context, np *v1.NodePool, d Decision) error {
	if d.Create == 0 && len(d.Delete) == 0 {
		return nil
	}
	logger := log.FromContext(ctx).WithValues("nodepool", klog.KObj(np), "replicas", *np.Spec.Replicas)
	var errs []error
	var created []*v1.NodeClaim
	for range d.Create {
		nc, err := nodeclaim.FromTemplate(np)
		if err != nil {
			errs = append(errs, fmt.Errorf("NodePool %s: %w", np.Name, err))
			break
		}
		if err := c.kube.Create(ctx, nc); err != nil {
			errs = append(errs, fmt.Errorf("NodePool %s: creating a NodeClaim: %w", np.Name, err))
			break
		}
		created = append(created, nc)
	}
	if len(created) > 0 {
		logger.Info("created NodeClaims for a static NodePool", "count", len(created))
	}
	var deleted []string
	for _, name := range d.Delete {
		nc := &v1.NodeClaim{}
		nc.Name = name
		// Deletion goes through termination: the node is drained through the
		// Eviction API, so PodDisruptionBudgets hold; disruption budgets do not apply.
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("NodePool %s: deleting surplus NodeClaim %s: %w", np.Name, name, err))
			continue
		}
		deleted = append(deleted, name)
		c.recorder.Eventf(np, corev1.EventTypeNormal, "ScaledDown", "Deleting NodeClaim %s: spec.replicas is %d", name, *np.Spec.Replicas)
	}
	if len(deleted) > 0 {
		logger.Info("deleting surplus NodeClaims of a static NodePool", "nodeclaims", deleted)
	}
	return errors.Join(append(errs, c.waitForCache(ctx, created, deleted))...)
}

func (c *Controller) waitForCache(ctx context.Context, created []*v1.NodeClaim, deleted []string) error {
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, nc := range created {
			if err := c.kube.Get(ctx, client.ObjectKeyFromObject(nc), &v1.NodeClaim{}); apierrors.IsNotFound(err) {
				return false, nil
			} else if err != nil {
				return false, err
			}
		}
		for _, name := range deleted {
			got := &v1.NodeClaim{}
			if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, got); err == nil && got.DeletionTimestamp == nil {
				return false, nil
			} else if client.IgnoreNotFound(err) != nil {
				return false, err
			}
		}
		return true, nil
	})
}

// nodeLimit is limits.nodes, or nil when the pool sets none.
func nodeLimit(np *v1.NodePool) *int64 {
	q, ok := np.Spec.Limits["nodes"]
	if !ok {
		return nil
	}
	n := q.Value()
	return &n
}
