package timeout

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/cloudprovider/fake"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// deadlines is a cloud that records the deadline each call was given.
type deadlines struct {
	*fake.CloudProvider
	got map[string]time.Time
}

func (d *deadlines) record(ctx context.Context, method string) {
	if at, ok := ctx.Deadline(); ok {
		d.got[method] = at
	}
}

func (d *deadlines) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	d.record(ctx, "Create")
	return d.CloudProvider.Create(ctx, nc)
}

func (d *deadlines) Delete(ctx context.Context, nc *v1.NodeClaim) error {
	d.record(ctx, "Delete")
	return d.CloudProvider.Delete(ctx, nc)
}

func (d *deadlines) Get(ctx context.Context, id string) (*v1.NodeClaim, error) {
	d.record(ctx, "Get")
	return d.CloudProvider.Get(ctx, id)
}

func (d *deadlines) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	d.record(ctx, "List")
	return d.CloudProvider.List(ctx)
}

func (d *deadlines) InstanceTypes(ctx context.Context, pool *v1.NodePool) ([]*scheduling.InstanceType, error) {
	d.record(ctx, "InstanceTypes")
	return d.CloudProvider.InstanceTypes(ctx, pool)
}

func (d *deadlines) IsDrifted(ctx context.Context, nc *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	d.record(ctx, "IsDrifted")
	return d.CloudProvider.IsDrifted(ctx, nc)
}

func claim() *v1.NodeClaim {
	return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "uid-a"},
		Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: "tailor.sh", Kind: "SimNodeClass", Name: "default"}}}
}

// Every call reaches the provider with a deadline: Create's, or the shorter one of
// the others.
func TestEveryCallHasADeadline(t *testing.T) {
	inner := &deadlines{CloudProvider: fake.New(schedtest.SyntheticTypes(2)), got: map[string]time.Time{}}
	cp := Decorate(inner, Defaults())
	ctx := t.Context()
	calls := map[string]func() error{
		"Create": func() error {
			_, err := cp.Create(ctx, claim())
			return err
		},
		"Get": func() error {
			_, err := cp.Get(ctx, "fake:///missing")
			if cloudprovider.IsNodeClaimNotFound(err) {
				return nil
			}
			return err
		},
		"List": func() error {
			_, err := cp.List(ctx)
			return err
		},
		"InstanceTypes": func() error {
			_, err := cp.InstanceTypes(ctx, &v1.NodePool{})
			return err
		},
		"IsDrifted": func() error {
			_, err := cp.IsDrifted(ctx, claim())
			return err
		},
		"Delete": func() error {
			err := cp.Delete(ctx, &v1.NodeClaim{Status: v1.NodeClaimStatus{ProviderID: "fake:///missing"}})
			if cloudprovider.IsNodeClaimNotFound(err) {
				return nil
			}
			return err
		},
	}
	for method, call := range calls {
		want := CallTimeout
		if method == "Create" {
			want = CreateTimeout
		}
		// The deadline is set between these two readings of the clock, want after.
		before := time.Now()
		if err := call(); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		after := time.Now()
		at, ok := inner.got[method]
		if !ok {
			t.Errorf("%s reached the provider with no deadline", method)
			continue
		}
		if at.Before(before.Add(want)) || at.After(after.Add(want)) {
			t.Errorf("%s: deadline %s after the call, want %s", method, at.Sub(before), want)
		}
	}
	if cp.Name() != "fake" || len(cp.NodeClassKinds()) != 1 {
		t.Errorf("the decorator changed the provider: %q %v", cp.Name(), cp.NodeClassKinds())
	}
}

// hangsAfterLaunch is a cloud that launches, then does not answer: the reply is
// lost, as when a cloud API hangs after accepting the request.
type hangsAfterLaunch struct {
	*fake.CloudProvider
	hang bool
}

func (h *hangsAfterLaunch) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	launched, err := h.CloudProvider.Create(ctx, nc)
	if err != nil || !h.hang {
		return launched, err
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// A Create that runs out of time returns, with the deadline in its error; the
// instance it launched is not leaked: the retry, with the same claim UID, gets that
// instance back (and were the claim deleted instead, garbage collection would
// terminate the instance no claim owns).
func TestHungCreateTimesOutAndTheRetryFindsItsInstance(t *testing.T) {
	inner := &hangsAfterLaunch{CloudProvider: fake.New(schedtest.SyntheticTypes(2)), hang: true}
	cp := Decorate(inner, Timeouts{Create: time.Millisecond, Call: time.Millisecond})
	hung := make(chan error, 1)
	go func() {
		_, err := cp.Create(t.Context(), claim())
		hung <- err
	}()
	select {
	case err := <-hung:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("hung Create: %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(time.Minute): // a bound on the wait, not on the timeout
		t.Fatal("a hung Create had not returned after a minute: it has no deadline")
	}
	inner.hang = false
	launched, err := cp.Create(t.Context(), claim())
	if err != nil {
		t.Fatal(err)
	}
	instances, err := inner.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(instances) != 1 || instances[0].Status.ProviderID != launched.Status.ProviderID {
		t.Errorf("instances %d after a timed-out launch and its retry (got %s); want the one launched first", len(instances), launched.Status.ProviderID)
	}
}
