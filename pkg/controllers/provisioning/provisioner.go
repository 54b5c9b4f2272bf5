// Package provisioning turns pods the kube-scheduler cannot place into NodeClaims:
// it batches the pods as they appear, asks the scheduling engine for a plan, and
// creates one NodeClaim per new node of the plan.
package provisioning

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	v1 "github.com/nodetailor/tailor/api/v1"
	cpmetrics "github.com/nodetailor/tailor/pkg/cloudprovider/metrics"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
	"github.com/nodetailor/tailor/pkg/events"
	"github.com/nodetailor/tailor/pkg/metrics"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// Options tune batching.
type Options struct {
	// BatchIdle closes a batch when no new pending pod arrived for this long.
	BatchIdle time.Duration
	// BatchMax closes a batch this long after its first pod, however busy.
	BatchMax time.Duration
	// Scheduling are the engine's options (preference and minValues policies).
	Scheduling scheduling.Options
	// CapacityBuffers keeps the room CapacityBuffers ask for, where the API
	// server serves them (feature gate CapacityBuffer).
	CapacityBuffers bool
}

// RBAC: what it reads and writes (see `make generate`).
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodeclaims,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=karpenter.sh,resources=nodepools,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Provisioner creates NodeClaims for pending pods.
type Provisioner struct {
	kube     client.Client
	cluster  *state.Cluster
	types    nodeclaim.InstanceTypes
	recorder record.EventRecorder
	// poolEvents tell a NodePool why it launches nothing, once per
	// PoolEventInterval while that lasts.
	poolEvents record.EventRecorder
	clock      clock.Clock
	opts       Options
	trigger    chan struct{}
	// wake opens a batch without holding it open (see TriggerFor).
	wake chan struct{}
	// batched holds the pods that triggered the open batch; waiting, the pods the
	// last batch left waiting for a claim (see TriggerFor).
	batchMu sync.Mutex
	batched map[types.UID]bool
	waiting map[types.UID]bool
	// nominated remembers the claim holding the room for each pending pod; only
	// the provisioning loop touches it.
	nominated nominations
	// planned holds the pending pods that were nominated before: a pod planned
	// again does not size new nodes for its whole workload (see madeDemand).
	planned map[types.UID]bool
	// batchOpened and batchClosed time the last batch window, for the log.
	batchOpened, batchClosed time.Time
	// refused says the last batch held claims back at a limit: the pods are still
	// pending, and nothing else may wake the provisioner for them.
	refused bool
	// typesFailed says the last batch left pods unschedulable while a NodePool's
	// instance types could not be read; typesBackoff is the wait before the next
	// look (see recheckAfter).
	typesFailed  bool
	typesBackoff time.Duration
	// warned holds the plan warnings already logged (a bad DaemonSet or NodePool
	// the solve left out), so each is logged once, not on every batch.
	warned map[string]bool
	// rounds counts scheduling rounds, for karpenter_scheduler_queue_depth's
	// scheduling_id.
	rounds uint64
	// release records each batch's claims in the order their nodes are to
	// register (see nodeclaim.ReleaseOrder); nil records nothing.
	release *nodeclaim.ReleaseOrder
	// events reads the FailedCreate events of pending pods' owners (see
	// canCome); nil reads none.
	events client.Reader
	// times records when pending pods were first seen and decided on, for the
	// pod metrics; nil records nothing.
	times *metrics.PodTimes
	// buffers says the last snapshot held CapacityBuffers: their room is looked
	// at again every BufferRecheck.
	buffers bool
}

// TimePodsWith has the provisioner record in t when it first sees each pending
// pod and when it first decides on it (see metrics.PodTimes).
func (p *Provisioner) TimePodsWith(t *metrics.PodTimes) *Provisioner {
	p.times = t
	return p
}

// ReadEventsWith has the provisioner read owners' events through r: an uncached
// reader, so that no informer holds every event of the cluster.
func (p *Provisioner) ReadEventsWith(r client.Reader) *Provisioner {
	p.events = r
	return p
}

// OrderReleases has the provisioner record its batches in o.
func (p *Provisioner) OrderReleases(o *nodeclaim.ReleaseOrder) *Provisioner {
	p.release = o
	return p
}

