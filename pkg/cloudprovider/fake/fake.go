// Package fake is an in-memory CloudProvider for unit tests: it launches
// "instances" instantly, records every call, and fails on demand.
package fake

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// CloudProvider is safe for concurrent use.
type CloudProvider struct {
	mu        sync.Mutex
	types     []*scheduling.InstanceType
	instances map[string]*v1.NodeClaim // by provider ID
	// tokens maps each claim to its instance's provider ID, as a real cloud's
	// client token makes a retried launch return the first one.
	tokens map[string]string
	next   int

	// Calls records the method names called, in order.
	Calls []string
	// NextErrors are returned, one per call, before the method does its work;
	// keyed by method name ("Create", "Delete", …).
	NextErrors map[string][]error
	// Unavailable offerings make Create fail with InsufficientCapacityError when no
	// other allowed offering is left.
	Unavailable map[cloudprovider.UnavailableOffering]bool
	// Drifted marks provider IDs whose NodeClass drifted.
	Drifted map[string]cloudprovider.DriftReason
}

var _ cloudprovider.CloudProvider = (*CloudProvider)(nil)

// New returns a provider offering types.
func New(types []*scheduling.InstanceType) *CloudProvider {
	return &CloudProvider{types: types, instances: map[string]*v1.NodeClaim{}, tokens: map[string]string{},
		NextErrors: map[string][]error{}, Unavailable: map[cloudprovider.UnavailableOffering]bool{},
		Drifted: map[string]cloudprovider.DriftReason{}}
}

func (c *CloudProvider) call(name string) error {
	c.Calls = append(c.Calls, name)
	if errs := c.NextErrors[name]; len(errs) > 0 {
		c.NextErrors[name] = errs[1:]
		return errs[0]
	}
	return nil
}

// Create launches the cheapest allowed, available offering; launching again for a
// claim whose instance still runs returns that instance.
func (c *CloudProvider) Create(_ context.Context, claim *v1.NodeClaim) (*v1.NodeClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("Create"); err != nil {
		return nil, err
	}
	if inst, ok := c.instances[c.tokens[token(claim)]]; ok {
		out := claim.DeepCopy()
		if out.Labels == nil {
			out.Labels = map[string]string{}
		}
		for _, k := range []string{v1.LabelInstanceType, v1.LabelZone, v1.CapacityTypeLabelKey} {
			out.Labels[k] = inst.Labels[k]
		}
		out.Status = *inst.Status.DeepCopy()
		return out, nil
	}
	reqs, err := scheduling.FromNodePool(claim.Spec.Requirements, nil)
	if err != nil {
		return nil, fmt.Errorf("nodeclaim %s: %w", claim.Name, err)
	}
	var best *scheduling.InstanceType
	var bestOffer scheduling.Offering
	var tried []cloudprovider.UnavailableOffering
	for _, it := range c.types {
		if _, ok := reqs.Intersects(it.Requirements); !ok {
			continue
		}
		for _, o := range it.Offerings {
			if !o.Available || !allows(reqs, v1.LabelZone, o.Zone) || !allows(reqs, v1.CapacityTypeLabelKey, o.CapacityType) {
				continue
			}
			key := cloudprovider.UnavailableOffering{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}
			if c.Unavailable[key] {
				tried = append(tried, key)
				continue
			}
			if best == nil || o.Price < bestOffer.Price {
				best, bestOffer = it, o
			}
		}
	}
	if best == nil {
		return nil, &cloudprovider.InsufficientCapacityError{Offerings: tried}
	}
	c.next++
	out := claim.DeepCopy()
	out.Status.ProviderID = fmt.Sprintf("fake:///%s/i-%05d", bestOffer.Zone, c.next)
	out.Status.Capacity = best.Capacity.DeepCopy()
	out.Status.Allocatable = best.Allocatable()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	out.Labels[v1.LabelInstanceType] = best.Name
	out.Labels[v1.LabelZone] = bestOffer.Zone
	out.Labels[v1.CapacityTypeLabelKey] = bestOffer.CapacityType
	c.instances[out.Status.ProviderID] = out.DeepCopy()
	c.tokens[token(claim)] = out.Status.ProviderID
	return out, nil
}

// token is the claim's client token: its UID, or for a claim built in a test
// without an API server, its name.
func token(claim *v1.NodeClaim) string {
	if claim.UID != "" {
		return "uid/" + string(claim.UID)
	}
	return "name/" + claim.Name
}

func allows(reqs scheduling.Requirements, key, value string) bool {
	r, ok := reqs.Get(key)
	return !ok || r.Has(value)
}

// Delete removes the instance.
func (c *CloudProvider) Delete(_ context.Context, claim *v1.NodeClaim) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("Delete"); err != nil {
		return err
	}
	if _, ok := c.instances[claim.Status.ProviderID]; !ok {
		return &cloudprovider.NodeClaimNotFoundError{ProviderID: claim.Status.ProviderID}
	}
	delete(c.instances, claim.Status.ProviderID)
	for t, id := range c.tokens {
		if id == claim.Status.ProviderID {
			delete(c.tokens, t)
		}
	}
	return nil
}

// Get returns the instance.
func (c *CloudProvider) Get(_ context.Context, providerID string) (*v1.NodeClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("Get"); err != nil {
		return nil, err
	}
	nc, ok := c.instances[providerID]
	if !ok {
		return nil, &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
	}
	return nc.DeepCopy(), nil
}

// List returns every instance, by provider ID.
func (c *CloudProvider) List(_ context.Context) ([]*v1.NodeClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("List"); err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(c.instances))
	for id := range c.instances {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]*v1.NodeClaim, len(ids))
	for i, id := range ids {
		out[i] = c.instances[id].DeepCopy()
	}
	return out, nil
}

// InstanceTypes returns the configured types with the offerings marked unavailable
// switched off.
func (c *CloudProvider) InstanceTypes(_ context.Context, _ *v1.NodePool) ([]*scheduling.InstanceType, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("InstanceTypes"); err != nil {
		return nil, err
	}
	out := make([]*scheduling.InstanceType, len(c.types))
	for i, it := range c.types {
		cp := *it
		cp.Offerings = slices.Clone(it.Offerings)
		for j, o := range cp.Offerings {
			if c.Unavailable[cloudprovider.UnavailableOffering{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}] {
				cp.Offerings[j].Available = false
			}
		}
		out[i] = &cp
	}
	return out, nil
}

// IsDrifted reports what Drifted says.
func (c *CloudProvider) IsDrifted(_ context.Context, claim *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("IsDrifted"); err != nil {
		return "", err
	}
	return c.Drifted[claim.Status.ProviderID], nil
}

// Name is "fake".
func (c *CloudProvider) Name() string { return "fake" }

// ProviderIDScheme is "fake", as in fake:///<zone>/i-00001.
func (c *CloudProvider) ProviderIDScheme() string { return "fake" }

// NodeClassKinds is tailor.sh/SimNodeClass, the kind the tests' claims name.
func (c *CloudProvider) NodeClassKinds() []schema.GroupKind {
	return []schema.GroupKind{{Group: "tailor.sh", Kind: "SimNodeClass"}}
}

// Instances is the number of running instances.
func (c *CloudProvider) Instances() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.instances)
}
