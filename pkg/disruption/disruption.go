// Package disruption decides which nodes to take away or replace: empty nodes,
// drifted nodes, and nodes whose pods would run more cheaply elsewhere. It asks the
// scheduling engine where a node's pods would go were the node gone, on a copy of
// the cluster, and holds every decision to the NodePools' disruption budgets,
// PodDisruptionBudgets and karpenter.sh/do-not-disrupt. It is pure: a snapshot in,
// one command out.
package disruption

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Input is the cluster as one disruption pass sees it.
type Input struct {
	Now time.Time
	// Cluster holds the nodes (registered and launching) with their pods, and the
	// NodePools with their instance types. Nodes being deleted are left out; their
	// claims, in Claims, still count against budgets.
	Cluster *scheduling.Input
	Claims  []*v1.NodeClaim
	PDBs    []*policyv1.PodDisruptionBudget
	// ProviderDrift names the claims the cloud provider reports drifted, and why.
	ProviderDrift map[string]string
	// Manages reports whether a claim's NodeClass is one the running cloud provider
	// launches from. Any other claim belongs to another controller (Karpenter itself,
	// during a cut-over): it is never disrupted, and does not count in budgets. Nil
	// means every claim is Tailor's (a simulation).
	Manages func(*v1.NodeClaim) bool
	// InFlight names the claims of commands already decided and not yet done
	// (waiting for validation or for their replacements): they count against
	// budgets, are not candidates again, and their pods are counted as needing a
	// place, so that several commands can be in flight at once without two of
	// them counting on the same room.
	InFlight map[string]bool
	// Replacements names the replacement claims of commands in flight. The first
	// replacement of a multi-node command stands idle while the others come up:
	// it is not a candidate (empty, it would be deleted under the command), but it
	// is a destination, and it is not leaving.
	Replacements map[string]bool
	// Buffers are the CapacityBuffers' placeholder pods: room that consolidation
	// keeps (see withBuffers).
	Buffers []*corev1.Pod
	Options Options
}

// Options tune the decisions.
type Options struct {
	// MinSavings is the fraction of the current price a replacement must save:
	// consolidation never swaps nodes for pennies. Zero means DefaultMinSavings; a
	// negative value means any saving.
	MinSavings float64
	// MultiNodeLimit bounds the candidates multi-node consolidation considers
	// together. Zero means 100.
	MultiNodeLimit int
	// SpotToSpotConsolidation lets a spot node be replaced by a cheaper spot node
	// (Karpenter's feature gate of that name, off by default): one node at a time,
	// and only with SpotToSpotMinOptions cheaper types to choose from. Off, spot
	// nodes are consolidated only by deletion.
	SpotToSpotConsolidation bool
	// Scheduling are the engine's options, as provisioning uses them: where pods
	// would go is decided the same way.
	Scheduling scheduling.Options
}

// DefaultMinSavings is the saving a consolidation replacement must bring by default.
const DefaultMinSavings = 0.10

// SpotToSpotMinOptions is how many cheaper instance types a spot node's spot
// replacement must be able to use: with fewer, the replacement would likely be the
// next spot node to be interrupted or replaced again.
const SpotToSpotMinOptions = 15

// Kind says how a command came about.
type Kind string

// The kinds of commands, as metrics label them.
const (
	KindEmpty  Kind = "empty"
	KindSingle Kind = "single"
	KindMulti  Kind = "multi"
	KindDrift  Kind = "drift"
)

// Command is one disruption to carry out: launch the replacements, then delete the
// candidates.
type Command struct {
	Reason       v1.DisruptionReason
	Kind         Kind
	Candidates   []*Candidate
	Replacements []*scheduling.NewNode
	// Refill marks the drift of a busy node of a static NodePool: the pool's own
	// controller launches its replacement from the template once the node is
	// tainted, and the command waits for it before the node goes.
	Refill bool
	// Savings is the price per hour the command takes off the cluster (negative for
	// a drift replacement that costs more).
	Savings float64
}