// NewProvisioner returns a provisioner; Start runs it.
func NewProvisioner(kube client.Client, cluster *state.Cluster, instanceTypes nodeclaim.InstanceTypes, recorder record.EventRecorder, clk clock.Clock, opts Options) *Provisioner {
	p := &Provisioner{kube: kube, cluster: cluster, types: instanceTypes, recorder: recorder, clock: clk, opts: opts,
		trigger: make(chan struct{}, 1), wake: make(chan struct{}, 1), batched: map[types.UID]bool{}, waiting: map[types.UID]bool{},
		nominated: nominations{}, planned: map[types.UID]bool{}, warned: map[string]bool{}}
	p.poolEvents = events.NewThrottled(recorder, clk, PoolEventInterval)
	return p
}

// Name is the controller's name.
func (p *Provisioner) Name() string { return ControllerName }

// Register adds the provisioning loop to mgr; it runs on the leader only. With
// CapacityBuffers on, where the API server serves them, the cluster view (shared
// with disruption) reads them from then on.
func (p *Provisioner) Register(ctx context.Context, mgr ctrl.Manager) error {
	switch {
	case !p.opts.CapacityBuffers:
	case BuffersServed(mgr.GetRESTMapper()):
		informer, err := mgr.GetCache().GetInformer(ctx, &cb.CapacityBuffer{})
		if err != nil {
			return fmt.Errorf("watching CapacityBuffers: %w", err)
		}
		p.cluster.WithBuffers(mgr.GetAPIReader()).WithSyncers(informer)
	default:
		log.FromContext(ctx).Info("the API server does not serve CapacityBuffers (autoscaling.x-k8s.io/v1beta1): no buffer is kept; install Tailor's CRDs and restart to keep them")
	}
	return mgr.Add(p)
}

// Trigger says pods may need nodes (a claim went away, a node is going); it never
// blocks.
func (p *Provisioner) Trigger() { p.TriggerFor("") }

// TriggerFor says the pod uid may need a node; it never blocks. The kube-scheduler
// rewrites a pending pod's status each time it retries it, as nodes appear, and
// those writes alone would keep every window open to its maximum. So a pod the
// open batch already has does not hold the batch open longer, and neither does a
// pod waiting for its claim: that one only opens a batch, in which its nomination
// is looked at again (its room may have been taken). Only new pods hold a window
// open, so pods whose room was taken are planned for within a second or so of
// the kube-scheduler's verdict, not up to BatchMax later.
func (p *Provisioner) TriggerFor(uid types.UID) {
	if uid != "" {
		p.batchMu.Lock()
		seen, waiting := p.batched[uid], p.waiting[uid]
		p.batched[uid] = true
		p.batchMu.Unlock()
		if seen {
			return
		}
		if waiting {
			select {
			case p.wake <- struct{}{}:
			default:
			}
			return
		}
	}
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// Start batches triggers and provisions once per batch until ctx ends.
func (p *Provisioner) Start(ctx context.Context) error {
	var recheck <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.trigger:
		case <-p.wake:
		case <-recheck:
		}
		recheck = nil
		p.batchOpened = p.clock.Now()
		if !p.waitForBatch(ctx) {
			return nil
		}
		p.closeBatch()
		if err := p.Provision(ctx); err != nil {
			log.FromContext(ctx).Error(err, "provisioning")
			// Try again soon: the pods are still pending.
			recheck = p.clock.After(time.Second)
			continue
		}
		p.batchMu.Lock()
		clear(p.waiting)
		for uid := range p.nominated {
			p.waiting[uid] = true
		}
		p.batchMu.Unlock()
		if after, ok := p.recheckAfter(); ok {
			recheck = p.clock.After(after)
		}
	}
}

