// Package registrationhealth keeps each NodePool's NodeRegistrationHealthy
// condition, as Karpenter (v1.4 on) does: Unknown while no node of the NodePool has
// registered since the NodePool was created or last changed; False, with the reason
// and message, when a claim of the NodePool was launched but its node failed to
// register or to initialize in time (the lifecycle gave it up); True once a node
// registers. The latest outcome wins. The condition informs: it gates nothing, and a
// NodePool whose nodes do not register is still provisioned from.
package registrationhealth

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
)

// Reasons of the condition; False takes the reason the claim was given up for.
const (
	ReasonAwaitingRegistration = "AwaitingRegistration"
	ReasonHealthy              = v1.ConditionTypeNodeRegistrationHealthy
)

// conflictRetry is how soon a write that lost a race with another writer of the
// NodePool's status is tried again, on the newer copy.
const conflictRetry = time.Second

// Failure is a claim of the NodePool the lifecycle gave up.
type Failure struct {
	Claim, Reason, Message string
	// At is when it was given up.
	At time.Time
}

// Decide is the NodePool's condition given its current one (nil if it has none),
// its generation, when a node of it last registered (zero if none has) and its
// latest failure (nil if none), at now. Only what happened since the condition's
// last transition counts. Times come from the API (whole seconds): an outcome in
// the same second as the transition counts, and a failure in the same second as a
// registration wins, so the condition settles rather than flaps.
func Decide(current *metav1.Condition, generation int64, lastRegistered time.Time, failure *Failure, now time.Time) metav1.Condition {
	var cond metav1.Condition
	if current == nil || current.ObservedGeneration != generation {
		cond = metav1.Condition{Type: v1.ConditionTypeNodeRegistrationHealthy, Status: metav1.ConditionUnknown,
			Reason: ReasonAwaitingRegistration, Message: "no node of this NodePool has registered since it was created or changed",
			LastTransitionTime: metav1.NewTime(now)}
	} else {
		cond = *current
	}
	cond.ObservedGeneration = generation
	since := cond.LastTransitionTime.Time
	registered := !lastRegistered.IsZero() && !lastRegistered.Before(since)
	failed := failure != nil && !failure.At.Before(since)
	set := func(status metav1.ConditionStatus, reason, message string) {
		if cond.Status != status {
			cond.LastTransitionTime = metav1.NewTime(now)
		}
		cond.Status, cond.Reason, cond.Message = status, reason, message
	}
	switch {
	case failed && (!registered || !failure.At.Before(lastRegistered)):
		set(metav1.ConditionFalse, failure.Reason, fmt.Sprintf("NodeClaim %s: %s", failure.Claim, failure.Message))
	case registered:
		set(metav1.ConditionTrue, ReasonHealthy, "")
	}
	return cond
}

// FailureOf reports a claim the lifecycle gave up after its launch: its node did
// not register, or did not initialize, in time.
func FailureOf(nc *v1.NodeClaim) (Failure, bool) {
	for _, c := range nc.Status.Conditions {
		if c.Status == metav1.ConditionFalse && (c.Type == v1.ConditionTypeRegistered && c.Reason == nodeclaim.ReasonRegistrationTimedOut ||
			c.Type == v1.ConditionTypeInitialized && c.Reason == nodeclaim.ReasonInitializationTimedOut) {
			return Failure{Claim: nc.Name, Reason: c.Reason, Message: c.Message, At: c.LastTransitionTime.Time}, true
		}
	}
	return Failure{}, false
}

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodepools,verbs=get;list;watch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodepools/status,verbs=patch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch

// Controller keeps the condition.
type Controller struct {
	kube  client.Client
	cloud cloudprovider.CloudProvider
	clock clock.Clock

	mu sync.Mutex
	// failures holds each NodePool's latest failure, seen on the claim's events: a
	// claim given up may be gone before the NodePool is reconciled.
	failures map[string]Failure
	// written is the condition last written per NodePool. Another writer's merge
	// patch of the status can drop it (a merge patch replaces the whole list); it
	// is restored rather than started over as Unknown.
	written map[string]metav1.Condition
}

// NewController returns the controller; cloud says which NodePools are Tailor's.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, clk clock.Clock) *Controller {
	return &Controller{kube: kube, cloud: cloud, clock: clk, failures: map[string]Failure{}, written: map[string]metav1.Condition{}}
}

// Name is the controller's name.
func (c *Controller) Name() string { return "nodepool.registrationhealth" }