// Decision reports "delete" or "replace", as Karpenter's metrics do.
func (c *Command) Decision() string {
	if len(c.Replacements) == 0 && !c.Refill {
		return "delete"
	}
	return "replace"
}

func (c *Command) String() string {
	names := make([]string, len(c.Candidates))
	for i, cand := range c.Candidates {
		names[i] = cand.Node.Node.Name
	}
	s := fmt.Sprintf("%s %s (%s) of %s", c.Decision(), c.Reason, c.Kind, strings.Join(names, ", "))
	if c.Refill {
		s += " with a node of static NodePool " + c.Candidates[0].Pool.NodePool.Name
	}
	if len(c.Replacements) > 0 {
		types := make([]string, len(c.Replacements))
		for i, r := range c.Replacements {
			types[i] = r.InstanceType.Name + "/" + r.Offering.CapacityType
		}
		s += " with " + strings.Join(types, ", ")
	}
	return s + fmt.Sprintf(", saving $%.4f/h", c.Savings)
}

// Blocked is a node that was a candidate but is not being disrupted, and why.
type Blocked struct {
	Node      string
	Kind      BlockKind
	Reason    string
	Candidate *Candidate
}

// Decision is the outcome of one pass.
type Decision struct {
	// Command is nil when there is nothing to do.
	Command *Command
	// Blocked are consolidation candidates held back, for events.
	Blocked []Blocked
	// Eligible counts the candidates of each method.
	Eligible map[v1.DisruptionReason]int
	// Allowed is each NodePool's remaining budget per reason.
	Allowed map[string]map[v1.DisruptionReason]int
	// Budgets are each NodePool's budgets per reason before the nodes already
	// disrupting count against them: how many of its nodes may be disrupting at
	// once (math.MaxInt when no budget active limits it).
	Budgets map[string]map[v1.DisruptionReason]int
	// Disrupting is, for each NodePool, how many of its nodes already count
	// against its budgets (being deleted or disrupted, or NotReady).
	Disrupting map[string]int
	// States are, by NodeClaim name, what the candidates' Drifted and
	// Consolidatable conditions should say.
	States map[string]ClaimState
}

// ClaimState is what a candidate's disruption conditions say, as Karpenter writes
// them on NodeClaims.
type ClaimState struct {
	// Drifted is why the claim drifted ("Reason: detail"), or "".
	Drifted string
	// Consolidatable: consolidateAfter has passed since its last pod event.
	Consolidatable bool
}

// Candidate is a node Tailor launched that may be disrupted.
type Candidate struct {
	Claim *v1.NodeClaim
	Node  *scheduling.Node
	Pool  *scheduling.NodePool
	// Price is what the node costs per hour: its offering's price and its pool's
	// per-node cost (zero if the provider no longer lists the offering).
	Price        float64
	CapacityType string
	// Pods are the pods that would have to move: not DaemonSet, mirror or finished.
	Pods []*corev1.Pod

	cost           float64 // of disrupting it: more pods, higher priority, later expiry cost more
	consolidatable bool    // consolidateAfter has passed since its last pod event
	drift          string  // why it drifted, if it did
	blockedNode    string  // do-not-disrupt on the node or claim: nothing voluntary may touch it
	blockedPods    string  // a pod that may not be evicted now
	moved          []*corev1.Pod
}

// Decide picks the next disruption: empty nodes first, then drifted ones, then
// consolidation (several nodes into at most one, then single nodes), which also
// waits for the empty nodes not yet deleted. At most one command comes back; the
// controller carries it out and asks again.
func Decide(in *Input) *Decision {
	d := newDecider(withBuffers(in))
	dec := &Decision{Eligible: map[v1.DisruptionReason]int{}, Allowed: d.allowed, Budgets: d.budgets, Disrupting: d.disrupting, States: map[string]ClaimState{}}
	for _, c := range d.candidates {
		dec.States[c.Claim.Name] = ClaimState{Drifted: c.drift, Consolidatable: c.consolidatable}
	}
	for _, method := range []func(*Decision) *Command{d.emptiness, d.drift, d.consolidation} {
		if cmd := method(dec); cmd != nil {
			dec.Command = cmd
			break
		}
	}
	// A node blocked for several methods is reported once, for the first.
	seen := map[string]bool{}
	dec.Blocked = slices.DeleteFunc(dec.Blocked, func(b Blocked) bool {
		dup := seen[b.Node]
		seen[b.Node] = true
		return dup
	})
	return dec
}

