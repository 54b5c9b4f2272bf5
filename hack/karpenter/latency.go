package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/scheduling"
)

// Draws is what the benchmark hands over of the sim cloud's realistic latency
// model (pkg/cloudprovider/sim, LatencyModel): the n-th launch's and the n-th API
// call's draw, in that order, for one NodeClass and seed. Durations are in
// nanoseconds. Past the end, the draws start again from the first.
type Draws struct {
	Launches []Launch        `json:"launches"`
	API      []time.Duration `json:"api"`
}

// Launch is one launch's draw: how long the launch call takes, how long after it
// the instance's Node registers, and whether the offering it would take has just
// run out of capacity.
type Launch struct {
	Delay         time.Duration `json:"delay"`
	Registration  time.Duration `json:"registration"`
	OutOfCapacity bool          `json:"outOfCapacity"`
}

func readDraws(path string) (*Draws, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &Draws{}
	if err := json.Unmarshal(data, d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(d.Launches) == 0 || len(d.API) == 0 {
		return nil, fmt.Errorf("%s: want launches and api draws", path)
	}
	return d, nil
}

// outOfCapacityFor is how long an offering that ran out mid-launch stays out: the
// sim cloud's sim.OutOfCapacityFor.
const outOfCapacityFor = 3 * time.Minute

// latencyCloud is Karpenter's kwok cloud provider timed as the sim cloud's
// realistic profile times Tailor's, doing what the sim cloud does at the same
// points:
//   - Create waits the launch's delay; when the draw says the offering ran out, it
//     fails with an insufficient-capacity error, leaves no instance, and the
//     offering (the cheapest the claim allows, as the sim cloud takes) is shown
//     unavailable for three minutes; otherwise kwok's own Create launches, and the
//     Node it creates (its registration) waits until the registration draw has
//     passed since the launch call returned;
//   - Get and Delete each wait an API call's draw.
//
// Everything else is kwok's own provider, called as a library.
type latencyCloud struct {
	kwok.CloudProvider
	kube  client.Client
	types []*cloudprovider.InstanceType
	draws *Draws
	clock clock.Clock

	mu              sync.Mutex
	launches, calls int
	out             map[offeringKey]time.Time
	// marked is types with the offerings in out unavailable, made when out changes.
	marked []*cloudprovider.InstanceType
}

type offeringKey struct{ instanceType, zone, capacityType string }

func newLatencyCloud(kube client.Client, types []*cloudprovider.InstanceType, draws *Draws, clk clock.Clock) *latencyCloud {
	registering := registeringClient{kube}
	return &latencyCloud{CloudProvider: *kwok.NewCloudProvider(context.Background(), registering, types),
		kube: registering, types: types, draws: draws, clock: clk, out: map[offeringKey]time.Time{}}
}

func (c *latencyCloud) nextLaunch() Launch {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.draws.Launches[c.launches%len(c.draws.Launches)]
	c.launches++
	return l
}

func (c *latencyCloud) nextCall() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.draws.API[c.calls%len(c.draws.API)]
	c.calls++
	return d
}

// current is the instance types with the offerings out of capacity now shown
// unavailable.
func (c *latencyCloud) current() []*cloudprovider.InstanceType {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for k, until := range c.out {
		if !now.Before(until) {
			delete(c.out, k)
			c.marked = nil
		}
	}
	if len(c.out) == 0 {
		return c.types
	}
	if c.marked != nil {
		return c.marked
	}
	c.marked = make([]*cloudprovider.InstanceType, len(c.types))
	for i, it := range c.types {
		c.marked[i] = it
		if !slices.ContainsFunc(it.Offerings, func(o *cloudprovider.Offering) bool { return c.isOut(it.Name, o) }) {
			continue
		}
		offerings := make(cloudprovider.Offerings, len(it.Offerings))
		for j, o := range it.Offerings {
			offerings[j] = o
			if c.isOut(it.Name, o) {
				cp := *o
				cp.Available = false
				offerings[j] = &cp
			}
		}
		c.marked[i] = &cloudprovider.InstanceType{Name: it.Name, Requirements: it.Requirements, Offerings: offerings,
			Capacity: it.Capacity, DynamicResources: it.DynamicResources, Overhead: it.Overhead}
	}
	return c.marked
}