// Register adds the controller to mgr: a claim created, deleted, registered or
// given up reconciles its NodePool.
func (c *Controller) Register(_ context.Context, mgr ctrl.Manager) error {
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, r := range c.Observe(o.(*v1.NodeClaim)) {
			q.Add(r)
		}
	}
	return ctrl.NewControllerManagedBy(mgr).Named(c.Name()).
		For(&v1.NodePool{}).
		Watches(&v1.NodeClaim{}, handler.Funcs{
			CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				enqueue(e.Object, q)
			},
			UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if outcomeChanged(e.ObjectOld.(*v1.NodeClaim), e.ObjectNew.(*v1.NodeClaim)) {
					enqueue(e.ObjectNew, q)
				}
			},
			DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if nc, ok := e.Object.(*v1.NodeClaim); ok {
					enqueue(nc, q)
				}
			},
		}).
		Complete(c)
}

// outcomeChanged reports a claim that registered, or was given up, in this update:
// its other updates (pod events, its node's) say nothing new of the NodePool.
func outcomeChanged(old, updated *v1.NodeClaim) bool {
	_, failedBefore := FailureOf(old)
	_, failedNow := FailureOf(updated)
	return failedBefore != failedNow || meta.IsStatusConditionTrue(old.Status.Conditions, v1.ConditionTypeRegistered) !=
		meta.IsStatusConditionTrue(updated.Status.Conditions, v1.ConditionTypeRegistered)
}

// Observe notes what a claim says of its NodePool's registration health, and names
// the NodePool to reconcile.
func (c *Controller) Observe(nc *v1.NodeClaim) []reconcile.Request {
	pool := nc.Labels[v1.NodePoolLabelKey]
	if pool == "" || !cloudprovider.Manages(c.cloud, nc) {
		return nil
	}
	if f, ok := FailureOf(nc); ok {
		c.mu.Lock()
		if last, seen := c.failures[pool]; !seen || last.At.Before(f.At) {
			c.failures[pool] = f
		}
		c.mu.Unlock()
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: pool}}}
}

// Reconcile brings one NodePool's condition up to date.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		if apierrors.IsNotFound(err) {
			c.forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !c.managesPool(np) {
		return reconcile.Result{}, nil // another controller's NodePool
	}
	claims := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.MatchingLabels{v1.NodePoolLabelKey: np.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the nodeclaims of nodepool %s: %w", np.Name, err)
	}
	var lastRegistered time.Time
	for i := range claims.Items {
		nc := &claims.Items[i]
		if !cloudprovider.Manages(c.cloud, nc) {
			continue
		}
		if r := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeRegistered); r != nil && r.Status == metav1.ConditionTrue && r.LastTransitionTime.After(lastRegistered) {
			lastRegistered = r.LastTransitionTime.Time
		}
		c.Observe(nc) // a failure whose event this process did not see (a restart)
	}
	c.mu.Lock()
	failure, hasFailure := c.failures[np.Name]
	written, hasWritten := c.written[np.Name]
	c.mu.Unlock()
	current := meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeNodeRegistrationHealthy)
	if current == nil && hasWritten && written.ObservedGeneration == np.Generation {
		current = &written
	}
	var f *Failure
	if hasFailure {
		f = &failure
	}
	next := Decide(current, np.Generation, lastRegistered, f, c.clock.Now())
	if have := meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeNodeRegistrationHealthy); have != nil && sameCondition(*have, next) {
		return reconcile.Result{}, nil
	}
	base := np.DeepCopy()
	np.Status.Conditions = slices.DeleteFunc(np.Status.Conditions, func(c metav1.Condition) bool {
		return c.Type == v1.ConditionTypeNodeRegistrationHealthy
	})
	np.Status.Conditions = append(np.Status.Conditions, next)
	// The lock keeps this write from dropping a condition another controller wrote
	// meanwhile (the list is replaced whole).
	if err := c.kube.Status().Patch(ctx, np, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: conflictRetry}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("writing the %s condition of nodepool %s: %w", v1.ConditionTypeNodeRegistrationHealthy, np.Name, err))
	}
	c.mu.Lock()
	c.written[np.Name] = next
	c.mu.Unlock()
	return reconcile.Result{}, nil
}

func (c *Controller) forget(pool string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.failures, pool)
	delete(c.written, pool)
}

// managesPool reports whether the NodePool's NodeClass is one the provider
// launches from.
func (c *Controller) managesPool(np *v1.NodePool) bool {
	ref := np.Spec.Template.Spec.NodeClassRef
	return ref != nil && slices.Contains(c.cloud.NodeClassKinds(), schema.GroupKind{Group: ref.Group, Kind: ref.Kind})
}

// sameCondition compares what the API keeps of a condition (times to the second).
func sameCondition(a, b metav1.Condition) bool {
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message && a.ObservedGeneration == b.ObservedGeneration &&
		a.LastTransitionTime.Unix() == b.LastTransitionTime.Unix()
}
