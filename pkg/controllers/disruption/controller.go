// Package disruption carries out the disruption decisions of pkg/disruption: every
// few seconds it reads the cluster and asks for the next command. Each command is
// carried out in the background: checked again after a pause (consolidation), its
// candidates tainted karpenter.sh/disrupted:NoSchedule, their replacements launched
// and waited for (rolled back if they do not initialize), the candidates deleted
// through termination. Meanwhile later passes decide further commands, within
// budgets, with the commands in flight taken into account.
package disruption

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	cpmetrics "github.com/nodetailor/tailor/pkg/cloudprovider/metrics"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
	disrupt "github.com/nodetailor/tailor/pkg/disruption"
	"github.com/nodetailor/tailor/pkg/metrics"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// Options tune the loop.
type Options struct {
	// Interval is the pause between passes.
	Interval time.Duration
	// ValidationDelay is how long a consolidation decision waits before it is
	// checked again on fresh state and acted on.
	ValidationDelay time.Duration
	// ReplacementTimeout bounds the wait for replacements to initialize; past it the
	// command is rolled back.
	ReplacementTimeout time.Duration
	// MinSavings is the fraction of the price a consolidation replacement must save.
	MinSavings float64
	// SpotToSpotConsolidation is Karpenter's feature gate of that name.
	SpotToSpotConsolidation bool
	// Scheduling are the engine's options, as provisioning's.
	Scheduling scheduling.Options
}

// DefaultOptions are the controller's defaults.
func DefaultOptions() Options {
	return Options{Interval: 10 * time.Second, ValidationDelay: 15 * time.Second,
		ReplacementTimeout: 10 * time.Minute, MinSavings: disrupt.DefaultMinSavings}
}

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodepools,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch

// Controller runs disruption passes.
type Controller struct {
	kube client.Client
	// reader reads from the API server: a replacement just created may not be in
	// kube's cache yet, and must not be taken for gone.
	reader   client.Reader
	cluster  *state.Cluster
	cloud    cloudprovider.CloudProvider
	types    nodeclaim.InstanceTypes
	recorder record.EventRecorder
	clock    clock.Clock
	opts     Options
	// wake tells the provisioner that pods will need a place.
	wake func()
	// blocked remembers the last reason reported per node, so a blocked node gets
	// one event per reason rather than one per pass.
	blocked map[string]string
	// doNotDisrupt remembers, by pod, the last event said about its do-not-disrupt
	// duration (see doNotDisruptEvents).
	doNotDisrupt map[k8stypes.UID]string
	// budgetBlocked remembers, by NodePool, the reasons its budget last allowed no
	// disruption for, so each is said once while it lasts.
	budgetBlocked map[string]string

	// inFlight are the claims of commands decided and not yet done, and of commands
	// done until the cache shows their claims deleted: a pass reading a cache that
	// lags the deletions must not take them for candidates again.
	mu       sync.Mutex
	inFlight map[string]bool
	// replacing are the replacement claims of commands being carried out: not
	// candidates while their command runs (see disrupt.Input.Replacements).
	replacing map[string]bool
	running   sync.WaitGroup
}

// NewController returns the controller; Start runs it.
func NewController(kube client.Client, reader client.Reader, cluster *state.Cluster, cloud cloudprovider.CloudProvider, types nodeclaim.InstanceTypes,
	recorder record.EventRecorder, clk clock.Clock, opts Options, wake func()) *Controller {
	said := map[k8stypes.UID]string{}
	return &Controller{kube: kube, reader: reader, cluster: cluster, cloud: cloud, types: types, recorder: recorder, clock: clk, opts: opts, doNotDisrupt: said, budgetBlocked: map[string]string{},
		wake: wake, blocked: map[string]string{}, inFlight: map[string]bool{}, replacing: map[string]bool{}}
}

// Name is the controller's name.
func (c *Controller) Name() string { return ControllerName }

// Register adds the loop to mgr; it runs on the leader only.
func (c *Controller) Register(_ context.Context, mgr ctrl.Manager) error { return mgr.Add(c) }

