// Package cloudprovider is the boundary between Tailor and a cloud: launching and
// terminating instances for NodeClaims, listing them, and describing the instance
// types a NodePool may use. Each cloud is a subpackage (sim, aws); fake serves unit
// tests.
package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// InstanceType is a kind of node the cloud can launch (capacity, the labels it
// carries, its offerings); Offering is one zone and capacity type of it at a price.
// They are defined by the scheduling engine, which plans with them, and named here
// because a provider's InstanceTypes is where they come from.
type (
	InstanceType = scheduling.InstanceType
	Offering     = scheduling.Offering
)

// CloudProvider launches and terminates the instances behind NodeClaims.
type CloudProvider interface {
	// Create launches an instance for the claim, choosing among the instance types
	// and offerings its requirements allow, and returns the claim with status
	// (providerID, capacity, allocatable) and the labels of what was launched
	// (instance type, zone, capacity type). InsufficientCapacityError when no
	// allowed offering has capacity.
	Create(ctx context.Context, claim *v1.NodeClaim) (*v1.NodeClaim, error)
	// Delete terminates the claim's instance. NodeClaimNotFoundError once it is gone.
	Delete(ctx context.Context, claim *v1.NodeClaim) error
	// Get describes the instance with the provider ID. NodeClaimNotFoundError if none.
	Get(ctx context.Context, providerID string) (*v1.NodeClaim, error)
	// List describes every instance the provider manages for this cluster.
	List(ctx context.Context) ([]*v1.NodeClaim, error)
	// InstanceTypes lists what the NodePool may launch, with offerings and prices.
	InstanceTypes(ctx context.Context, pool *v1.NodePool) ([]*InstanceType, error)
	// IsDrifted reports why the claim's instance no longer matches its NodeClass,
	// or "" when it does.
	IsDrifted(ctx context.Context, claim *v1.NodeClaim) (DriftReason, error)
	// Name is the provider's name, e.g. "sim".
	Name() string
	// NodeClassKinds are the NodeClass kinds the provider launches from (e.g.
	// tailor.sh/SimNodeClass). A claim of any other kind belongs to another
	// controller (Karpenter itself, during a cut-over) and is never touched.
	NodeClassKinds() []schema.GroupKind
	// ProviderIDScheme is the scheme of the provider IDs of its instances ("sim"
	// for sim:///<zone>/<id>). A Node whose provider ID has another is another
	// cloud's, and never touched.
	ProviderIDScheme() string
}

// Manages reports whether the claim's NodeClass is a kind cp launches from: only
// those claims are launched, collected, drained, terminated or disrupted.
func Manages(cp CloudProvider, claim *v1.NodeClaim) bool {
	return ServesNodeClass(cp, claim.Spec.NodeClassRef)
}

// ManagesPool reports whether the NodePool's NodeClass is a kind cp launches from:
// another's NodePool (Karpenter's, in a cut-over) gets no claims, status or
// annotations from Tailor.
func ManagesPool(cp CloudProvider, pool *v1.NodePool) bool {
	return ServesNodeClass(cp, pool.Spec.Template.Spec.NodeClassRef)
}

// ServesNodeClass reports whether ref names a NodeClass kind cp launches from.
func ServesNodeClass(cp CloudProvider, ref *v1.NodeClassReference) bool {
	return ref != nil && slices.Contains(cp.NodeClassKinds(), schema.GroupKind{Group: ref.Group, Kind: ref.Kind})
}

// OwnsProviderID reports whether the provider ID is of cp's scheme: an instance
// cp could have launched. An empty provider ID is no one's.
func OwnsProviderID(cp CloudProvider, providerID string) bool {
	scheme, _, ok := strings.Cut(providerID, "://")
	return ok && scheme != "" && scheme == cp.ProviderIDScheme()
}

// DriftReason says why an instance drifted from its NodeClass.
type DriftReason string

// NodeClaimNotFoundError: the instance does not exist (any more).
type NodeClaimNotFoundError struct{ ProviderID string }

func (e *NodeClaimNotFoundError) Error() string {
	return fmt.Sprintf("instance %s not found", e.ProviderID)
}

// InsufficientCapacityError: none of the allowed offerings could be launched. The
// offerings tried are listed so they can be marked unavailable for a while.
type InsufficientCapacityError struct {
	Offerings []UnavailableOffering
}

// UnavailableOffering names one offering that had no capacity.
type UnavailableOffering struct {
	InstanceType, Zone, CapacityType string
}

func (e *InsufficientCapacityError) Error() string {
	return fmt.Sprintf("insufficient capacity for %d offerings", len(e.Offerings))
}

// NodeClassNotReadyError: the claim's NodeClass is missing or not ready.
type NodeClassNotReadyError struct {
	Kind, Name, Reason string
}

func (e *NodeClassNotReadyError) Error() string {
	return fmt.Sprintf("%s %s is not ready: %s", e.Kind, e.Name, e.Reason)
}

// IsNodeClaimNotFound reports a NodeClaimNotFoundError anywhere in err's chain.
func IsNodeClaimNotFound(err error) bool {
	var target *NodeClaimNotFoundError
	return errors.As(err, &target)
}

// IsInsufficientCapacity reports an InsufficientCapacityError in err's chain.
func IsInsufficientCapacity(err error) bool {
	var target *InsufficientCapacityError
	return errors.As(err, &target)
}

// IsNodeClassNotReady reports a NodeClassNotReadyError in err's chain.
func IsNodeClassNotReady(err error) bool {
	var target *NodeClassNotReadyError
	return errors.As(err, &target)
}

// NodeCoster is implemented by providers whose nodes cost more than their
// instances: the volumes and public addresses that come with each node. The
// scheduling engine adds the cost to every new node's price
// (scheduling.NodePool.NodeCost), so many small nodes are weighed at what they
// are billed.
type NodeCoster interface {
	NodeCost(ctx context.Context, pool *v1.NodePool) (scheduling.NodeCost, error)
}

// NodeCosts is cp's per-node costs, or nil when it bills nothing per node. cp
// must be the provider itself, not a decorator around it.
func NodeCosts(cp CloudProvider) func(context.Context, *v1.NodePool) (scheduling.NodeCost, error) {
	if coster, ok := cp.(NodeCoster); ok {
		return coster.NodeCost
	}
	return nil
}

// BootLogger is implemented by providers that can show what an instance printed
// while it booted (EC2's console output): when a node never registers, the last
// lines say why (a boot script that failed, a kubelet that refused its
// configuration) where nothing in the cluster can.
type BootLogger interface {
	BootLog(ctx context.Context, providerID string) (string, error)
}

// BootLogs is cp's boot log reader, or nil when it has none. cp must be the
// provider itself, not a decorator around it.
func BootLogs(cp CloudProvider) func(context.Context, string) (string, error) {
	if l, ok := cp.(BootLogger); ok {
		return l.BootLog
	}
	return nil
}

// Interruption is a provider's notice that an instance will be taken away: a spot
// reclaim, scheduled maintenance.
type Interruption struct {
	ProviderID string
	// At is when the instance goes.
	At   time.Time
	Kind string // KindSpotInterruption, "ScheduledMaintenance", …
	// RecordOnly notices (a spot rebalance recommendation) are recorded on the
	// NodeClaim; the instance is not going away.
	RecordOnly bool
}

// KindSpotInterruption is the Kind of a spot interruption warning: the spot market
// takes the instance back, so its offering is short of capacity for a while.
const KindSpotInterruption = "SpotInterruption"

// InterruptionSource is implemented by providers that announce interruptions.
type InterruptionSource interface {
	Interruptions(ctx context.Context) ([]Interruption, error)
}
