package scheduling

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// The solver: Solve, its top-level flow (set up, place, refine, plan) and the state
// those phases share.

// Solve places the pending pods: onto free room on existing nodes first, then onto
// nodes being launched, then onto new nodes from the NodePools in weight order. New
// nodes get the instance types that fit their pods, cheapest first. Pods that fit
// nowhere come back with a reason per NodePool. Solve is deterministic.
//
// No object in the input fails the solve: a pod the solve cannot read becomes
// unschedulable with the reason, a NodePool unavailable with the reason, and a
// DaemonSet is left out with a warning in the plan. The error is for the caller's
// sake only; today Solve always returns nil.
func Solve(in *Input, opts Options) (*Plan, error) {
	plan := solve(in, opts, false)
	if opts.MinValuesPolicy != MinValuesPolicyBestEffort || len(plan.Unschedulable) == 0 {
		return plan, nil
	}
	// Best effort: minValues give way where they are what leaves pods without a
	// node; the strict plan stands when relaxing places no more pods.
	if relaxed := solve(in, opts, true); len(relaxed.Unschedulable) < len(plan.Unschedulable) {
		return relaxed, nil
	}
	return plan, nil
}

func solve(in *Input, opts Options, relaxMinValues bool) *Plan {
	if len(in.Pods) < secondOpinionPods {
		return solveOnce(in, opts, 0, relaxMinValues)
	}
	// Growing a node only when that is no dearer than a fresh node is greedy: where
	// prices rise a little faster than sizes, it leaves every pod on a small node of
	// its own, and many small nodes waste more room than a few larger ones. A second
	// solve, alongside, lets nodes grow for slightly more; the cheaper plan wins, so
	// the result does not depend on which finishes first.
	var alt *Plan
	done := make(chan struct{})
	go func() {
		defer close(done)
		alt = solveOnce(in, opts, growSlack, relaxMinValues)
	}()
	plan := solveOnce(in, opts, 0, relaxMinValues)
	<-done
	switch {
	case len(alt.Unschedulable) < len(plan.Unschedulable),
		len(alt.Unschedulable) == len(plan.Unschedulable) && alt.Cost() < plan.Cost()-1e-9:
		return alt
	}
	return plan
}

// secondOpinionPods is the batch size from which Solve also tries growSlack: small
// batches gain little from it, and disruption solves small batches by the thousand.
const secondOpinionPods = 64

// growSlack is how much dearer than a fresh node the second solve lets a node's
// growth be, as a fraction of the fresh node's price.
const growSlack = 0.05

func solveOnce(in *Input, opts Options, slack float64, relaxMinValues bool) *Plan {
	s := newSolver(in, opts)
	s.growSlack, s.relaxMinValues = slack, relaxMinValues
	zones := s.effectiveZones()
	s.run()
	s.refine()
	plan := s.plan()
	plan.EffectiveZones = zones
	return plan
}

type nodeKind int

const (
	existingNode nodeKind = iota
	launchingNode
	plannedNode
)

// simNode is a node as the solve sees it: existing, launching, or planned.
type simNode struct {
	name          string
	kind          nodeKind
	reqs          Requirements
	taints        []corev1.Taint
	unschedulable bool
	alloc         Resources // existing: allocatable; planned: the size it is filled to
	capacity      Resources // existing: counted against its pool's limits
	used          Resources
	ports         []hostPort
	pods          []*podInfo // placed by this solve
	// volumeLimits are the CSI attach limits of an existing node (nil: none);
	// volumes the CSI volumes attached, by id, with their drivers.
	volumeLimits map[string]int64
	volumes      map[string]string

	// Planned nodes only.
	pool *poolState
	// options are the instance types its requirements still allow, cheapest
	// first; those too small for what it holds are skipped where read (fitting).
	// They may be the pool's own list: never written in place.
	options []*typeInfo
	first   int // options[first] is the cheapest that holds what it has
	// optionsFrom names options in the pool's shared lists (see narrowed); ""
	// when they are the node's own.
	optionsFrom string
	reserved    Resources // counted against the pool's limits
	// anchor is the allocatable the node is filled up to (see openNode).
	anchor Resources
	// settled caches settle for settledFrom, the requirements they narrow.
	settled     map[[2]string]Requirements
	settledFrom Requirements
}

