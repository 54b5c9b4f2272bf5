package nodeclaim

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestQuietConflicts(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Group: "karpenter.sh", Resource: "nodeclaims"}, "a", errors.New("modified"))
	other := errors.New("cloud down")
	for _, tc := range []struct {
		name    string
		res     reconcile.Result
		err     error
		want    reconcile.Result
		wantErr error
	}{
		{"conflict", reconcile.Result{}, conflict, reconcile.Result{Requeue: true}, nil},
		{"wrapped conflict", reconcile.Result{}, fmt.Errorf("updating status: %w", conflict), reconcile.Result{Requeue: true}, nil},
		{"other error", reconcile.Result{}, other, reconcile.Result{}, other},
		{"success", reconcile.Result{RequeueAfter: time.Second}, nil, reconcile.Result{RequeueAfter: time.Second}, nil},
	} {
		r := QuietConflicts(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return tc.res, tc.err }))
		got, err := r.Reconcile(context.Background(), reconcile.Request{})
		if got != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
			t.Errorf("%s: got %+v, %v; want %+v, %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}