// recheckAfter is how soon to plan again though nothing triggers it, if at all:
// what it waits for changes nothing it watches.
func (p *Provisioner) recheckAfter() (time.Duration, bool) {
	// A NodePool whose instance types could not be read (its NodeClass not
	// resolved yet in this process's cache, a cloud API error) may be readable in
	// a moment: look again, less often the longer it lasts.
	if p.typesFailed {
		p.typesBackoff = min(max(2*p.typesBackoff, time.Second), maxTypesBackoff)
	} else {
		p.typesBackoff = 0
	}
	switch {
	case p.release.Waiting():
		// Larger nodes wait for the pods of the smaller ones to land.
		return nodeclaim.ReleaseSettle, true
	case p.nominated.holding(), p.refused:
		// Pods held back wait for the other waiting pods to be placed; pods
		// refused at a limit for room to free up.
		return time.Second, true
	case p.typesFailed:
		return p.typesBackoff, true
	case len(p.nominated) > 0:
		// Pods waiting on their claims change nothing when a nomination lapses,
		// so nothing would wake us: look again while any wait.
		return min(NominationGrace/3, p.bufferRecheck()), true
	case p.buffers:
		return BufferRecheck, true
	}
	return 0, false
}

// bufferRecheck is BufferRecheck while buffers exist, else forever.
func (p *Provisioner) bufferRecheck() time.Duration {
	if p.buffers {
		return BufferRecheck
	}
	return time.Duration(1<<63 - 1)
}

// maxTypesBackoff bounds the wait between looks at a NodePool whose instance
// types could not be read.
const maxTypesBackoff = 30 * time.Second

// closeBatch ends the batch: its pods trigger the next one.
func (p *Provisioner) closeBatch() {
	p.batchClosed = p.clock.Now()
	p.batchMu.Lock()
	clear(p.batched)
	p.batchMu.Unlock()
}

// waitForBatch returns once no trigger for a new pod came for BatchIdle, or
// BatchMax passed.
func (p *Provisioner) waitForBatch(ctx context.Context) bool {
	deadline := p.clock.After(p.opts.BatchMax)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline:
			return true
		case <-p.trigger:
		case <-p.clock.After(p.opts.BatchIdle):
			return true
		}
	}
}