// Start runs passes until ctx ends, then waits for the commands in flight (each
// rolls back what it cannot finish).
func (c *Controller) Start(ctx context.Context) error {
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName("disruption"))
	defer c.Wait()
	pause := c.opts.Interval
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(pause):
		}
		cmd, err := c.Pass(ctx)
		if err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "disruption pass")
		}
		// A pass that found work looks again soon: there may be more within budgets.
		pause = c.opts.Interval
		if cmd != nil {
			pause = min(pause, time.Second)
		}
	}
}

// Wait blocks until every command in flight is done.
func (c *Controller) Wait() { c.running.Wait() }

// Pass decides at most one command and starts carrying it out in the background;
// it returns the command. Wait waits for it.
func (c *Controller) Pass(ctx context.Context) (*disrupt.Command, error) {
	ctx = cpmetrics.WithController(ctx, ControllerName)
	if err := c.releaseStale(ctx); err != nil {
		return nil, err
	}
	in, err := c.input(ctx, nil)
	if err != nil {
		return nil, err
	}
	start := c.clock.Now()
	dec := disrupt.Decide(in)
	reason, kind := "", ""
	if dec.Command != nil {
		reason, kind = metricReason(dec.Command.Reason), consolidationType(dec.Command)
	}
	EvaluationDuration.WithLabelValues(reason, kind).Observe(c.clock.Since(start).Seconds())
	for _, r := range []v1.DisruptionReason{v1.DisruptionReasonEmpty, v1.DisruptionReasonDrifted, v1.DisruptionReasonUnderutilized} {
		EligibleNodes.WithLabelValues(metricReason(r)).Set(float64(dec.Eligible[r]))
	}
	// As Karpenter reports them: the budget before the nodes consuming it (so the
	// budget left is allowed_disruptions less nodes_consuming_budgets), and
	// MaxInt32 when no budget limits the NodePool.
	for pool, byReason := range dec.Budgets {
		for r, n := range byReason {
			AllowedDisruptions.WithLabelValues(pool, metricReason(r)).Set(budgetValue(n))
			NodesConsumingBudgets.WithLabelValues(pool, metricReason(r)).Set(float64(dec.Disrupting[pool]))
		}
	}
	c.report(ctx, dec)
	c.reportBudgets(in.Cluster.NodePools, dec.Allowed)
	for _, e := range doNotDisruptEvents(in.Cluster.Nodes, in.Now, c.doNotDisrupt) {
		c.recorder.Event(e.pod, e.eventtype, e.reason, e.message)
	}
	c.writeConditions(ctx, in.Claims, dec.States)
	cmd := dec.Command
	if logger := log.FromContext(ctx).V(1); logger.Enabled() {
		decision := "none"
		if cmd != nil {
			decision = cmd.String()
		}
		logger.Info("disruption decision", "command", decision, "eligible", dec.Eligible, "blocked", len(dec.Blocked),
			"seconds", c.clock.Since(start).Seconds())
	}
	if cmd == nil {
		return nil, nil
	}
	c.track(cmd)
	c.running.Add(1)
	go func() {
		defer c.running.Done()
		done, err := c.carryOut(ctx, cmd)
		c.untrack(cmd, done)
		if err != nil && ctx.Err() == nil {
			log.FromContext(ctx).Error(err, "disruption")
		}
	}()
	return cmd, nil
}

// carryOut validates a consolidation after the delay, on fresh state, then
// executes the command; it reports whether the candidates were deleted.
func (c *Controller) carryOut(ctx context.Context, cmd *disrupt.Command) (bool, error) {
	if cmd.Reason != v1.DisruptionReasonDrifted && c.opts.ValidationDelay > 0 {
		select {
		case <-ctx.Done():
			return false, nil
		case <-c.clock.After(c.opts.ValidationDelay):
		}
		in, err := c.input(ctx, cmd)
		if err != nil {
			return false, err
		}
		fresh, err := disrupt.Validate(in, cmd)
		if err != nil {
			FailedValidations.WithLabelValues(consolidationType(cmd)).Inc()
			log.FromContext(ctx).Info("dropping a stale decision", "command", cmd.String(), "reason", err.Error())
			return false, nil
		}
		log.FromContext(ctx).V(1).Info("decision still holds after the validation delay", "command", fresh.String())
		cmd = fresh
	}
	if err := c.execute(ctx, cmd); err != nil {
		return false, err
	}
	return true, nil
}

