// Package timeout wraps any CloudProvider so that every call has a deadline: a
// cloud API that hangs must not hold a controller's worker (and the claims queued
// behind it) for good.
//
// A Create that times out may still have launched its instance. That instance is
// not lost: providers launch idempotently per claim UID (a cloud API's client
// token; the sim cloud names the instance after the UID), so the lifecycle
// controller's retry gets it back rather than a second one; and if the claim goes
// instead (its launch timed out), garbage collection terminates the instance no
// claim owns.
//
// The deadline travels in the context: providers pass it to every request they
// make (the API server's clients and the cloud SDKs honour it).
package timeout

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

const (
	// CreateTimeout bounds a launch. A cloud takes seconds to accept one, the sim
	// cloud its NodeClass's launchDelay (which must stay below this); and it is
	// well inside the lifecycle's 5m LaunchTimeout, so a hung launch is retried
	// before its claim is given up.
	CreateTimeout = 3 * time.Minute
	// CallTimeout bounds every other call: Delete, Get, List, InstanceTypes,
	// IsDrifted, each one request or a few to a cloud API.
	CallTimeout = 30 * time.Second
)

// Timeouts are the deadlines of a decorated provider's calls.
type Timeouts struct {
	// Create bounds Create; Call every other call.
	Create, Call time.Duration
}

// Defaults are CreateTimeout and CallTimeout.
func Defaults() Timeouts {
	return Timeouts{Create: CreateTimeout, Call: CallTimeout}
}

// Decorate returns cp with every call bounded by t. A call that runs out of time
// fails with an error wrapping context.DeadlineExceeded (as cp returns it).
func Decorate(cp cloudprovider.CloudProvider, t Timeouts) cloudprovider.CloudProvider {
	return &decorator{cp: cp, t: t}
}

type decorator struct {
	cp cloudprovider.CloudProvider
	t  Timeouts
}

func (d *decorator) Create(ctx context.Context, claim *v1.NodeClaim) (*v1.NodeClaim, error) {
	ctx, cancel := context.WithTimeout(ctx, d.t.Create)
	defer cancel()
	return d.cp.Create(ctx, claim)
}

func (d *decorator) Delete(ctx context.Context, claim *v1.NodeClaim) error {
	ctx, cancel := context.WithTimeout(ctx, d.t.Call)
	defer cancel()
	return d.cp.Delete(ctx, claim)
}

func (d *decorator) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	ctx, cancel := context.WithTimeout(ctx, d.t.Call)
	defer cancel()
	return d.cp.Get(ctx, providerID)
}

func (d *decorator) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	ctx, cancel := context.WithTimeout(ctx, d.t.Call)
	defer cancel()
	return d.cp.List(ctx)
}

func (d *decorator) InstanceTypes(ctx context.Context, pool *v1.NodePool) ([]*scheduling.InstanceType, error) {
	ctx, cancel := context.WithTimeout(ctx, d.t.Call)
	defer cancel()
	return d.cp.InstanceTypes(ctx, pool)
}

func (d *decorator) IsDrifted(ctx context.Context, claim *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	ctx, cancel := context.WithTimeout(ctx, d.t.Call)
	defer cancel()
	return d.cp.IsDrifted(ctx, claim)
}

func (d *decorator) Name() string { return d.cp.Name() }

func (d *decorator) NodeClassKinds() []schema.GroupKind { return d.cp.NodeClassKinds() }

func (d *decorator) ProviderIDScheme() string { return d.cp.ProviderIDScheme() }