type decider struct {
	in         *Input
	opts       Options
	candidates []*Candidate // cheapest to disrupt first
	allowed    map[string]map[v1.DisruptionReason]int
	budgets    map[string]map[v1.DisruptionReason]int // allowed with nothing disrupting
	disrupting map[string]int                         // by NodePool, of those in allowed
	pdbs       []pdb
	// nodes are all the nodes, launching ones too: pending pods are planned onto them.
	nodes []*scheduling.Node
	// dests are the nodes a candidate's pods may move to: up and ready. A node still
	// coming up (or stuck coming up) or NotReady would leave them pending.
	dests []*scheduling.Node
	quick *quick
	// needed are the nodes pending pods would be placed on: taking them away would
	// only have new ones launched for those pods.
	needed map[*scheduling.Node]string
	// leaving are the nodes in-flight commands (or another controller) are taking
	// away: no destination, and their pods need a place.
	leaving map[*scheduling.Node]bool
	// waiting are, by NodePool, the empty and emptying nodes that emptiness will
	// delete and this pass does not (see waitingEmpty): no pods are moved while
	// deleting them saves as much, and moves leave them the budget they need.
	waiting map[string]emptyWait
}

// emptyWait counts a NodePool's nodes waiting to be deleted as empty.
type emptyWait struct {
	nodes  int
	saving float64 // their price per hour
}

type pdb struct {
	obj      *policyv1.PodDisruptionBudget
	selector labels.Selector
}

