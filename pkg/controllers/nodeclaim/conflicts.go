package nodeclaim

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// QuietConflicts wraps r so that a conflict (a write from a stale cached copy,
// common while several controllers update one NodeClaim) requeues at once
// instead of being logged as a reconcile error with a stack trace: it is the
// optimistic lock doing its job, not a fault.
func QuietConflicts(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		res, err := r.Reconcile(ctx, req)
		if apierrors.IsConflict(err) {
			return reconcile.Result{Requeue: true}, nil
		}
		return res, err
	})
}