// track marks the command's claims in flight.
func (c *Controller) track(cmd *disrupt.Command) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cand := range cmd.Candidates {
		c.inFlight[cand.Claim.Name] = true
	}
}

// untrack ends a command: a command that deleted its claims keeps them in flight
// until the cache shows them deleted (see inFlightExcept); one that did not lets
// them go at once.
func (c *Controller) untrack(cmd *disrupt.Command, deleted bool) {
	if deleted {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cand := range cmd.Candidates {
		delete(c.inFlight, cand.Claim.Name)
	}
}

// replacing marks (on) or releases a replacement claim of a running command.
func (c *Controller) setReplacing(claim string, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if on {
		c.replacing[claim] = true
	} else {
		delete(c.replacing, claim)
	}
}

// replacements is a copy of the replacement claims of running commands.
func (c *Controller) replacements() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.replacing)
}

func (c *Controller) isInFlight(claim string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.inFlight[claim]
}

// inFlightExcept returns the claims in flight, but for own's, first forgetting
// claims the snapshot shows deleting or gone.
func (c *Controller) inFlightExcept(claims []*v1.NodeClaim, own *disrupt.Command) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	present := make(map[string]bool, len(claims))
	for _, nc := range claims {
		present[nc.Name] = nc.DeletionTimestamp == nil
	}
	out := map[string]bool{}
	for name := range c.inFlight {
		if !present[name] {
			delete(c.inFlight, name)
			continue
		}
		out[name] = true
	}
	if own != nil {
		for _, cand := range own.Candidates {
			delete(out, cand.Claim.Name)
		}
	}
	return out
}

// input reads what a decision needs; own is the command being validated, whose
// claims are not in flight for its own validation.
func (c *Controller) input(ctx context.Context, own *disrupt.Command) (*disrupt.Input, error) {
	snap, err := c.cluster.Snapshot(ctx, func(np *v1.NodePool) ([]*scheduling.InstanceType, error) { return c.types(ctx, np) })
	if err != nil {
		return nil, err
	}
	in := &disrupt.Input{Now: c.clock.Now(), Cluster: snap.Input, Claims: snap.Claims, PDBs: snap.PDBs,
		ProviderDrift: map[string]string{}, Manages: c.manages, InFlight: c.inFlightExcept(snap.Claims, own), Replacements: c.replacements(),
		Buffers: state.BufferPods(snap.Buffers),
		Options: disrupt.Options{MinSavings: c.opts.MinSavings, SpotToSpotConsolidation: c.opts.SpotToSpotConsolidation,
			Scheduling: c.opts.Scheduling}}
	for _, nc := range snap.Claims {
		if nc.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) || !c.manages(nc) {
			continue
		}
		reason, err := c.cloud.IsDrifted(ctx, nc)
		if err != nil {
			log.FromContext(ctx).Error(err, "asking the provider about drift", "nodeclaim", nc.Name)
			continue
		}
		if reason != "" {
			in.ProviderDrift[nc.Name] = string(reason)
		}
	}
	return in, nil
}

// manages reports whether the claim is the running provider's to disrupt.
func (c *Controller) manages(nc *v1.NodeClaim) bool { return cloudprovider.Manages(c.cloud, nc) }

// report makes an event for each node newly blocked, or blocked for a new reason.
func (c *Controller) report(ctx context.Context, dec *disrupt.Decision) {
	seen := map[string]bool{}
	for _, b := range dec.Blocked {
		seen[b.Node] = true
		if c.blocked[b.Node] == b.Reason {
			continue
		}
		c.blocked[b.Node] = b.Reason
		log.FromContext(ctx).V(1).Info("not disrupting a candidate", "node", b.Node, "reason", b.Reason)
		if b.Kind == disrupt.BlockNoBetterPlace && dec.States[b.Candidate.Claim.Name].Drifted == "" {
			// Consolidation found no better place: Karpenter says Unconsolidatable.
			c.recorder.Event(b.Candidate.Node.Node, corev1.EventTypeNormal, ReasonUnconsolidatable, b.Reason)
			c.recorder.Event(b.Candidate.Claim, corev1.EventTypeNormal, ReasonUnconsolidatable, b.Reason)
			continue
		}
		c.recorder.Eventf(b.Candidate.Node.Node, corev1.EventTypeNormal, ReasonDisruptionBlocked, "Cannot disrupt Node: %s", b.Reason)
		c.recorder.Eventf(b.Candidate.Claim, corev1.EventTypeNormal, ReasonDisruptionBlocked, "Cannot disrupt NodeClaim: %s", b.Reason)
	}
	for node := range c.blocked {
		if !seen[node] {
			delete(c.blocked, node)
		}
	}
}