// Provision plans for the pending pods and creates the NodeClaims, then waits until
// the cache shows them, so the next plan counts them and no pod is provisioned for
// twice. Pods that wait for a claim are planned on its node, holding their room.
// Each claim is checked against its NodePool's limits just before it is created.
func (p *Provisioner) Provision(ctx context.Context) error {
	ctx = cpmetrics.WithController(ctx, ControllerName)
	p.refused, p.typesFailed = false, false
	began := p.clock.Now()
	snap, err := p.cluster.Snapshot(ctx, func(np *v1.NodePool) ([]*scheduling.InstanceType, error) { return p.types(ctx, np) })
	if err != nil {
		return err
	}
	pending := len(snap.Input.Pods)
	p.forgetPlanned(snap.Input.Pods)
	// fresh is the cluster before the waiting pods take their room (reserve adds
	// them to the snapshot's nodes).
	fresh := *snap.Input
	fresh.Nodes = cloneNodes(snap.Input.Nodes)
	var lapsed lapses
	snap.Input.Pods, lapsed = p.nominated.reserve(snap.Input, snap.Claims, p.clock.Now())
	p.observeReleases(snap.Claims)
	// The pods held back are not planned afresh either.
	fresh.Pods = slices.DeleteFunc(slices.Clone(fresh.Pods), p.nominated.held)
	p.buffers = len(snap.Buffers) > 0
	buffers := state.BufferPods(snap.Buffers)
	if len(snap.Input.Pods) == 0 && len(buffers) == 0 {
		p.updateBuffers(ctx, snap.Buffers, nil, true)
		return nil
	}
	start := p.clock.Now()
	p.rounds++
	round := strconv.FormatUint(p.rounds, 10)
	QueueDepth.WithLabelValues(ControllerName, round).Set(float64(len(snap.Input.Pods)))
	done := UnfinishedWork.start(ControllerName, round)
	want := p.wanted(ctx, snap.Input.Pods, snap.Owned)
	expected := expectedPods(snap.Input.Pods, want, snap.Owned, maxExpected,
		func(pods []*corev1.Pod) []bool { return scheduling.FitNewNodes(snap.Input, pods) })
	workloads := func(pods []*corev1.Pod) []scheduling.Demand {
		return madeDemand(pods, want, snap.Owned, p.planned, maxExpected)
	}
	in, plan, repacked, expectedUsed, buffersPlanned, err := planWithExpected(snap.Input, &fresh, expected, buffers, workloads, lapsed.any(), p.opts.Scheduling)
	QueueDepth.DeleteLabelValues(ControllerName, round)
	done()
	if err != nil {
		return err
	}
	solved := p.clock.Now()
	logPlan(log.FromContext(ctx), plan, repacked)
	SchedulingDuration.WithLabelValues(ControllerName).Observe(solved.Sub(start).Seconds())
	UnschedulablePods.WithLabelValues(ControllerName).Set(float64(len(plan.Unschedulable)))
	setEffectiveZones(snap.Input.Pods, plan.EffectiveZones)
	p.typesFailed = len(plan.Unschedulable) > 0 && len(snap.TypesFailed) > 0
	pools := map[string]*v1.NodePool{}
	for _, np := range snap.NodePools {
		pools[np.Name] = np
	}
	if repacked {
		// Every pending pod not held back was planned again: the old nominations are void.
		maps.DeleteFunc(p.nominated, func(_ types.UID, nom nomination) bool { return nom.claim != "" })
	}
	// Pods placed in room a claim holds wait for that claim, like those of new claims.
	claimOf := claimOfNode(claimNodes(in, snap.Claims))
	for _, b := range plan.Bindings {
		if claim, ok := claimOf[b.Node]; ok && !state.IsBufferPod(b.Pod) {
			p.nominate(b.Pod, claim, solved)
		}
	}
	// What counts against the limits now, not at the snapshot: claims created since
	// count too.
	var used map[string]corev1.ResourceList
	if len(plan.NewNodes) > 0 {
		if used, err = p.cluster.Usage(ctx, snap.Input.NodePools); err != nil {
			return err
		}
	}
	types := map[string]map[string]*scheduling.InstanceType{}
	for _, pool := range snap.Input.NodePools {
		types[pool.NodePool.Name] = state.TypesByName(pool.InstanceTypes)
	}
	sizes := make([]float64, len(plan.NewNodes))
	for i, n := range plan.NewNodes {
		sizes[i] = nodeclaim.NodeSize(n.InstanceType.Capacity.Cpu().MilliValue(), n.InstanceType.Capacity.Memory().Value())
	}
	batch := p.release.Batch(sizes)
	severalShapes := podShapes(plan.NewNodes) > 1
	// Nodes all of one size still open together when their pods differ: pods
	// of one shape fit wherever another was planned, these do not.
	if batch == nil && severalShapes && len(sizes) > 1 {
		batch = p.release.Together(len(sizes))
	}
	batch.AfterOthers(withPodsPlacedAfterOthers(plan.NewNodes))
	if severalShapes {
		batch.NominatePods()
	}
	created, refused, err := p.create(ctx, pools, types, newLimitBudget(pools, used), plan.NewNodes, batch)
	refusedPools := map[string]refusal{}
	for i, why := range refused {
		if why == "" || onlyBuffers(plan.NewNodes[i]) {
			// A buffer's refused room is told in its status.
			continue
		}
		p.refused = true
		pool := plan.NewNodes[i].NodePool
		log.FromContext(ctx).Info("not creating a NodeClaim: it would pass a limit", "nodepool", pool, "reason", why, "pods", len(plan.NewNodes[i].Pods))
		for _, pod := range plan.NewNodes[i].Pods {
			if !state.IsBufferPod(pod) {
				p.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedScheduling", "NodePool %s: %s; no NodeClaim created for this pod", pool, why)
			}
		}
		r := refusedPools[pool]
		refusedPools[pool] = refusal{why: cmp.Or(r.why, why), pods: r.pods + len(plan.NewNodes[i].Pods)}
	}
	p.recordDecisions(plan, refused, solved)
	for i, nc := range created {
		if nc == nil {
			continue
		}
		metrics.NodeClaimsCreated.WithLabelValues(metrics.ReasonProvisioned, plan.NewNodes[i].NodePool, "false").Inc()
		for _, pod := range plan.NewNodes[i].Pods {
			if state.IsBufferPod(pod) {
				continue
			}
			p.nominate(pod, nc.Name, solved)
			p.recorder.Eventf(pod, corev1.EventTypeNormal, "Nominated", "Pod should schedule on: nodeclaim/%s", nc.Name)
		}
	}
	p.planReleases()
	for _, f := range plan.Unschedulable {
		if !state.IsBufferPod(f.Pod) {
			p.recorder.Eventf(f.Pod, corev1.EventTypeWarning, "FailedScheduling", "No NodePool can provision a node for this pod: %s", f.Reason)
		}
	}
	if len(snap.Buffers) > 0 {
		made := make([]bool, len(created))
		for i, nc := range created {
			made[i] = nc != nil
		}
		p.updateBuffers(ctx, snap.Buffers, bufferOutcomes(plan, made, refused), buffersPlanned)
	}
	for _, b := range blockedPools(snap.Input.NodePools, snap.TypesFailed, realFailures(plan.Unschedulable), refusedPools) {
		p.poolEvents.Event(b.pool, corev1.EventTypeWarning, b.reason, b.message)
	}
	for _, w := range plan.Warnings {
		if !p.warned[w] {
			p.warned[w] = true
			log.FromContext(ctx).Info("planned without part of the input", "warning", w)
		}
	}
	created = slices.DeleteFunc(created, func(nc *v1.NodeClaim) bool { return nc == nil })
	if len(created) > 0 {
		planned := len(in.Pods) - expectedUsed
		if buffersPlanned {
			planned -= len(buffers)
		}
		log.FromContext(ctx).Info("provisioned", "nodeclaims", len(created), "pods", planned-len(plan.Unschedulable),
			"waiting", pending-planned, "unschedulable", len(plan.Unschedulable), "expected", expectedUsed, "pricePerHour", plan.Cost(),
			"onExistingNodes", len(plan.Bindings), "repacked", repacked,
			"lapsedGrace", lapsed.Grace, "lapsedRoomTaken", lapsed.RoomTaken, "lapsedClaimGone", lapsed.ClaimGone,
			"heldBack", lapsed.Held, "released", lapsed.Released,
			"snapshotSeconds", start.Sub(began).Seconds(), "solveSeconds", solved.Sub(start).Seconds(), "createSeconds", p.clock.Since(solved).Seconds(),
			"batchSeconds", p.batchClosed.Sub(p.batchOpened).Seconds(), "secondsAfterBatch", p.clock.Since(p.batchClosed).Seconds())
	}
	// Wait for the claims created even when others failed: the next plan must
	// count them.
	return errors.Join(err, p.waitForCache(ctx, created))
}

