package disruption

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A command's taints and deletes outlast a flaky API server: passing failures are
// retried, a missing object or a refusal is not.
func TestRetryWrite(t *testing.T) {
	nodes := schema.GroupResource{Resource: "nodes"}
	unavailable := apierrors.NewServiceUnavailable("etcd is busy")
	for _, tc := range []struct {
		name      string
		errs      []error // returned by the write, one per call, then nil
		wantCalls int
		wantErr   bool
	}{
		{name: "succeeds at once", wantCalls: 1},
		{name: "two 503s, then done", errs: []error{unavailable, apierrors.NewTimeoutError("slow", 1)}, wantCalls: 3},
		{name: "a conflict, then done", errs: []error{apierrors.NewConflict(nodes, "n", errors.New("changed"))}, wantCalls: 2},
		{name: "not found is final", errs: []error{apierrors.NewNotFound(nodes, "n")}, wantCalls: 1, wantErr: true},
		{name: "forbidden is final", errs: []error{apierrors.NewForbidden(nodes, "n", errors.New("no"))}, wantCalls: 1, wantErr: true},
		{name: "gives up after four tries", errs: []error{unavailable, unavailable, unavailable, unavailable, unavailable}, wantCalls: 4, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := retryWrite(context.Background(), func() error {
				calls++
				if calls <= len(tc.errs) {
					return tc.errs[calls-1]
				}
				return nil
			})
			if calls != tc.wantCalls || (err != nil) != tc.wantErr {
				t.Fatalf("%d calls, err %v; want %d calls, error %v", calls, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
}