// execute taints the candidates, brings the replacements up and deletes the
// candidates; if the replacements do not come up it undoes the taints and deletes
// them.
func (c *Controller) execute(ctx context.Context, cmd *disrupt.Command) error {
	logger := log.FromContext(ctx)
	logger.Info("disrupting", "command", cmd.String())
	var tainted []*corev1.Node
	rollback := func(replacements []*v1.NodeClaim, why error) error {
		// Undo even when the controller is stopping: a leaked replacement costs money.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, n := range tainted {
			if err := c.setTaint(ctx, n.Name, false); err != nil {
				logger.Error(err, "untainting after a failed disruption", "node", n.Name)
			}
		}
		for _, r := range replacements {
			if err := c.kube.Delete(ctx, r); client.IgnoreNotFound(err) != nil {
				logger.Error(err, "deleting a replacement after a failed disruption", "nodeclaim", r.Name)
			}
		}
		QueueFailures.WithLabelValues(cmd.Decision(), metricReason(cmd.Reason), consolidationType(cmd)).Inc()
		return fmt.Errorf("%s: %w", cmd, why)
	}
	for _, cand := range cmd.Candidates {
		if err := retryWrite(ctx, func() error { return c.setTaint(ctx, cand.Node.Node.Name, true) }); err != nil {
			return rollback(nil, err)
		}
		tainted = append(tainted, cand.Node.Node)
		logger.V(1).Info("tainted a candidate", "node", cand.Node.Node.Name, "taint", v1.DisruptedNoScheduleTaint.Key)
	}
	var replacements []*v1.NodeClaim
	// Until the command ends, its replacements are not candidates: the first of
	// several stands idle while the others come up, and would be taken for empty.
	defer func() {
		for _, r := range replacements {
			c.setReplacing(r.Name, false)
		}
	}()
	for _, r := range cmd.Replacements {
		// The replacement may come from another NodePool than the node it replaces.
		pool := &v1.NodePool{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: r.NodePool}, pool); err != nil {
			return rollback(replacements, fmt.Errorf("reading NodePool %s for a replacement: %w", r.NodePool, err))
		}
		nc := nodeclaim.New(pool, r)
		if err := c.kube.Create(ctx, nc); err != nil {
			return rollback(replacements, fmt.Errorf("creating a replacement: %w", err))
		}
		replacements = append(replacements, nc)
		c.setReplacing(nc.Name, true)
		c.recorder.Eventf(nc, corev1.EventTypeNormal, ReasonDisruptionLaunching, "Launching NodeClaim: %s", cmd.Reason)
		c.recorder.Event(nc, corev1.EventTypeNormal, ReasonDisruptionWaitingReadiness, "Waiting on readiness to continue disruption")
		metrics.NodeClaimsCreated.WithLabelValues(metricReason(cmd.Reason), r.NodePool, "false").Inc()
		logger.V(1).Info("created a replacement; waiting for it to initialize", "nodeclaim", nc.Name, "nodepool", r.NodePool,
			"instanceTypes", len(r.InstanceTypes), "timeout", c.opts.ReplacementTimeout)
	}
	if err := c.waitInitialized(ctx, replacements); err != nil {
		return rollback(replacements, err)
	}
	if cmd.Refill {
		if err := c.waitRefilled(ctx, cmd.Candidates[0].Pool.NodePool.Name); err != nil {
			return rollback(nil, err)
		}
	}
	for _, cand := range cmd.Candidates {
		c.markDisrupting(ctx, cand.Claim, cmd.Reason)
	}
	for _, cand := range cmd.Candidates {
		if err := retryWrite(ctx, func() error { return client.IgnoreNotFound(c.kube.Delete(ctx, cand.Claim)) }); err != nil {
			return fmt.Errorf("deleting nodeclaim %s: %w", cand.Claim.Name, err)
		}
		c.recorder.Eventf(cand.Node.Node, corev1.EventTypeNormal, ReasonDisruptionTerminating, "Disrupting Node: %s/%s", cmd.Reason, cmd.Decision())
		c.recorder.Eventf(cand.Claim, corev1.EventTypeNormal, ReasonDisruptionTerminating, "Disrupting NodeClaim: %s/%s", cmd.Reason, cmd.Decision())
		metrics.NodeClaimsDisrupted.WithLabelValues(metricReason(cmd.Reason), cand.Pool.NodePool.Name, cand.CapacityType).Inc()
		logger.V(1).Info("deleted a candidate's nodeclaim; termination drains it", "nodeclaim", cand.Claim.Name, "node", cand.Node.Node.Name)
	}
	countDecision(cmd)
	if c.wake != nil {
		c.wake()
	}
	return nil
}

