// Package garbagecollection reconciles the cloud's inventory with the NodeClaims:
// an instance no NodeClaim owns (after a grace period, so a launch in flight is not
// mistaken for a leak) is terminated, and a NodeClaim whose instance vanished is
// deleted so its pods are provisioned for again. Only instances and claims of the
// NodeClass kinds the running provider launches from are touched.
package garbagecollection

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

// Grace is how long an instance may exist before a NodeClaim records it, and how
// long after its launch a claim's instance may be missing from the cloud's list
// before the claim is looked at.
const Grace = 30 * time.Second

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

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

// Name is the controller's name.
func (c *Controller) Name() string { return "nodeclaim.garbagecollection" }

// Register adds the collector to mgr; it runs on the leader only.
func (c *Controller) Register(_ context.Context, mgr ctrl.Manager) error { return mgr.Add(c) }

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

// Collect runs one pass. A failure on one instance or claim does not stop the
// others; the pass returns every failure, joined.
func (c *Controller) Collect(ctx context.Context) error {
	instances, err := c.cloud.List(ctx)
	if err != nil {
		return fmt.Errorf("listing instances: %w", err)
	}
	claims := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, claims); err != nil {
		return fmt.Errorf("listing NodeClaims: %w", err)
	}
	nodes := &corev1.NodeList{}
	if err := c.kube.List(ctx, nodes); err != nil {
		return fmt.Errorf("listing Nodes: %w", err)
	}
	manages := func(nc *v1.NodeClaim) bool { return cloudprovider.Manages(c.cloud, nc) }
	now := c.clock.Now()
	logger := log.FromContext(ctx)
	var errs []error
	for _, inst := range Leaks(instances, claims.Items, manages, c.firstSeen, now) {
		id := inst.Status.ProviderID
		if err := c.cloud.Delete(ctx, inst); err != nil && !cloudprovider.IsNodeClaimNotFound(err) {
			err = fmt.Errorf("terminating leaked instance %s: %w", id, err)
			logger.Error(err, "garbage collection", "providerID", id)
			errs = append(errs, err)
			continue
		}
		delete(c.firstSeen, id)
		logger.Info("terminated an instance no NodeClaim owns", "providerID", id)
	}
	for _, nc := range Vanished(instances, claims.Items, nodes.Items, manages, now) {
		if err := c.deleteVanished(ctx, nc); err != nil {
			logger.Error(err, "garbage collection", "nodeclaim", klog.KObj(nc))
			c.recorder.Eventf(nc, corev1.EventTypeWarning, "GarbageCollectionFailed", "%v", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteVanished deletes the claim once the cloud confirms its instance is gone: a
// list that misses an instance may only be behind (eventual consistency).
func (c *Controller) deleteVanished(ctx context.Context, nc *v1.NodeClaim) error {
	id := nc.Status.ProviderID
	if _, err := c.cloud.Get(ctx, id); err == nil {
		log.FromContext(ctx).V(1).Info("instance missing from the cloud's list still exists", "nodeclaim", klog.KObj(nc), "providerID", id)
		return nil
	} else if !cloudprovider.IsNodeClaimNotFound(err) {
		return fmt.Errorf("NodeClaim %s: looking up instance %s: %w", nc.Name, id, err)
	}
	c.recorder.Eventf(nc, corev1.EventTypeWarning, "InstanceVanished", "Instance %s no longer exists; deleting the NodeClaim", id)
	if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("NodeClaim %s: deleting it, its instance %s gone: %w", nc.Name, id, err)
	}
	return nil
}

// Leaks returns the instances no NodeClaim owns that have been seen for Grace.
// firstSeen is updated: an instance seen unowned for the first time is recorded,
// and one owned again, or no longer listed, is forgotten. An instance described
// with a NodeClass the provider does not manage belongs to another controller;
// providers that do not say which NodeClass an instance came from list only
// their own.
func Leaks(instances []*v1.NodeClaim, claims []v1.NodeClaim, manages func(*v1.NodeClaim) bool, firstSeen map[string]time.Time, now time.Time) []*v1.NodeClaim {
	owned := map[string]bool{}
	launching := map[string]bool{}
	for i := range claims {
		if id := claims[i].Status.ProviderID; id != "" {
			owned[id] = true
		} else {
			launching[claims[i].Name] = true
		}
	}
	listed := map[string]bool{}
	var out []*v1.NodeClaim
	for _, inst := range instances {
		id := inst.Status.ProviderID
		listed[id] = true
		// A claim still launching (no provider ID yet) owns its instance by name; a
		// claim that records another instance does not: this one is a duplicate
		// launch (a retry that did not see the first), and would leak.
		if owned[id] || launching[inst.Name] || inst.Spec.NodeClassRef != nil && !manages(inst) {
			delete(firstSeen, id)
			continue
		}
		seen, ok := firstSeen[id]
		if !ok {
			firstSeen[id] = now
			continue
		}
		if now.Sub(seen) >= Grace {
			out = append(out, inst)
		}
	}
	// An instance gone by other means must not stay here for good.
	for id := range firstSeen {
		if !listed[id] {
			delete(firstSeen, id)
		}
	}
	return out
}

// Vanished returns the claims the provider manages whose instance is missing from the cloud's
// list, launched at least Grace ago and not being deleted, whose Node is not Ready:
// a Ready Node means its kubelet runs, so the instance does too, whatever a
// (possibly stale) list says. The claims returned are still to be confirmed gone.
func Vanished(instances []*v1.NodeClaim, claims []v1.NodeClaim, nodes []corev1.Node, manages func(*v1.NodeClaim) bool, now time.Time) []*v1.NodeClaim {
	live := map[string]bool{}
	for _, inst := range instances {
		live[inst.Status.ProviderID] = true
	}
	ready := map[string]bool{}
	for i := range nodes {
		if nodeReady(&nodes[i]) {
			ready[nodes[i].Spec.ProviderID] = true
		}
	}
	var out []*v1.NodeClaim
	for i := range claims {
		nc := &claims[i]
		id := nc.Status.ProviderID
		if id == "" || live[id] || ready[id] || nc.DeletionTimestamp != nil || !manages(nc) {
			continue
		}
		launched := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeLaunched)
		if launched == nil || launched.Status != metav1.ConditionTrue || now.Sub(launched.LastTransitionTime.Time) < Grace {
			continue
		}
		out = append(out, nc)
	}
	return out
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