// recordDecisions records the plan's decision on each pod (see
// metrics.PodTimes): room found on a node up or in flight, or on a new node (even
// if writing its claim failed, as Karpenter decides before it creates), or none:
// no NodePool can take it, or its new node was refused at a limit.
func (p *Provisioner) recordDecisions(plan *scheduling.Plan, refused []string, at time.Time) {
	if p.times == nil {
		return
	}
	decide := func(pod *corev1.Pod, room bool) {
		if !virtual(pod) {
			p.times.Decide(client.ObjectKeyFromObject(pod), room, at)
		}
	}
	for _, b := range plan.Bindings {
		decide(b.Pod, true)
	}
	for i, n := range plan.NewNodes {
		for _, pod := range n.Pods {
			decide(pod, refused[i] == "")
		}
	}
	for _, f := range plan.Unschedulable {
		decide(f.Pod, false)
	}
}

// observeReleases tells the release order which claims are settled: up, with no
// pod waiting for them any more (bound, or its room taken) but those that may be
// placed only after pods planned for other nodes (see placedAfterOthers).
func (p *Provisioner) observeReleases(claims []*v1.NodeClaim) {
	live := make(map[string]*v1.NodeClaim, len(claims))
	for _, nc := range claims {
		if nc.DeletionTimestamp == nil {
			live[nc.Name] = nc
		}
	}
	holding := map[string]bool{}
	for _, nom := range p.nominated {
		if nom.claim != "" && !nom.afterOthers {
			holding[nom.claim] = true
		}
	}
	p.release.Observe(func(name string) bool { return live[name] != nil },
		func(name string) bool { return live[name] != nil && claimUp(live[name]) },
		func(name string) bool { return holding[name] })
	p.release.Plan(p.podsByClaim())
}