type poolState struct {
	name        string
	unavailable string
	weight      int32
	pool        *v1.NodePool
	// nodeCost is each new node's cost besides its instance; typeInfo.price
	// includes it.
	nodeCost    NodeCost
	reqs        Requirements // template requirements and labels, and what the types offer
	taints      []corev1.Taint
	startup     []corev1.Taint
	daemonPorts []hostPort  // host ports DaemonSets take on every new node
	slots       []offerSlot // see addOfferSlots; nil when too many
	headroom    Resources   // limits less used, as new nodes are finished (see plan)
	types       []*typeInfo // compatible types with an available offering, cheapest first
	maxAlloc    Resources   // of types
	ranked      []*typeInfo // the same, best score first (see rank)
	// typePorts: some DaemonSet's host ports are taken on some of the types only
	// (typeInfo.daemonPorts; see portTypes).
	typePorts bool

	limited []int // resource positions the pool limits
	limits  Resources
	used    Resources // existing, launching and planned nodes
	demand  Resources // pending pods whose first choice is this pool
	demandN int64
	// uniform: every pod of the demand asks for firstReq (see rank).
	uniform  bool
	firstReq Resources
	domainsK map[string][]string
	// volumeLimited: some type has CSI attach limits.
	volumeLimited bool
	answers       map[string][]bool      // see memo
	lists         map[string][]*typeInfo // see narrowed
	key           []byte                 // memo keys are built here
}

type typeInfo struct {
	it       *InstanceType
	idx      int // position in the pool's types: price order
	reqs     Requirements
	alloc    Resources // allocatable less the DaemonSet pods
	daemons  Resources
	capacity Resources // for limits, with one "nodes"
	price    float64   // cheapest available offering within the pool, plus the pool's nodeCost
	// daemonPorts are the host ports of the DaemonSets that run on this type but
	// not on every type of the pool (those are the pool's daemonPorts).
	daemonPorts []hostPort
	// score is what serving the pool's pending pods with this type alone would cost.
	score float64
	// offers are its available offerings by price, with their pool slots.
	offers []slotOffer
}

type podInfo struct {
	pod   *corev1.Pod
	class *podClass
}

// classDemand is count pods of class that only size new nodes (Input.Demand).
type classDemand struct {
	class *podClass
	count int64
}

type solver struct {
	opts      Options
	growSlack float64 // see growSlack
	// relaxMinValues: the best-effort solve (MinValuesPolicyBestEffort).
	relaxMinValues bool
	exhaustive     bool // see try
	idx            *ResourceIndex
	nodesPos       int // position of the "nodes" pseudo-resource, or -1
	n              int // resources in use

	pools   []*poolState
	nodes   []*simNode // existing, then launching, then planned
	planned int
	pods    []*podInfo
	// demand only sizes new nodes (Input.Demand).
	demand     []classDemand
	classes    map[string]*podClass
	classList  []*podClass
	groups     map[string]*group
	groupList  []*group
	namespaces []*corev1.Namespace
	daemons    []*daemon

	pvcs           map[string]*corev1.PersistentVolumeClaim
	pvs            map[string]*corev1.PersistentVolume
	storageClasses map[string]*storagev1.StorageClass
	csiLimits      map[string]map[string]int64 // by node name

	placed     map[*corev1.Pod]*simNode
	failures   []Failure
	warnings   []string
	candidates map[string]candidateList
	scratch    []*typeInfo
	priced     []priced // see finish
	packing    packing  // see repack
	// bounded counts what the planned nodes took of offerings with a
	// ReservationCapacity (see finish).
	bounded map[boundKey]int
}

type daemon struct {
	pod   *corev1.Pod
	req   Resources
	terms []Requirements
	ports []hostPort
}