func newDecider(in *Input) *decider {
	d := &decider{in: in, opts: in.Options}
	if d.opts.MinSavings == 0 {
		d.opts.MinSavings = DefaultMinSavings
	}
	if d.opts.MultiNodeLimit == 0 {
		d.opts.MultiNodeLimit = 100
	}
	for _, p := range in.PDBs {
		// policy/v1: a null selector selects nothing, an empty one every pod.
		if p.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil {
			continue
		}
		d.pdbs = append(d.pdbs, pdb{obj: p, selector: sel})
	}
	pools := map[string]*scheduling.NodePool{}
	for _, p := range in.Cluster.NodePools {
		pools[p.NodePool.Name] = p
	}
	// Copies that carry their pods' summed requests: every simulation reads them.
	d.nodes = make([]*scheduling.Node, len(in.Cluster.Nodes))
	for i, n := range in.Cluster.Nodes {
		cp := *n
		cp.Requests = requests(n.Pods)
		d.nodes[i] = &cp
	}
	nodes := map[string]*scheduling.Node{}
	for _, n := range d.nodes {
		if id := n.Node.Spec.ProviderID; id != "" && !n.Launching {
			nodes[id] = n
		}
	}
	d.leaving = map[*scheduling.Node]bool{}
	total, disrupting := map[string]int{}, map[string]int{}
	for _, nc := range in.Claims {
		if in.Manages != nil && !in.Manages(nc) {
			continue
		}
		pool := nc.Labels[v1.NodePoolLabelKey]
		if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeRegistered) {
			continue // launching: not a candidate, and no destination either
		}
		node := nodes[nc.Status.ProviderID]
		up := meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized)
		if up {
			total[pool]++ // replacements still coming up do not widen percentages
		}
		switch {
		case nc.DeletionTimestamp != nil, node == nil:
			disrupting[pool]++
			continue
		case hasTaint(node.Node, v1.DisruptedNoScheduleTaint), in.InFlight[nc.Name]:
			disrupting[pool]++
			d.leaving[node] = true
			continue
		case !up:
			// Coming up, or stuck: the lifecycle's initialization timeout removes it.
			// It holds nothing back meanwhile.
			continue
		case in.Replacements[nc.Name]:
			continue
		case notReady(node.Node):
			// As Karpenter counts them: a NotReady node is capacity already lost, and
			// node repair, not consolidation, replaces it.
			disrupting[pool]++
			continue
		}
		if np := pools[pool]; np != nil {
			d.candidates = append(d.candidates, d.candidate(nc, node, np))
		}
	}
	d.allowed = map[string]map[v1.DisruptionReason]int{}
	d.budgets = map[string]map[v1.DisruptionReason]int{}
	d.disrupting = map[string]int{}
	for name, p := range pools {
		d.allowed[name] = map[v1.DisruptionReason]int{}
		d.budgets[name] = map[v1.DisruptionReason]int{}
		d.disrupting[name] = disrupting[name]
		for _, r := range []v1.DisruptionReason{v1.DisruptionReasonEmpty, v1.DisruptionReasonDrifted, v1.DisruptionReasonUnderutilized} {
			d.allowed[name][r] = Allowed(p.NodePool.Spec.Disruption.Budgets, r, in.Now, total[name], disrupting[name])
			d.budgets[name][r] = Allowed(p.NodePool.Spec.Disruption.Budgets, r, in.Now, total[name], 0)
		}
	}
	d.dests = d.destinations()
	d.needed = d.settle()
	d.waiting = map[string]emptyWait{}
	for _, c := range d.candidates {
		// A NodePool whose budgets let no empty node go even with nothing else
		// disrupting keeps its empty nodes waiting for a schedule or a change of
		// budget, not for the commands in flight.
		if pool := c.Pool.NodePool.Name; d.budgets[pool][v1.DisruptionReasonEmpty] > 0 && d.waitingEmpty(c) {
			w := d.waiting[pool]
			w.nodes++
			w.saving += c.Price
			d.waiting[pool] = w
		}
	}
	d.quick = newQuick(d.dests, in.Cluster.NodePools)
	slices.SortStableFunc(d.candidates, func(a, b *Candidate) int {
		if a.cost != b.cost {
			if a.cost < b.cost {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Node.Node.Name, b.Node.Node.Name)
	})
	return d
}

func (d *decider) candidate(nc *v1.NodeClaim, node *scheduling.Node, pool *scheduling.NodePool) *Candidate {
	c := &Candidate{Claim: nc, Node: node, Pool: pool, CapacityType: node.Node.Labels[v1.CapacityTypeLabelKey]}
	if price, ok := scheduling.OfferingPrice(pool.InstanceTypes, node.Node.Labels); ok {
		c.Price = price + pool.NodeCost.Total()
	}
	if node.Node.Annotations[v1.DoNotDisruptAnnotationKey] == "true" {
		c.blockedNode = fmt.Sprintf("node %s is annotated %s", node.Node.Name, v1.DoNotDisruptAnnotationKey)
	} else if nc.Annotations[v1.DoNotDisruptAnnotationKey] == "true" {
		c.blockedNode = fmt.Sprintf("nodeclaim %s is annotated %s", nc.Name, v1.DoNotDisruptAnnotationKey)
	}
	for _, p := range node.Pods {
		if scheduling.IsTerminal(p) || scheduling.IsMirrorPod(p) {
			continue
		}
		if c.blockedPods == "" {
			c.blockedPods = d.evictionBlocked(p)
		}
		if !scheduling.Reschedulable(p) {
			continue
		}
		c.Pods = append(c.Pods, p)
		c.cost += podCost(p)
	}
	c.cost *= lifetimeRemaining(nc, d.in.Now)
	c.consolidatable = consolidatable(nc, pool.NodePool, d.in.Now)
	c.drift = d.drifted(c)
	return c
}

