// Package health repairs broken nodes, as Karpenter's Node Auto Repair does (feature
// gate NodeRepair, off by default): a node whose condition has matched a repair
// policy for longer than the policy's toleration — the kubelet's Ready False or
// Unknown for 30 minutes, and the provider's own (on AWS the node monitoring
// agent's conditions and EC2's status checks) — has its NodeClaim deleted at once, without a disruption
// budget and without waiting for a drain the broken node cannot finish, unless more
// than 20% of its NodePool's nodes are unhealthy (see disruption.DecideRepairs).
package health

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/disruption"
	"github.com/nodetailor/tailor/pkg/metrics"
)

// Interval is the pause between passes: tolerations are tens of minutes.
const Interval = 10 * time.Second

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Controller runs node repair passes.
type Controller struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	recorder record.EventRecorder
	clock    clock.Clock
	policies []disruption.RepairPolicy
	// wake tells the provisioner that pods will need a place.
	wake func()
	// nodeHealth, when set, adds the provider's own health conditions to the
	// nodes' (see WithNodeHealth).
	nodeHealth cloudprovider.NodeHealthSource
	// blocked remembers the reason last reported per node: one event per reason,
	// not one per pass.
	blocked map[string]string
}

// NewController returns the controller; policies are the cloud provider's repair
// policies (disruption.KubeletRepairPolicies for sim). Start runs it.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, recorder record.EventRecorder, clk clock.Clock,
	policies []disruption.RepairPolicy, wake func()) *Controller {
	return &Controller{kube: kube, cloud: cloud, recorder: recorder, clock: clk, policies: policies, wake: wake, blocked: map[string]string{}}
}

// WithNodeHealth has the provider's view of its instances' health read on every
// pass: its conditions count as the nodes' own, against the same policies.
func (c *Controller) WithNodeHealth(src cloudprovider.NodeHealthSource) *Controller {
	c.nodeHealth = src
	return c
}

// Name is the controller's name.
func (c *Controller) Name() string { return "node.health" }

// Register adds the loop to mgr; it runs on the leader only.
func (c *Controller) Register(_ context.Context, mgr ctrl.Manager) error { return mgr.Add(c) }

// Start runs passes until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName(c.Name()))
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(Interval):
		}
		if _, err := c.Pass(ctx); err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "node repair pass")
		}
	}
}

// Pass repairs the nodes broken past their toleration, and returns the decision.
func (c *Controller) Pass(ctx context.Context) (*disruption.RepairDecision, error) {
	nodes := &corev1.NodeList{}
	if err := c.kube.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	claims := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodeclaims: %w", err)
	}
	in := &disruption.RepairInput{Now: c.clock.Now(), Policies: c.policies,
		Manages: func(nc *v1.NodeClaim) bool { return cloudprovider.Manages(c.cloud, nc) }}
	extra := c.providerConditions(ctx)
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, withConditions(&nodes.Items[i], extra[nodes.Items[i].Spec.ProviderID]))
	}
	for i := range claims.Items {
		in.Claims = append(in.Claims, &claims.Items[i])
	}
	dec := disruption.DecideRepairs(in)
	c.report(dec.Blocked)
	var errs []error
	for _, r := range dec.Repairs {
		if err := c.repair(ctx, r); err != nil {
			errs = append(errs, err)
		}
	}
	if len(dec.Repairs) > 0 && c.wake != nil {
		c.wake()
	}
	return dec, errors.Join(errs...)
}

// providerConditions are the provider's health conditions by provider ID; a read
// that fails leaves the kubelet's conditions to judge by, this pass.
func (c *Controller) providerConditions(ctx context.Context) map[string][]corev1.NodeCondition {
	if c.nodeHealth == nil {
		return nil
	}
	out, err := c.nodeHealth.NodeConditions(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "reading the provider's view of node health")
		return nil
	}
	return out
}

// withConditions is the node with the conditions added (each replacing one of
// its type), a copy if there are any: the listed node is the cache's own.
func withConditions(n *corev1.Node, conds []corev1.NodeCondition) *corev1.Node {
	if len(conds) == 0 {
		return n
	}
	out := n.DeepCopy()
	for _, add := range conds {
		out.Status.Conditions = slices.DeleteFunc(out.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == add.Type })
		out.Status.Conditions = append(out.Status.Conditions, add)
	}
	return out
}

// repair deletes the claim of a broken node. Its termination timestamp, now, tells
// termination that the grace period is over: the drain does not wait on pods a
// broken kubelet will never stop.
func (c *Controller) repair(ctx context.Context, r disruption.Repair) error {
	nc := r.Claim.DeepCopy() // the listed copy is the cache's own
	now := c.clock.Now()
	if !terminationDue(nc, now) {
		patch := client.MergeFrom(nc.DeepCopy())
		metav1.SetMetaDataAnnotation(&nc.ObjectMeta, v1.NodeClaimTerminationTimestampAnnotationKey, now.UTC().Format(time.RFC3339))
		if err := c.kube.Patch(ctx, nc, patch); err != nil {
			return client.IgnoreNotFound(fmt.Errorf("setting the termination timestamp of nodeclaim %s: %w", nc.Name, err))
		}
	}
	if err := c.kube.Delete(ctx, nc); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("deleting nodeclaim %s of unhealthy node %s: %w", nc.Name, r.Node.Name, err))
	}
	held := now.Sub(r.Condition.LastTransitionTime.Time).Round(time.Second)
	log.FromContext(ctx).Info("repairing an unhealthy node", "node", r.Node.Name, "nodeclaim", nc.Name,
		"condition", r.Condition.Type, "status", r.Condition.Status, "for", held)
	msg := fmt.Sprintf("%s has been %s for %s, past its toleration of %s; deleting the NodeClaim without waiting for a drain",
		r.Condition.Type, r.Condition.Status, held, r.Policy.Toleration)
	c.recorder.Event(r.Node, corev1.EventTypeWarning, "NodeRepair", "Node "+msg)
	c.recorder.Event(nc, corev1.EventTypeWarning, "NodeRepair", "Node "+r.Node.Name+" "+msg)
	pool, captype := nc.Labels[v1.NodePoolLabelKey], nc.Labels[v1.CapacityTypeLabelKey]
	metrics.NodeClaimsDisrupted.WithLabelValues(metrics.ReasonUnhealthy, pool, captype).Inc()
	UnhealthyDisrupted.WithLabelValues(snakeCase(string(r.Condition.Type)), pool, captype, nc.Status.ImageID).Inc()
	return nil
}

// terminationDue reports a termination timestamp already at or before now.
func terminationDue(nc *v1.NodeClaim, now time.Time) bool {
	at, err := time.Parse(time.RFC3339, nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey])
	return err == nil && !at.After(now)
}

// report makes an event for each node newly blocked, or blocked for a new reason.
func (c *Controller) report(blocked []disruption.RepairBlocked) {
	seen := map[string]bool{}
	for _, b := range blocked {
		seen[b.Node.Name] = true
		if c.blocked[b.Node.Name] == b.Reason {
			continue
		}
		c.blocked[b.Node.Name] = b.Reason
		c.recorder.Eventf(b.Node, corev1.EventTypeWarning, "NodeRepairBlocked", "Cannot repair Node: %s", b.Reason)
		c.recorder.Eventf(b.Claim, corev1.EventTypeWarning, "NodeRepairBlocked", "Cannot repair NodeClaim: %s", b.Reason)
	}
	for node := range c.blocked {
		if !seen[node] {
			delete(c.blocked, node)
		}
	}
}
