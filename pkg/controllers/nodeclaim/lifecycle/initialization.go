package lifecycle

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
)

// InitializationTimeout bounds how long a registered node may take to initialize
// (turn Ready, shed its startup taints, show its extended resources), measured from
// registration: the window Karpenter gives a node to become ready, as long as the
// one for registration. A node stuck past it is removed and its pods planned again.
const InitializationTimeout = 15 * time.Minute

// initializationDeadline is when a registered claim must be initialized by; false
// when it is initialized already, or not registered.
func initializationDeadline(nc *v1.NodeClaim) (time.Time, bool) {
	if meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
		return time.Time{}, false
	}
	registered := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeRegistered)
	if registered == nil || registered.Status != metav1.ConditionTrue {
		return time.Time{}, false
	}
	return registered.LastTransitionTime.Add(InitializationTimeout), true
}

// awaitInitialization comes back at the claim's initialization deadline, and past
// it gives the claim up: its instance is terminated, and its pods, which the
// kube-scheduler never bound to a node that is not ready, are planned again.
func (c *Controller) awaitInitialization(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	deadline, ok := initializationDeadline(nc)
	if !ok {
		return reconcile.Result{}, nil
	}
	if left := deadline.Sub(c.clock.Now()); left > 0 {
		return reconcile.Result{RequeueAfter: left}, nil
	}
	why := "not initialized"
	if cond := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeInitialized); cond != nil && cond.Message != "" {
		why = cond.Message
	}
	message := fmt.Sprintf("Node %s not initialized %s after registration (%s); deleting the NodeClaim", nc.Status.NodeName, InitializationTimeout, why)
	return reconcile.Result{}, c.giveUp(ctx, nc, v1.ConditionTypeInitialized, nodeclaim.ReasonInitializationTimedOut, message)
}

// giveUp records on the claim why it is given up, then deletes it. The condition
// is set anew, so its transition time says when the claim was given up.
func (c *Controller) giveUp(ctx context.Context, nc *v1.NodeClaim, condition, reason, message string) error {
	status := client.MergeFrom(nc.DeepCopy())
	meta.RemoveStatusCondition(&nc.Status.Conditions, condition)
	c.setCondition(nc, condition, metav1.ConditionFalse, reason, message)
	if err := c.patchStatus(ctx, nc, status); err != nil {
		return client.IgnoreNotFound(err)
	}
	c.recorder.Event(nc, corev1.EventTypeWarning, reason, message)
	log.FromContext(ctx).Info("giving up a nodeclaim", "nodeclaim", nc.Name, "reason", reason, "message", message)
	return client.IgnoreNotFound(c.kube.Delete(ctx, nc))
}