// waitingEmpty reports a candidate emptiness will delete without moving a pod:
// none of its pods needs a place elsewhere (those it has are terminating, as a
// scale-down's are), nothing holds it back, and its NodePool deletes empty nodes
// once they have been quiet for consolidateAfter. Until then, usually seconds or
// minutes after its last pod left, it waits, as it does for budget that commands
// in flight hold.
func (d *decider) waitingEmpty(c *Candidate) bool {
	np := c.Pool.NodePool
	if np.IsStatic() || np.Spec.Disruption.ConsolidateAfter.Never || c.blockedNode != "" || c.blockedPods != "" || d.needed[c.Node] != "" {
		return false
	}
	for _, p := range c.Pods {
		if p.DeletionTimestamp == nil {
			return false
		}
	}
	return true
}

// evictionBlocked says why p may not be evicted now, or "".
func (d *decider) evictionBlocked(p *corev1.Pod) string {
	if isBufferPod(p) {
		return ""
	}
	if dnd := v1.PodDoNotDisrupt(p, d.in.Now); dnd.Active {
		if !dnd.Until.IsZero() {
			return fmt.Sprintf("pod %s/%s is annotated %s=%s, until %s", p.Namespace, p.Name, v1.DoNotDisruptAnnotationKey,
				p.Annotations[v1.DoNotDisruptAnnotationKey], dnd.Until.UTC().Format(time.RFC3339))
		}
		return fmt.Sprintf("pod %s/%s is annotated %s", p.Namespace, p.Name, v1.DoNotDisruptAnnotationKey)
	}
	if p.DeletionTimestamp != nil {
		return ""
	}
	set := labels.Set(p.Labels)
	var matching []string
	for _, b := range d.pdbs {
		if b.obj.Namespace != p.Namespace || !b.selector.Matches(set) {
			continue
		}
		if b.obj.Status.DisruptionsAllowed <= 0 {
			return fmt.Sprintf("pdb %s/%s prevents pod evictions", b.obj.Namespace, b.obj.Name)
		}
		matching = append(matching, b.obj.Name)
	}
	if len(matching) > 1 {
		// The Eviction API refuses a pod that several PDBs select.
		return fmt.Sprintf("pod %s/%s is selected by several PDBs (%s) and cannot be evicted", p.Namespace, p.Name, strings.Join(matching, ", "))
	}
	return ""
}

// podCost weighs evicting p: one per pod, nudged by its deletion cost and priority.
func podCost(p *corev1.Pod) float64 {
	cost := 1.0
	if s, ok := p.Annotations["controller.kubernetes.io/pod-deletion-cost"]; ok {
		var v float64
		if _, err := fmt.Sscan(s, &v); err == nil {
			cost += math.Max(-math.MaxInt32, math.Min(math.MaxInt32, v)) / (1 << 27)
		}
	}
	if p.Spec.Priority != nil {
		cost += float64(*p.Spec.Priority) / (1 << 25)
	}
	return cost
}

// lifetimeRemaining is the share of its life a node has left: a node about to expire
// is cheap to disrupt, it goes soon anyway.
func lifetimeRemaining(nc *v1.NodeClaim, now time.Time) float64 {
	d, ok := nc.Spec.ExpireAfter.Get()
	if !ok || d <= 0 {
		return 1
	}
	left := nc.CreationTimestamp.Add(d).Sub(now)
	return math.Max(0, math.Min(1, float64(left)/float64(d)))
}

// consolidatable reports that consolidateAfter has passed since the node was
// initialized and since a pod last arrived or left. A static NodePool's nodes
// never are: their number is the pool's replicas, not what its pods need (drift
// and expiration still replace them).
func consolidatable(nc *v1.NodeClaim, np *v1.NodePool, now time.Time) bool {
	if np.IsStatic() {
		return false
	}
	after, ok := np.Spec.Disruption.ConsolidateAfter.Get()
	if np.Spec.Disruption.ConsolidateAfter.Never {
		return false
	}
	if !ok {
		after = 0 // unset: the API's default
	}
	last := nc.Status.LastPodEventTime.Time
	if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeInitialized); c != nil && c.LastTransitionTime.After(last) {
		last = c.LastTransitionTime.Time
	}
	return !now.Before(last.Add(after))
}