// waitInitialized waits until every replacement is initialized; a replacement that
// disappears (its launch failed) or a timeout fails the command.
func (c *Controller) waitInitialized(ctx context.Context, claims []*v1.NodeClaim) error {
	deadline := c.clock.Now().Add(c.opts.ReplacementTimeout)
	for {
		ready := 0
		for _, r := range claims {
			got := &v1.NodeClaim{}
			if err := c.reader.Get(ctx, client.ObjectKeyFromObject(r), got); err != nil {
				if client.IgnoreNotFound(err) == nil {
					return fmt.Errorf("replacement nodeclaim %s went away", r.Name)
				}
				return err
			}
			if got.DeletionTimestamp != nil {
				return fmt.Errorf("replacement nodeclaim %s is being deleted", r.Name)
			}
			if meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeInitialized) {
				ready++
			}
		}
		if ready == len(claims) {
			return nil
		}
		if c.clock.Now().After(deadline) {
			return fmt.Errorf("replacements not initialized after %s", c.opts.ReplacementTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.clock.After(time.Second):
		}
	}
}

// waitRefilled waits until a static NodePool has its replicas in initialized
// claims besides those of commands in flight: its controller launches a refill for
// each node the commands tainted. Rolled back, the refill is the pool's surplus and
// its controller deletes it.
func (c *Controller) waitRefilled(ctx context.Context, pool string) error {
	deadline := c.clock.Now().Add(c.opts.ReplacementTimeout)
	for {
		np := &v1.NodePool{}
		if err := c.reader.Get(ctx, client.ObjectKey{Name: pool}, np); err != nil {
			return fmt.Errorf("reading static NodePool %s: %w", pool, err)
		}
		if np.Spec.Replicas == nil {
			return fmt.Errorf("NodePool %s is no longer static", pool)
		}
		claims := &v1.NodeClaimList{}
		if err := c.reader.List(ctx, claims, client.MatchingLabels{v1.NodePoolLabelKey: pool}); err != nil {
			return err
		}
		up := int64(0)
		for _, nc := range claims.Items {
			if nc.DeletionTimestamp == nil && !c.isInFlight(nc.Name) && meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
				up++
			}
		}
		if up >= *np.Spec.Replicas {
			return nil
		}
		if c.clock.Now().After(deadline) {
			return fmt.Errorf("static NodePool %s has %d of %d nodes initialized after %s", pool, up, *np.Spec.Replicas, c.opts.ReplacementTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.clock.After(time.Second):
		}
	}
}

// setTaint adds or removes karpenter.sh/disrupted:NoSchedule.
func (c *Controller) setTaint(ctx context.Context, name string, on bool) error {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return client.IgnoreNotFound(err)
	}
	has := slices.ContainsFunc(node.Spec.Taints, isDisrupted)
	if has == on {
		return nil
	}
	patch := client.MergeFromWithOptions(node.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if on {
		node.Spec.Taints = append(node.Spec.Taints, v1.DisruptedNoScheduleTaint)
	} else {
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, isDisrupted)
	}
	return c.kube.Patch(ctx, node, patch)
}