// withPodsPlacedAfterOthers marks the new nodes planned for pods placed after
// others (see placedAfterOthers).
func withPodsPlacedAfterOthers(nodes []*scheduling.NewNode) []bool {
	out := make([]bool, len(nodes))
	for i, n := range nodes {
		out[i] = slices.ContainsFunc(n.Pods, placedAfterOthers)
	}
	return out
}

// podShapes counts the different resource requests of the new nodes' pods.
func podShapes(nodes []*scheduling.NewNode) int {
	shapes := map[string]bool{}
	for _, n := range nodes {
		for _, pod := range n.Pods {
			shapes[resourceKey(scheduling.PodRequests(pod))] = true
		}
	}
	return len(shapes)
}

// resourceKey is a resource list as a string, its names in order.
func resourceKey(rl corev1.ResourceList) string {
	names := slices.Sorted(maps.Keys(rl))
	var b strings.Builder
	for _, name := range names {
		q := rl[name]
		fmt.Fprintf(&b, "%s=%s,", name, q.String())
	}
	return b.String()
}

// planReleases tells the release order which pods wait for which claim's node.
func (p *Provisioner) planReleases() {
	if p.release != nil {
		p.release.Plan(p.podsByClaim())
	}
}

// podsByClaim returns the pods waiting for each claim's node.
func (p *Provisioner) podsByClaim() map[string][]types.NamespacedName {
	waiting := map[string][]types.NamespacedName{}
	for _, nom := range p.nominated {
		if nom.claim != "" {
			waiting[nom.claim] = append(waiting[nom.claim], nom.pod)
		}
	}
	return waiting
}

// nominate records that pod waits for claim's node, planned from now on.
func (p *Provisioner) nominate(pod *corev1.Pod, claim string, at time.Time) {
	p.nominated.nominate(pod, claim, at)
	p.planned[pod.UID] = true
}

// forgetPlanned keeps only the pods still pending in planned.
func (p *Provisioner) forgetPlanned(pending []*corev1.Pod) {
	still := make(map[types.UID]bool, len(pending))
	for _, pod := range pending {
		still[pod.UID] = true
	}
	maps.DeleteFunc(p.planned, func(uid types.UID, _ bool) bool { return !still[uid] })
}

// planWithExpected plans for the pods still to place together with the pods their
// owners are still to make (see expectedPods), new nodes sized for the whole of
// their workloads (demand, of an input's pods; nil for none), and drops from the
// plan what it holds for the expected pods alone. The expected pods take room, so
// when the plan leaves real pods unschedulable (the expected ones took the room up
// to a limit, say), it plans without them too, and keeps the plan with them only
// if it places every real pod that the plan without them places: a pod still to
// come never takes a NodePool's headroom from a pod that exists, even when the
// two plans leave as many pods out (comparing counts only, the copies won
// whenever they traded a real pod of another workload for one of their own
// node's). It returns the input of the plan it kept, and how many expected pods that holds.
//
// A CapacityBuffer's placeholder pods (buffers) are planned the same way, but
// the new nodes that take only placeholders are kept: their room is what the
// buffer asks for. buffersPlanned says whether the plan kept holds them.
func planWithExpected(pinned, fresh *scheduling.Input, expected, buffers []*corev1.Pod, demand func([]*corev1.Pod) []scheduling.Demand, lapsed bool, opts scheduling.Options) (
	in *scheduling.Input, plan *scheduling.Plan, repacked bool, expectedUsed int, buffersPlanned bool, err error) {
	with := func(in *scheduling.Input) *scheduling.Input {
		c := *in
		if demand != nil {
			c.Demand = demand(in.Pods)
		}
		if len(expected)+len(buffers) > 0 {
			c.Pods = append(append(slices.Clone(in.Pods), expected...), buffers...)
		}
		return &c
	}
	pinnedWith, freshWith := with(pinned), with(fresh)
	if len(expected)+len(buffers) == 0 && len(pinnedWith.Demand) == 0 && len(freshWith.Demand) == 0 {
		in, plan, repacked, err = planPods(pinned, fresh, lapsed, opts)
		return in, plan, repacked, 0, false, err
	}
	if in, plan, repacked, err = planPods(pinnedWith, freshWith, lapsed, opts); err != nil {
		return nil, nil, false, 0, false, err
	}
	uids := make(map[types.UID]bool, len(expected))
	for _, p := range expected {
		uids[p.UID] = true
	}
	withoutExpected(plan, uids)
	if len(expected)+len(buffers) == 0 || len(realFailures(plan.Unschedulable)) == 0 {
		return in, plan, repacked, len(expected), len(buffers) > 0, nil
	}
	in2, plan2, repacked2, err := planPods(pinned, fresh, lapsed, opts)
	if err != nil || placesAll(plan, plan2) {
		return in, plan, repacked, len(expected), len(buffers) > 0, nil
	}
	return in2, plan2, repacked2, 0, false, nil
}