// ExpiresAt is when a claim's expireAfter runs out, if it has one.
func ExpiresAt(nc *v1.NodeClaim) (time.Time, bool) {
	d, ok := nc.Spec.ExpireAfter.Get()
	if !ok {
		return time.Time{}, false
	}
	return nc.CreationTimestamp.Add(d), true
}

// notReady reports a node whose kubelet says it is not ready, or has stopped saying
// (Unknown). A node with no Ready condition at all (a simulated one) counts as ready.
func notReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *corev1.Node, t corev1.Taint) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(x corev1.Taint) bool { return x.Key == t.Key && x.Effect == t.Effect })
}

// requests sums the requests of the pods that have not finished.
func requests(pods []*corev1.Pod) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, p := range pods {
		if scheduling.IsTerminal(p) {
			continue
		}
		for name, q := range scheduling.PodRequests(p) {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	return out
}

// destinations are the nodes a candidate's pods may move to: up, ready, and not
// leaving.
func (d *decider) destinations() []*scheduling.Node {
	initialized := map[string]bool{} // by provider ID, every claim's, foreign ones too
	for _, nc := range d.in.Claims {
		if id := nc.Status.ProviderID; id != "" {
			initialized[id] = meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized)
		}
	}
	var dests []*scheduling.Node
	for _, n := range d.nodes {
		if n.Launching || d.leaving[n] {
			continue
		}
		if up, ok := initialized[n.Node.Spec.ProviderID]; (!ok || up) && !notReady(n.Node) {
			dests = append(dests, n)
		}
	}
	return dests
}

// settle places the pods that need a place (pending ones, those of nodes being
// deleted, and those of leaving nodes) on the cluster as it is, and returns the
// nodes they would go to: taking one away would only have a new node launched for
// them. The room they take on destinations is reserved there, so that no
// consolidation counts on it.
func (d *decider) settle() map[*scheduling.Node]string {
	needed := map[*scheduling.Node]string{}
	pods := slices.Clip(d.in.Cluster.Pods)
	var nodes []*scheduling.Node
	for _, n := range d.nodes {
		if !d.leaving[n] {
			nodes = append(nodes, n)
			continue
		}
		for _, p := range n.Pods {
			if scheduling.Reschedulable(p) {
				cp := *p
				cp.Spec.NodeName, cp.DeletionTimestamp = "", nil
				pods = append(pods, &cp)
			}
		}
	}
	if len(pods) == 0 {
		return needed
	}
	in := *d.in.Cluster
	in.Pods, in.Nodes = pods, nodes
	plan, err := scheduling.Solve(&in, d.opts.Scheduling)
	if err != nil {
		return needed
	}
	byName := make(map[string]*scheduling.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Node.Name] = n
	}
	dest := make(map[*scheduling.Node]bool, len(d.dests))
	for _, n := range d.dests {
		dest[n] = true
	}
	for _, b := range plan.Bindings {
		n := byName[b.Node]
		if n == nil {
			continue
		}
		if needed[n] == "" {
			needed[n] = fmt.Sprintf("pending pod %s/%s would run on it", b.Pod.Namespace, b.Pod.Name)
		}
		if dest[n] {
			reserve(n, b.Pod)
		}
	}
	return needed
}

// reserve counts p on n (a decider's own copy) as if it ran there.
func reserve(n *scheduling.Node, p *corev1.Pod) {
	cp := *p
	cp.Spec.NodeName = n.Node.Name
	n.Pods = append(slices.Clip(n.Pods), &cp)
	sum := n.Requests.DeepCopy()
	for name, q := range scheduling.PodRequests(p) {
		v := sum[name]
		v.Add(q)
		sum[name] = v
	}
	n.Requests = sum
}