// retryWrite retries a write that failed for a passing reason (a 5xx, a timeout, a
// conflict) a few times within about a second and a half. A command writes a taint
// and a delete per candidate; without retries, one failed write in a hundred-node
// emptiness command would undo the whole command, and a flaky API server would
// keep every empty node.
func retryWrite(ctx context.Context, write func() error) error {
	return retry.OnError(retry.DefaultBackoff, func(err error) bool {
		return ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err)
	}, write)
}

func isDisrupted(t corev1.Taint) bool {
	return t.Key == v1.DisruptedNoScheduleTaint.Key && t.Effect == v1.DisruptedNoScheduleTaint.Effect
}

// releaseStale untaints nodes left tainted by a command that never finished (the
// controller restarted mid-way): a node whose claim is neither being deleted nor in
// a command in flight. A foreign claim's taint is its own controller's business.
func (c *Controller) releaseStale(ctx context.Context) error {
	nodes := &corev1.NodeList{}
	if err := c.kube.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if n.DeletionTimestamp != nil || n.Spec.ProviderID == "" || !slices.ContainsFunc(n.Spec.Taints, isDisrupted) {
			continue
		}
		claims := &v1.NodeClaimList{}
		if err := c.kube.List(ctx, claims, client.MatchingFields{nodeclaim.ProviderIDIndex: n.Spec.ProviderID}); err != nil {
			return err
		}
		if len(claims.Items) == 0 || claims.Items[0].DeletionTimestamp != nil || !c.manages(&claims.Items[0]) || c.isInFlight(claims.Items[0].Name) {
			continue
		}
		log.FromContext(ctx).Info("releasing a node left tainted by an unfinished disruption", "node", n.Name)
		if err := c.setTaint(ctx, n.Name, false); err != nil {
			return err
		}
	}
	return nil
}

// consolidationType is the command's consolidation_type label value: Karpenter
// labels only consolidation with a type.
func consolidationType(cmd *disrupt.Command) string {
	if cmd.Kind == disrupt.KindDrift {
		return ""
	}
	return string(cmd.Kind)
}

// Event reasons of disruption, Karpenter's.
const (
	// ReasonDisruptionBlocked, on a candidate a check holds back (do-not-disrupt, a
	// PodDisruptionBudget, the budget, pods that need it, a drift with no place for
	// its pods), and on a NodePool whose budget allows no disruption for a reason.
	ReasonDisruptionBlocked = "DisruptionBlocked"
	// ReasonUnconsolidatable, on a candidate consolidation found no better place for.
	ReasonUnconsolidatable = "Unconsolidatable"
	// ReasonDisruptionLaunching and ReasonDisruptionWaitingReadiness, on a
	// replacement launched for a command.
	ReasonDisruptionLaunching        = "DisruptionLaunching"
	ReasonDisruptionWaitingReadiness = "DisruptionWaitingReadiness"
	// ReasonDisruptionTerminating, on a candidate deleted by a command.
	ReasonDisruptionTerminating = "DisruptionTerminating"
)

// budgetValue is a budget as Karpenter reports it: MaxInt32 when unlimited.
func budgetValue(n int) float64 { return float64(min(n, math.MaxInt32)) }

// reportBudgets makes an event on each NodePool whose budget newly allows no
// disruption for a reason (once while it lasts), as Karpenter does.
func (c *Controller) reportBudgets(pools []*scheduling.NodePool, allowed map[string]map[v1.DisruptionReason]int) {
	for _, p := range pools {
		np := p.NodePool
		var zero []string
		for _, r := range []v1.DisruptionReason{v1.DisruptionReasonEmpty, v1.DisruptionReasonDrifted, v1.DisruptionReasonUnderutilized} {
			if n, ok := allowed[np.Name][r]; ok && n <= 0 {
				zero = append(zero, string(r))
			}
		}
		key := strings.Join(zero, ",")
		if c.budgetBlocked[np.Name] == key {
			continue
		}
		before := c.budgetBlocked[np.Name]
		c.budgetBlocked[np.Name] = key
		for _, r := range zero {
			if !slices.Contains(strings.Split(before, ","), r) {
				c.recorder.Eventf(np, corev1.EventTypeNormal, ReasonDisruptionBlocked, "No allowed disruptions for disruption reason %s due to blocking budget", r)
			}
		}
	}
}