// realFailures are the failures of pods that exist (not placeholders).
func realFailures(fs []scheduling.Failure) []scheduling.Failure {
	if !slices.ContainsFunc(fs, func(f scheduling.Failure) bool { return state.IsBufferPod(f.Pod) }) {
		return fs
	}
	return slices.DeleteFunc(slices.Clone(fs), func(f scheduling.Failure) bool { return state.IsBufferPod(f.Pod) })
}

// placesAll reports whether plan places every pod that other places: each pod plan
// leaves unschedulable, other leaves unschedulable too. A pod that is not in
// other's input is placed by it (it holds the room of its nomination).
func placesAll(plan, other *scheduling.Plan) bool {
	left := make(map[types.UID]bool, len(other.Unschedulable))
	for _, f := range other.Unschedulable {
		left[f.Pod.UID] = true
	}
	return !slices.ContainsFunc(realFailures(plan.Unschedulable), func(f scheduling.Failure) bool { return !left[f.Pod.UID] })
}

// planPods plans for the pods still to place (pinned: the waiting pods hold their
// room). When nominations lapsed and that plan needs new nodes, it also plans
// every pending pod afresh over all the room (fresh), and keeps that plan if it
// costs less; it returns the input of the plan it kept.
//
// Nominations lapse mostly because the kube-scheduler spreads pods over the nodes
// up first, not as planned: each pod it moves takes a planned pod's room and leaves
// its own, of another size, elsewhere. Planning only the displaced pods into the
// room left over finds it in pieces; planning all waiting pods again can fit the
// same pods into the same room without new nodes.
//
// Planned afresh in one pass, a pod that may go anywhere can still take the one
// node in flight in a zone that a zone-spread pod needs (the solve tries the
// larger pods first): the fresh plan then makes the spread pod a claim of its own,
// as the pinned one did. So the pods that only some of the room suits are also
// placed first, into the room there is (see constrainedFirst), and the rest after
// them; of the three plans the cheapest is kept.
func planPods(pinned, fresh *scheduling.Input, lapsed bool, opts scheduling.Options) (*scheduling.Input, *scheduling.Plan, bool, error) {
	plan, err := scheduling.Solve(pinned, opts)
	if err != nil || !lapsed || len(plan.NewNodes) == 0 {
		return pinned, plan, false, err
	}
	kept, best, repacked := pinned, plan, false
	better := func(in *scheduling.Input, p *scheduling.Plan) {
		if p != nil && len(p.Unschedulable) <= len(plan.Unschedulable) && p.Cost() < best.Cost() {
			kept, best, repacked = in, p, true
		}
	}
	repack, err := scheduling.Solve(fresh, opts)
	if err != nil {
		return pinned, plan, false, nil
	}
	better(fresh, repack)
	if len(best.NewNodes) > 0 {
		if in, p, err := constrainedFirst(fresh, opts); err == nil {
			better(in, p)
		}
	}
	return kept, best, repacked, nil
}

