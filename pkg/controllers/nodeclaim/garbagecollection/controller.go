// Package garbagecollection reconciles the cloud's inventory with the NodeClaims:
// an instance no NodeClaim owns (after a grace period, so a launch in flight is not
// mistaken for a leak) is terminated, and a NodeClaim whose instance vanished is
// deleted so its pods are provisioned for again.
package garbagecollection

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

// Grace is how long an instance may exist before a NodeClaim records it.
const Grace = 30 * time.Second

// Controller runs a collection every Interval.
type Controller struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	recorder record.EventRecorder
	clock    clock.Clock
	interval time.Duration
	// firstSeen remembers when an unowned instance was first seen, so a restart of
	// the controller restarts the grace period rather than killing in-flight launches.
	firstSeen map[string]time.Time
}

// NewController returns the controller.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, recorder record.EventRecorder, clk clock.Clock, interval time.Duration) *Controller {
	return &Controller{kube: kube, cloud: cloud, recorder: recorder, clock: clk, interval: interval, firstSeen: map[string]time.Time{}}
}

// Start collects until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	for {
		if err := c.Collect(ctx); err != nil {
			log.FromContext(ctx).Error(err, "garbage collection")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(c.interval):
		}
	}
}

// Collect runs one pass.
func (c *Controller) Collect(ctx context.Context) error {
	instances, err := c.cloud.List(ctx)
	if err != nil {
		return fmt.Errorf("listing instances: %w", err)
	}
	claims := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, claims); err != nil {
		return err
	}
	owned := map[string]bool{}
	launching := map[string]bool{}
	for _, nc := range claims.Items {
		if nc.Status.ProviderID == "" {
			launching[nc.Name] = true
		} else {
			owned[nc.Status.ProviderID] = true
		}
	}
	live := map[string]bool{}
	now := c.clock.Now()
	for _, inst := range instances {
		id := inst.Status.ProviderID
		live[id] = true
		// A claim still launching (no provider ID yet) owns its instance by name; a
		// claim that records another instance does not: this one is a duplicate
		// launch (a retry that did not see the first), and would leak.
		if owned[id] || launching[inst.Name] {
			delete(c.firstSeen, id)
			continue
		}
		seen, ok := c.firstSeen[id]
		if !ok {
			c.firstSeen[id] = now
			continue
		}
		if now.Sub(seen) < Grace {
			continue
		}
		if err := c.cloud.Delete(ctx, inst); err != nil && !cloudprovider.IsNodeClaimNotFound(err) {
			return fmt.Errorf("terminating leaked instance %s: %w", id, err)
		}
		delete(c.firstSeen, id)
		log.FromContext(ctx).Info("terminated an instance no NodeClaim owns", "providerID", id)
	}
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.Status.ProviderID == "" || live[nc.Status.ProviderID] || nc.DeletionTimestamp != nil {
			continue
		}
		launched := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeLaunched)
		if launched == nil || now.Sub(launched.LastTransitionTime.Time) < Grace {
			continue
		}
		c.recorder.Eventf(nc, corev1.EventTypeWarning, "InstanceVanished", "Instance %s no longer exists; deleting the NodeClaim", nc.Status.ProviderID)
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}
