// Package interruption acts on a cloud provider's notices that instances will be
// taken away (spot reclaims, maintenance): the offering is avoided for a while, the
// NodeClaim is deleted at once so its node drains before the reclaim, and the
// provisioner is woken so replacements for its pods launch right away.
package interruption

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
	"github.com/nodetailor/tailor/pkg/metrics"
)

// Received counts the notices acted on, by kind.
var Received = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "karpenter_interruption_received_messages_total",
	Help: "Interruption notices received from the cloud provider, by message type.",
}, []string{"message_type"})

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch;delete

// Controller polls the provider's interruption notices.
type Controller struct {
	kube        client.Client
	source      cloudprovider.InterruptionSource
	unavailable *cloudprovider.UnavailableOfferings
	recorder    record.EventRecorder
	clock       clock.Clock
	interval    time.Duration
	wake        func()
}

// NewController returns the controller; Start runs it.
func NewController(kube client.Client, source cloudprovider.InterruptionSource, unavailable *cloudprovider.UnavailableOfferings,
	recorder record.EventRecorder, clk clock.Clock, interval time.Duration, wake func()) *Controller {
	return &Controller{kube: kube, source: source, unavailable: unavailable, recorder: recorder, clock: clk, interval: interval, wake: wake}
}

// Name is the controller's name.
func (c *Controller) Name() string { return "interruption" }

// Register adds the poller to mgr; it runs on the leader only.
func (c *Controller) Register(_ context.Context, mgr ctrl.Manager) error { return mgr.Add(c) }

// Start polls until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(c.interval):
		}
		if err := c.Poll(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "polling interruption notices")
		}
	}
}

// Poll handles the notices outstanding now.
func (c *Controller) Poll(ctx context.Context) error {
	notices, err := c.source.Interruptions(ctx)
	if err != nil {
		return err
	}
	woken := false
	for _, n := range notices {
		if n.ProviderID == "" {
			continue // would match every claim not launched yet
		}
		claims := &v1.NodeClaimList{}
		if err := c.kube.List(ctx, claims, client.MatchingFields{nodeclaim.ProviderIDIndex: n.ProviderID}); err != nil {
			return err
		}
		for i := range claims.Items {
			nc := &claims.Items[i]
			if nc.DeletionTimestamp != nil {
				continue
			}
			Received.WithLabelValues(n.Kind).Inc()
			node := c.nodeOf(ctx, nc)
			c.event(nc, node, noticeEvent(n))
			if n.RecordOnly {
				continue
			}
			if shortOfCapacity(n, nc) {
				c.unavailable.Mark(cloudprovider.UnavailableOffering{InstanceType: nc.Labels[v1.LabelInstanceType],
					Zone: nc.Labels[v1.LabelZone], CapacityType: nc.Labels[v1.CapacityTypeLabelKey]})
			}
			if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
				return err
			}
			log.FromContext(ctx).Info("interrupted", "nodeclaim", nc.Name, "kind", n.Kind, "at", n.At)
			c.event(nc, node, event{corev1.EventTypeWarning, ReasonTerminatingOnInterruption,
				fmt.Sprintf("Interruption notice %s: deleting the NodeClaim; the provider takes the instance away at %s", n.Kind, n.At.UTC().Format(time.RFC3339))})
			metrics.NodeClaimsDisrupted.WithLabelValues(metrics.ReasonInterrupted, nc.Labels[v1.NodePoolLabelKey], nc.Labels[v1.CapacityTypeLabelKey]).Inc()
			woken = true
		}
	}
	if woken && c.wake != nil {
		c.wake()
	}
	return nil
}

// shortOfCapacity says whether a notice shows the claim's offering short of
// capacity: only a spot interruption warning does, as in Karpenter. Maintenance,
// a stop or a termination of a spot instance says nothing of the spot market.
func shortOfCapacity(n cloudprovider.Interruption, nc *v1.NodeClaim) bool {
	return n.Kind == cloudprovider.KindSpotInterruption && nc.Labels[v1.CapacityTypeLabelKey] == v1.CapacityTypeSpot
}

// ReasonTerminatingOnInterruption is the event reason, Karpenter's, on a claim (and
// its node) deleted because of an interruption notice.
const ReasonTerminatingOnInterruption = "TerminatingOnInterruption"

type event struct{ eventtype, reason, message string }

// noticeEvent is the event a notice calls for, under the reason Karpenter's AWS
// provider gives that kind of notice; a kind it has none for keeps its own name.
func noticeEvent(n cloudprovider.Interruption) event {
	switch n.Kind {
	case cloudprovider.KindSpotInterruption:
		return event{corev1.EventTypeWarning, "SpotInterrupted", "Spot interruption warning: the instance is reclaimed at " + n.At.UTC().Format(time.RFC3339)}
	case "RebalanceRecommendation":
		return event{corev1.EventTypeNormal, "SpotRebalanceRecommendation", "Spot rebalance recommendation: a higher risk of interruption; the instance is not taken away"}
	case "ScheduledChange":
		return event{corev1.EventTypeWarning, "InstanceUnhealthy", "Scheduled change (maintenance) for the instance at " + n.At.UTC().Format(time.RFC3339)}
	case "InstanceStopped":
		return event{corev1.EventTypeWarning, "InstanceStopping", "The instance is stopping"}
	case "InstanceTerminated":
		return event{corev1.EventTypeWarning, "InstanceTerminating", "The instance is terminating"}
	}
	if n.RecordOnly {
		return event{corev1.EventTypeNormal, n.Kind, "The provider notes a risk of interruption; the instance is not taken away"}
	}
	return event{corev1.EventTypeWarning, n.Kind, "The provider takes the instance away at " + n.At.UTC().Format(time.RFC3339)}
}

// event records e on the claim and, if it has one, its node.
func (c *Controller) event(nc *v1.NodeClaim, node *corev1.Node, e event) {
	c.recorder.Event(nc, e.eventtype, e.reason, e.message)
	if node != nil {
		c.recorder.Event(node, e.eventtype, e.reason, e.message)
	}
}

// nodeOf is the claim's node from the cache, or nil.
func (c *Controller) nodeOf(ctx context.Context, nc *v1.NodeClaim) *corev1.Node {
	if nc.Status.NodeName == "" {
		return nil
	}
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
		return nil
	}
	return node
}