// constrainedFirst plans fresh's pods in two passes: first the pods placed only
// after others (a hard spread over zones, a required pod affinity; see
// placedAfterOthers) into the room of the existing and launching nodes alone,
// then, beside them, every other pod and those that found no room, new nodes
// allowed. It returns the input of the second pass, whose nodes hold the first
// pass's pods, and one plan of both; nil when no pod is constrained or none found
// room in the first pass.
func constrainedFirst(fresh *scheduling.Input, opts scheduling.Options) (*scheduling.Input, *scheduling.Plan, error) {
	var first, rest []*corev1.Pod
	for _, pod := range fresh.Pods {
		if placedAfterOthers(pod) && !virtual(pod) {
			first = append(first, pod)
		} else {
			rest = append(rest, pod)
		}
	}
	if len(first) == 0 {
		return nil, nil, nil
	}
	in := *fresh
	in.Pods, in.NodePools, in.Demand = first, nil, nil
	placed, err := scheduling.Solve(&in, opts)
	if err != nil || len(placed.Bindings) == 0 {
		return nil, nil, err
	}
	second := *fresh
	second.Nodes = cloneNodes(fresh.Nodes)
	byName := make(map[string]*scheduling.Node, len(second.Nodes))
	for _, n := range second.Nodes {
		byName[n.Node.Name] = n
	}
	for _, b := range placed.Bindings {
		byName[b.Node].Pods = append(byName[b.Node].Pods, b.Pod)
	}
	for _, f := range placed.Unschedulable {
		rest = append(rest, f.Pod)
	}
	second.Pods = rest
	plan, err := scheduling.Solve(&second, opts)
	if err != nil {
		return nil, nil, err
	}
	plan.Bindings = append(slices.Clone(placed.Bindings), plan.Bindings...)
	return &second, plan, nil
}

// cloneNodes copies the nodes and their pod lists, not the objects in them.
func cloneNodes(nodes []*scheduling.Node) []*scheduling.Node {
	out := make([]*scheduling.Node, len(nodes))
	for i, n := range nodes {
		c := *n
		c.Pods = slices.Clone(n.Pods)
		out[i] = &c
	}
	return out
}

// createParallelism is how many NodeClaims are created at once. A large batch's
// claims are written while the API server is busy (each create is answered in up
// to a second), and in waves of 64 the 180 claims of a 1,000-pod batch took 2.6 to
// 3.2 s; the first launches and bindings load it more with every wave.
const createParallelism = 256

// create makes the NodeClaims of the new nodes side by side, each taken from the
// limit budget first. created[i] is nil where nodes[i] failed or was refused;
// refused[i] says which limit it would have passed. types are each pool's instance
// types by name, for the claims' reservations; each claim created joins release.
func (p *Provisioner) create(ctx context.Context, pools map[string]*v1.NodePool, types map[string]map[string]*scheduling.InstanceType,
	budget *limitBudget, nodes []*scheduling.NewNode, release *nodeclaim.ReleaseBatch) (created []*v1.NodeClaim, refused []string, err error) {
	created = make([]*v1.NodeClaim, len(nodes))
	refused = make([]string, len(nodes))
	errs := make([]error, len(nodes))
	// The claims of pods that exist take the limits' headroom first, then those
	// of CapacityBuffers' placeholders alone.
	var first, then []int
	for i, n := range nodes {
		if onlyBuffers(n) {
			then = append(then, i)
		} else {
			first = append(first, i)
		}
	}
	for _, order := range [][]int{first, then} {
		workqueue.ParallelizeUntil(ctx, createParallelism, len(order), func(j int) {
			p.createOne(ctx, pools, types, budget, nodes, release, order[j], created, refused, errs)
		})
	}
	return created, refused, errors.Join(errs...)
}

// createOne creates the claim of nodes[i] (see create).
func (p *Provisioner) createOne(ctx context.Context, pools map[string]*v1.NodePool, types map[string]map[string]*scheduling.InstanceType,
	budget *limitBudget, nodes []*scheduling.NewNode, release *nodeclaim.ReleaseBatch, i int, created []*v1.NodeClaim, refused []string, errs []error) {
	pool := nodes[i].NodePool
	nc := nodeclaim.New(pools[pool], nodes[i])
	need := state.ClaimUsage(nc, types[pool])
	if refused[i] = budget.take(pool, need); refused[i] != "" {
		return
	}
	if err := p.kube.Create(ctx, nc); err != nil {
		budget.give(pool, need)
		errs[i] = fmt.Errorf("creating a NodeClaim for NodePool %s: %w", pool, err)
		return
	}
	release.Add(i, nc.Name)
	created[i] = nc
}

func (p *Provisioner) waitForCache(ctx context.Context, created []*v1.NodeClaim) error {
	return wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, nc := range created {
			if err := p.kube.Get(ctx, client.ObjectKeyFromObject(nc), &v1.NodeClaim{}); err != nil {
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				return false, err
			}
		}
		return true, nil
	})
}