func (c *latencyCloud) isOut(typeName string, o *cloudprovider.Offering) bool {
	_, ok := c.out[offeringKey{typeName, o.Zone(), o.CapacityType()}]
	return ok
}

func (c *latencyCloud) runOut(k offeringKey, until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out[k] = until
	c.marked = nil
}

// GetInstanceTypes is kwok's catalog, with the offerings out of capacity
// unavailable.
func (c *latencyCloud) GetInstanceTypes(context.Context, *v1.NodePool) ([]*cloudprovider.InstanceType, error) {
	return c.current(), nil
}

// Create launches as kwok does, after the launch's delay, or fails for
// insufficient capacity as the draw says.
func (c *latencyCloud) Create(ctx context.Context, nodeClaim *v1.NodeClaim) (*v1.NodeClaim, error) {
	types := c.current()
	claim, cheapest := available(types, nodeClaim)
	if cheapest == nil {
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("nodeclaim %s: no offering of its instance types is available", nodeClaim.Name))
	}
	launch := c.nextLaunch()
	if err := sleep(ctx, c.clock, launch.Delay); err != nil {
		return nil, err
	}
	if launch.OutOfCapacity {
		c.runOut(*cheapest, c.clock.Now().Add(outOfCapacityFor))
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("nodeclaim %s: %s in %s (%s) ran out of capacity",
			nodeClaim.Name, cheapest.instanceType, cheapest.zone, cheapest.capacityType))
	}
	ctx = context.WithValue(ctx, registerAtKey{}, c.clock.Now().Add(launch.Registration))
	return kwok.NewCloudProvider(ctx, c.kube, types).Create(ctx, claim)
}

// available is the claim with its instance types narrowed to those with an
// available offering it allows (kwok's Create cannot launch a claim that lists
// a type without one), and the cheapest such offering, ties to the type first by
// name and the offering first in the catalog, as the sim cloud picks; nil when
// there is none.
func available(types []*cloudprovider.InstanceType, nodeClaim *v1.NodeClaim) (*v1.NodeClaim, *offeringKey) {
	reqs := scheduling.NewNodeSelectorRequirementsWithMinValues(nodeClaim.Spec.Requirements...)
	i := slices.IndexFunc(nodeClaim.Spec.Requirements, func(r v1.NodeSelectorRequirementWithMinValues) bool {
		return r.Key == corev1.LabelInstanceTypeStable
	})
	if i < 0 {
		return nodeClaim, nil
	}
	var best *offeringKey
	price := 0.0
	var names []string
	for _, name := range nodeClaim.Spec.Requirements[i].Values {
		j := slices.IndexFunc(types, func(it *cloudprovider.InstanceType) bool { return it.Name == name })
		if j < 0 {
			continue
		}
		offerings := types[j].Offerings.Available().Compatible(reqs)
		if len(offerings) == 0 {
			continue
		}
		names = append(names, name)
		for _, o := range offerings {
			if best == nil || o.Price < price || (o.Price == price && name < best.instanceType) {
				best, price = &offeringKey{name, o.Zone(), o.CapacityType()}, o.Price
			}
		}
	}
	claim := nodeClaim.DeepCopy()
	claim.Spec.Requirements[i].Values = names
	return claim, best
}

// registeringClient delays the creation of a Node until the registration time its
// context carries, as kwok's Create creates the Node in a goroutine with the
// context it was given.
type registeringClient struct{ client.Client }

type registerAtKey struct{}

func (r registeringClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if at, ok := ctx.Value(registerAtKey{}).(time.Time); ok {
		if _, node := obj.(*corev1.Node); node {
			if err := sleep(ctx, clock.RealClock{}, time.Until(at)); err != nil {
				return err
			}
		}
	}
	return r.Client.Create(ctx, obj, opts...)
}

// Get waits an API call's draw, then asks kwok.
func (c *latencyCloud) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	if err := sleep(ctx, c.clock, c.nextCall()); err != nil {
		return nil, err
	}
	return c.CloudProvider.Get(ctx, providerID)
}

// Delete waits an API call's draw, then asks kwok.
func (c *latencyCloud) Delete(ctx context.Context, nodeClaim *v1.NodeClaim) error {
	if err := sleep(ctx, c.clock, c.nextCall()); err != nil {
		return err
	}
	return c.CloudProvider.Delete(ctx, nodeClaim)
}

func sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-clk.After(d):
		return nil
	}
}
