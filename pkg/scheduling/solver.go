package scheduling

import (
	"cmp"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

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
	s.run()
	s.refine()
	return s.plan()
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
	reqs        Requirements // template requirements and labels, and what the types offer
	taints      []corev1.Taint
	startup     []corev1.Taint
	daemonPorts []hostPort  // host ports DaemonSets take on every new node
	slots       []offerSlot // see addOfferSlots; nil when too many
	headroom    Resources   // limits less used, as new nodes are finished (see plan)
	types       []*typeInfo // compatible types with an available offering, cheapest first
	maxAlloc    Resources   // of types
	ranked      []*typeInfo // the same, best score first (see rank)

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
	price    float64   // cheapest available offering within the pool
	// score is what serving the pool's pending pods with this type alone would cost.
	score float64
	// offers are its available offerings by price, with their pool slots.
	offers []slotOffer
}

type podInfo struct {
	pod   *corev1.Pod
	class *podClass
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

	pools      []*poolState
	nodes      []*simNode // existing, then launching, then planned
	planned    int
	pods       []*podInfo
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

func newSolver(in *Input, opts Options) *solver {
	if opts.MaxInstanceTypes <= 0 {
		opts.MaxInstanceTypes = 60
	}
	s := &solver{opts: opts, idx: NewResourceIndex(), nodesPos: -1, classes: map[string]*podClass{},
		groups: map[string]*group{}, namespaces: in.Namespaces, placed: map[*corev1.Pod]*simNode{},
		pvcs: map[string]*corev1.PersistentVolumeClaim{}, pvs: map[string]*corev1.PersistentVolume{},
		storageClasses: map[string]*storagev1.StorageClass{}}
	for _, pvc := range in.PersistentVolumeClaims {
		s.pvcs[pvc.Namespace+"/"+pvc.Name] = pvc
	}
	for _, pv := range in.PersistentVolumes {
		s.pvs[pv.Name] = pv
	}
	for _, sc := range in.StorageClasses {
		s.storageClasses[sc.Name] = sc
		if sc.Annotations["storageclass.kubernetes.io/is-default-class"] == "true" {
			s.storageClasses[""] = sc
		}
	}
	for _, cn := range in.CSINodes {
		if limits := volumeLimitsOf(cn); limits != nil {
			if s.csiLimits == nil {
				s.csiLimits = map[string]map[string]int64{}
			}
			s.csiLimits[cn.Name] = limits
		}
	}
	for _, np := range in.NodePools {
		if _, ok := np.NodePool.Spec.Limits[corev1.ResourceName("nodes")]; ok {
			s.nodesPos = s.idx.position("nodes", true)
		}
	}
	// One malformed object must not stop every pod's provisioning: a DaemonSet the
	// solve cannot read is left out with a warning, a NodePool becomes unavailable
	// with its reason, and a pod becomes unschedulable with its own reason.
	s.addDaemons(in.DaemonSets)
	s.addNodes(in.Nodes)
	s.addPools(in.NodePools)
	s.addPods(in.Pods)
	s.n = s.idx.Len()
	for _, ps := range s.pools {
		ps.maxAlloc = maxAlloc(ps.types, s.n)
	}
	s.countExistingPods(in.Nodes)
	s.computeDemand()
	return s
}

// addDaemons reads the DaemonSet pods. One whose requests are out of range is left
// out; a node affinity term that cannot be read matches no node, as in the
// kube-scheduler. Both are reported in the plan's warnings.
func (s *solver) addDaemons(daemons []*corev1.Pod) {
	for _, d := range daemons {
		list := PodRequests(d)
		req := s.idx.Vector(list)
		if why := s.idx.OutOfRange(&req, list); why != "" {
			s.warnings = append(s.warnings, fmt.Sprintf("DaemonSet %s/%s is left out of new nodes' sizes: it %s", d.Namespace, d.Name, why))
			continue
		}
		terms, errs := nodeAffinityTerms(d)
		for _, err := range errs {
			s.warnings = append(s.warnings, fmt.Sprintf("DaemonSet %s/%s: %v", d.Namespace, d.Name, err))
		}
		s.daemons = append(s.daemons, &daemon{pod: d, req: req, terms: terms, ports: podHostPorts(d)})
	}
}

// daemonView is a new node's requirements as a DaemonSet selects nodes: it will be
// labelled karpenter.sh/registered and karpenter.sh/initialized, so DaemonSets
// that wait for those labels count towards its size too.
func daemonView(reqs Requirements) Requirements {
	return reqs.With(Requirement{Key: v1.NodeRegisteredLabelKey, values: []string{"true"}}).
		With(Requirement{Key: v1.NodeInitializedLabelKey, values: []string{"true"}})
}

// nodeAffinityTerms returns a pod's required node affinity alternatives joined with
// its nodeSelector. A term it cannot read is left out (it matches no node, as in
// the kube-scheduler), with an error saying why.
func nodeAffinityTerms(pod *corev1.Pod) ([]Requirements, []error) {
	base := Requirements{}
	for k, v := range pod.Spec.NodeSelector {
		base = base.With(Requirement{Key: k, values: []string{v}})
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return []Requirements{base}, nil
	}
	var terms []Requirements
	var errs []error
	for i, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		if len(t.MatchExpressions)+len(t.MatchFields) == 0 {
			continue
		}
		r, err := FromNodeSelectorTerm(&a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("node affinity term %d matches no node: %w", i, err))
			continue
		}
		terms = append(terms, base.And(r))
	}
	return terms, errs
}

// addNodes reads the existing and launching nodes. Amounts out of range saturate,
// so no node stops the solve: an absurd allocatable or request only makes that
// node roomy or full.
func (s *solver) addNodes(nodes []*Node) {
	sorted := slices.Clone(nodes)
	slices.SortStableFunc(sorted, func(a, b *Node) int {
		if a.Launching != b.Launching {
			if a.Launching {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Node.Name, b.Node.Name)
	})
	for _, in := range sorted {
		node := in.Node
		alloc := s.idx.Vector(node.Status.Allocatable)
		lbls := make(map[string]string, len(node.Labels)+1)
		for k, v := range node.Labels {
			lbls[k] = v
		}
		lbls[MetadataNameKey] = node.Name
		n := &simNode{name: node.Name, kind: existingNode, reqs: LabelRequirements(lbls),
			taints: node.Spec.Taints, unschedulable: node.Spec.Unschedulable, alloc: alloc, capacity: alloc}
		if len(node.Status.Capacity) > 0 {
			n.capacity = s.idx.Vector(node.Status.Capacity)
		}
		if s.nodesPos >= 0 {
			n.capacity.Set(s.nodesPos, 1)
		}
		if in.Launching {
			n.kind = launchingNode
		}
		n.volumeLimits = s.csiLimits[node.Name]
		if in.Requests != nil {
			n.used = s.idx.Vector(in.Requests)
		}
		for _, p := range in.Pods {
			if IsTerminal(p) {
				continue
			}
			if in.Requests == nil {
				n.used = n.used.Add(s.idx.Vector(PodRequests(p)), allResources)
			}
			n.ports = append(n.ports, podHostPorts(p)...)
			if n.volumeLimits != nil {
				n.attach(s.attachments(p))
			}
		}
		s.nodes = append(s.nodes, n)
	}
}

// addPools reads the NodePools. One whose requirements cannot be read (the API
// server's validation should have refused them) cannot launch anything, and says
// why; a limit too large to represent saturates, practically unlimited.
func (s *solver) addPools(pools []*NodePool) {
	for _, np := range pools {
		p := np.NodePool
		ps := &poolState{name: p.Name, pool: p, unavailable: np.Unavailable, taints: p.Spec.Template.Spec.Taints,
			startup: p.Spec.Template.Spec.StartupTaints, domainsK: map[string][]string{}}
		if len(np.Draining) > 0 {
			ps.used = s.idx.Vector(np.Draining)
		}
		if p.Spec.Weight != nil {
			ps.weight = *p.Spec.Weight
		}
		reqs, err := FromNodePool(p.Spec.Template.Spec.Requirements, p.Spec.Template.Labels)
		reqs = reqs.With(Requirement{Key: v1.NodePoolLabelKey, values: []string{p.Name}})
		if err != nil {
			if ps.unavailable == "" {
				ps.unavailable = fmt.Sprintf("its requirements cannot be read: %v", err)
			}
			ps.reqs = reqs
			s.pools = append(s.pools, ps)
			continue
		}
		ps.limits = s.idx.Vector(corev1.ResourceList(p.Spec.Limits))
		for name := range p.Spec.Limits {
			ps.limited = append(ps.limited, s.idx.position(name, false))
		}
		slices.Sort(ps.limited)
		var types []*typeInfo
		for _, it := range np.InstanceTypes {
			if _, ok := reqs.Intersects(it.Requirements); !ok {
				continue
			}
			offer, ok := it.CheapestOffering(reqs)
			if !ok {
				continue
			}
			t := &typeInfo{it: it, reqs: it.Requirements, price: offer.Price,
				alloc: s.idx.Vector(it.Allocatable()), capacity: s.idx.Vector(it.Capacity)}
			if s.nodesPos >= 0 {
				t.capacity.Set(s.nodesPos, 1)
			}
			nodeReqs := daemonView(reqs.And(it.Requirements))
			for _, d := range s.daemons {
				if Untolerated(d.pod.Spec.Tolerations, ps.taints, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute) != nil {
					continue
				}
				if admitsAny(nodeReqs, d.terms) {
					t.daemons = t.daemons.Add(d.req, allResources)
				}
			}
			t.alloc = t.alloc.Sub(t.daemons, allResources)
			if t.alloc.anyNegative() {
				// Its DaemonSets alone overflow it: no pod fits, not even one
				// requesting nothing (the kube-scheduler would not place them).
				continue
			}
			types = append(types, t)
			ps.volumeLimited = ps.volumeLimited || len(it.VolumeLimits) > 0
		}
		slices.SortStableFunc(types, func(a, b *typeInfo) int {
			if c := cmp.Compare(a.price, b.price); c != 0 {
				return c
			}
			return strings.Compare(a.it.Name, b.it.Name)
		})
		for i, t := range types {
			t.idx = i
		}
		ps.types = types
		ps.addOfferSlots()
		ps.reqs = reqs.And(unionRequirements(types))
		// Host ports of the DaemonSets that run on every node of the pool are taken
		// on each of its new nodes.
		for _, d := range s.daemons {
			if len(d.ports) > 0 && Untolerated(d.pod.Spec.Tolerations, ps.taints, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute) == nil &&
				admitsAny(daemonView(ps.reqs), d.terms) {
				ps.daemonPorts = append(ps.daemonPorts, d.ports...)
			}
		}
		s.pools = append(s.pools, ps)
	}
	slices.SortStableFunc(s.pools, func(a, b *poolState) int {
		if a.weight != b.weight {
			return cmp.Compare(b.weight, a.weight)
		}
		return strings.Compare(a.name, b.name)
	})
	// Existing and launching nodes count against their pool's limits.
	for _, n := range s.nodes {
		r, ok := n.reqs.Get(v1.NodePoolLabelKey)
		if !ok {
			continue
		}
		for _, ps := range s.pools {
			if r.Has(ps.name) {
				ps.used = ps.used.Add(n.capacity, allResources)
			}
		}
	}
}

// unionRequirements describes what a node of any of the types may have: for each key
// a type defines, the union of their values; absence where some type lacks the key.
func unionRequirements(types []*typeInfo) Requirements {
	keys := map[string]bool{}
	for _, t := range types {
		for i := range t.reqs {
			keys[t.reqs[i].Key] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	out := make(Requirements, 0, len(sorted))
	for _, k := range sorted {
		r := Requirement{Key: k}
		var values []string
		infinite := false
		for _, t := range types {
			tr, ok := t.reqs.Get(k)
			switch {
			case !ok:
				r.absent = true
			case tr.Finite():
				values = append(values, tr.values...)
			default:
				infinite = true
			}
		}
		if infinite {
			r.complement = true
		} else {
			r.values = sortedUnique(values)
		}
		out = append(out, r)
	}
	return out
}

func admitsAny(node Requirements, terms []Requirements) bool {
	for _, t := range terms {
		if _, ok := node.Admits(t); ok {
			return true
		}
	}
	return false
}

func (s *solver) addPods(pods []*corev1.Pod) {
	var key []byte
	for _, pod := range pods {
		// A request out of range (negative, or too large to represent) makes only
		// this pod unschedulable; the reason names the amount, so it joins the key.
		req, quick := s.idx.quickPodVector(pod)
		bad := ""
		if !quick || s.idx.OutOfRange(&req, nil) != "" {
			list := PodRequests(pod)
			req = s.idx.Vector(list)
			bad = s.idx.OutOfRange(&req, list)
		}
		key = appendClassKey(key[:0], pod, &req, s.idx.Len())
		if bad != "" {
			key = append(key, "|"+bad...)
		}
		c, ok := s.classes[string(key)]
		if !ok {
			c = s.newClass(string(key), pod, req)
			if bad != "" {
				c.invalid = "pod " + bad
			}
			s.classes[c.key] = c
			s.classList = append(s.classList, c)
		}
		s.pods = append(s.pods, &podInfo{pod: pod, class: c})
	}
	for _, c := range s.classList {
		c.buildLevels(s.opts.PreferencePolicy == PreferencePolicyIgnore)
		for _, g := range s.groupList {
			if g.matches(c.ns, c.labels) {
				c.matched = append(c.matched, g)
			}
		}
	}
	s.spreadDomains()
	for _, c := range s.classList {
		c.setMonotone()
	}
}

// spreadGroup finds or makes the group for a pod's spread constraint.
func (s *solver) spreadGroup(c *podClass, tsc *corev1.TopologySpreadConstraint, pod *corev1.Pod) (*group, error) {
	sel, err := spreadSelector(tsc, pod.Labels)
	if err != nil {
		return nil, err
	}
	honorAffinity := tsc.NodeAffinityPolicy == nil || *tsc.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor
	honorTaints := tsc.NodeTaintsPolicy != nil && *tsc.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor
	minDomains := int32(1)
	if tsc.MinDomains != nil {
		minDomains = *tsc.MinDomains
	}
	// The kube-scheduler counts only the nodes that have the keys of all the pod's
	// constraints of the same kind (DoNotSchedule or ScheduleAnyway).
	var others []string
	for _, o := range pod.Spec.TopologySpreadConstraints {
		if o.WhenUnsatisfiable == tsc.WhenUnsatisfiable && o.TopologyKey != tsc.TopologyKey && !slices.Contains(others, o.TopologyKey) {
			others = append(others, o.TopologyKey)
		}
	}
	slices.Sort(others)
	extra := fmt.Sprintf("%d/%d/%v/%v/%s", tsc.MaxSkew, minDomains, honorAffinity, honorTaints, strings.Join(others, ","))
	if honorAffinity || honorTaints {
		// Eligibility depends on the class's node affinity and tolerations: classes
		// alike in those (a workload's pods of other sizes) share the group. Each
		// group counts every matching pod, so one per class would multiply that work.
		extra += "/" + eligibilityKey(c, honorAffinity, honorTaints)
	}
	key := groupKey(spreadGroup, tsc.TopologyKey, sel, []string{pod.Namespace}, false, extra)
	if g, ok := s.groups[key]; ok {
		return g, nil
	}
	g := &group{kind: spreadGroup, key: tsc.TopologyKey, podSelection: podSelection{selector: sel, namespaces: []string{pod.Namespace}},
		maxSkew: tsc.MaxSkew, minDomains: minDomains, others: others, honorTaints: honorTaints, counts: map[string]int32{}}
	if honorAffinity || honorTaints || len(others) > 0 {
		g.eligible = func(n *simNode) bool {
			if !hasLabels(n.reqs, others) {
				return false
			}
			if honorAffinity && !admitsAny(n.reqs, c.nodeTerms) {
				return false
			}
			return !honorTaints || Untolerated(c.tolerations, n.taints, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute) == nil
		}
	}
	g.owner = c
	s.groups[key] = g
	s.groupList = append(s.groupList, g)
	return g, nil
}

// eligibilityKey identifies what a spread's node inclusion policies read of the
// class: its node affinity terms, its tolerations, or both.
func eligibilityKey(c *podClass, affinity, taints bool) string {
	var b []byte
	if affinity {
		for _, t := range c.nodeTerms {
			b = append(b, '(')
			for i := range t {
				b = t[i].appendKey(b)
			}
			b = append(b, ')')
		}
	}
	b = append(b, '|')
	if taints {
		for _, t := range c.tolerations {
			b = append(b, t.Key+"/"+string(t.Operator)+"/"+t.Value+"/"+string(t.Effect)+";"...)
		}
	}
	return string(b)
}

// termSelection resolves the pods a pod affinity or anti-affinity term of pod
// selects.
func (s *solver) termSelection(term *corev1.PodAffinityTerm, pod *corev1.Pod) (podSelection, error) {
	sel, err := affinitySelector(term, pod.Labels)
	if err != nil {
		return podSelection{}, err
	}
	nss, all, err := termNamespaces(term, pod.Namespace, s.namespaces)
	if err != nil {
		return podSelection{}, err
	}
	return podSelection{selector: sel, namespaces: nss, allNamespaces: all}, nil
}

// affinityGroup finds or makes the group for a pod affinity or anti-affinity term;
// a pod counts when it matches the term and every selection in also.
func (s *solver) affinityGroup(kind groupKind, term *corev1.PodAffinityTerm, pod *corev1.Pod, also []podSelection) (*group, error) {
	own, err := s.termSelection(term, pod)
	if err != nil {
		return nil, err
	}
	var extra strings.Builder
	for i := range also {
		extra.WriteString("&" + also[i].String())
	}
	key := groupKey(kind, term.TopologyKey, own.selector, own.namespaces, own.allNamespaces, extra.String())
	if g, ok := s.groups[key]; ok {
		return g, nil
	}
	g := &group{kind: kind, key: term.TopologyKey, podSelection: own, also: also,
		counts: map[string]int32{}, owners: map[string]int32{}}
	s.groups[key] = g
	s.groupList = append(s.groupList, g)
	return g, nil
}

// spreadDomains lists, for each spread group, the domains its pods could land in:
// those of eligible existing nodes and those the NodePools can offer.
func (s *solver) spreadDomains() {
	for _, g := range s.groupList {
		if g.kind != spreadGroup {
			continue
		}
		for _, n := range s.nodes {
			if d, ok := n.domain(g.key); ok && (g.eligible == nil || g.eligible(n)) {
				g.addDomain(d)
			}
		}
		c := g.owner
		if c == nil {
			continue
		}
		for _, ps := range s.pools {
			if !admitsAny(ps.reqs, c.nodeTerms) || !hasLabels(ps.reqs, g.others) {
				continue
			}
			// nodeTaintsPolicy Honor: a pool whose taints the pod does not tolerate
			// brings no domain.
			if g.honorTaints && Untolerated(c.tolerations, ps.taints, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute) != nil {
				continue
			}
			if g.key == v1.LabelHostname {
				g.fresh = true
				continue
			}
			r, ok := ps.reqs.Get(g.key)
			if !ok || !r.Finite() {
				continue
			}
			for _, d := range r.values {
				if allow := termsAllow(c.nodeTerms, g.key, d); allow {
					g.addDomain(d)
				}
			}
		}
	}
}

// termsAllow reports whether some alternative allows value d for key.
func termsAllow(terms []Requirements, key, d string) bool {
	for _, t := range terms {
		r, ok := t.Get(key)
		if !ok || r.Has(d) {
			return true
		}
	}
	return false
}

// countExistingPods records the pods already bound to nodes in the groups they
// match, and the anti-affinity terms they own. A terminating pod counts, as in the
// kube-scheduler, for pod affinity and anti-affinity but not for spreads.
func (s *solver) countExistingPods(nodes []*Node) {
	byName := map[string]*simNode{}
	for _, n := range s.nodes {
		byName[n.name] = n
	}
	for _, in := range nodes {
		n := byName[in.Node.Name]
		for _, p := range in.Pods {
			if IsTerminal(p) {
				continue
			}
			lbls := labelsOf(p)
			for _, g := range s.groupList {
				if (g.kind != spreadGroup || p.DeletionTimestamp == nil) && g.matches(p.Namespace, lbls) {
					s.record(g, n, 1)
				}
			}
			if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
				for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					g, err := s.affinityGroup(antiAffinityGroup, &a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i], p, nil)
					if err != nil {
						continue // the API server accepted it; a selector we cannot parse blocks nothing
					}
					if d, ok := n.domain(g.key); ok {
						g.owners[d]++
					}
					s.addMatches(g)
				}
			}
		}
	}
}

// addMatches links a group made after the classes to the classes it matches.
func (s *solver) addMatches(g *group) {
	for _, c := range s.classList {
		if g.matches(c.ns, c.labels) && !slices.Contains(c.matched, g) {
			c.matched = append(c.matched, g)
		}
	}
}

// record counts one pod (delta) on node n in group g.
func (s *solver) record(g *group, n *simNode, delta int32) {
	d, ok := n.domain(g.key)
	if !ok {
		return
	}
	if g.kind == spreadGroup && g.eligible != nil && !g.eligible(n) {
		return
	}
	g.counts[d] += delta
	g.total += delta
}

// hasLabel reports whether a node described by reqs has a label for key (for a
// planned node: will have one, whatever it becomes).
func hasLabel(reqs Requirements, key string) bool {
	r, ok := reqs.Get(key)
	return ok && !r.AllowsAbsent() && r.Satisfiable()
}

func hasLabels(reqs Requirements, keys []string) bool {
	for _, k := range keys {
		if !hasLabel(reqs, k) {
			return false
		}
	}
	return true
}

// domain returns the node's value for a topology key, when it is settled.
func (n *simNode) domain(key string) (string, bool) {
	r, ok := n.reqs.Get(key)
	if !ok || !r.Finite() || len(r.values) != 1 {
		return "", false
	}
	return r.values[0], true
}

// computeDemand sums, per pool, the pending pods that would go there first; it sizes
// new nodes (see anchor).
func (s *solver) computeDemand() {
	for _, p := range s.pods {
		c := p.class
		if c.invalid != "" {
			continue
		}
		for _, ps := range s.pools {
			if ps.unavailable == "" && Untolerated(c.tolerations, ps.taints, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute) == nil && admitsAny(ps.reqs, c.terms) {
				if ps.demandN == 0 {
					ps.uniform, ps.firstReq = true, c.req
				} else if ps.uniform && !ps.firstReq.Equal(&c.req, s.n) {
					ps.uniform = false
				}
				ps.demand.add(&c.req, s.n)
				ps.demandN++
				break
			}
		}
	}
	for _, ps := range s.pools {
		ps.rank(s.n)
	}
}

// rank orders the pool's types by the price of serving its pending pods with nodes
// of that type alone: price × nodes needed, where a node holds as many average pods
// as fit whole (the room lost to packing: for pods of one size, exactly what is
// left over; for mixed sizes, about half a pod, as small pods fill the gaps). A
// new node is filled up to the best-ranked type that holds its first pod, so node
// sizes follow the price per packed pod rather than the largest type that fits.
func (ps *poolState) rank(n int) {
	for _, t := range ps.types {
		t.score = 0
		if ps.uniform {
			// One pod size: a node holds whole pods, and the last node is
			// paid for whole too.
			t.score = math.Inf(1)
			if whole := wholePods(&t.alloc, &ps.firstReq, n); whole > 0 {
				t.score = t.price * math.Ceil(float64(ps.demandN)/float64(whole))
			}
			continue
		}
		for r := range n {
			demand := ps.demand.At(r)
			if demand == 0 {
				continue
			}
			avg := float64(demand) / float64(max(ps.demandN, 1))
			room := float64(t.alloc.At(r)) - avg/2
			if room <= 0 {
				t.score = math.Inf(1)
				break
			}
			t.score = max(t.score, t.price*float64(demand)/room)
		}
	}
	ps.ranked = slices.Clone(ps.types)
	slices.SortStableFunc(ps.ranked, func(a, b *typeInfo) int { return cmp.Compare(a.score, b.score) })
}

// wholePods is how many pods of requests req fit in alloc (0 when none; a pod
// that asks for nothing fits any number, as far as the other resources go).
func wholePods(alloc, req *Resources, n int) int64 {
	most := int64(math.MaxInt64)
	for r := range n {
		if q := req.At(r); q > 0 {
			most = min(most, alloc.At(r)/q)
		}
	}
	return max(most, 0)
}

// run places every pod, retrying the ones that failed while others keep landing
// (a pod may need another's affinity domain), then explains what is left.
func (s *solver) run() {
	queue := s.order()
	for {
		var failed []*podInfo
		for _, p := range queue {
			if !s.place(p) {
				failed = append(failed, p)
			}
		}
		if len(failed) == 0 || len(failed) == len(queue) {
			queue = failed
			break
		}
		queue = failed
	}
	for _, p := range queue {
		s.failures = append(s.failures, Failure{Pod: p.pod, Reason: s.explain(p)})
	}
}

// order interleaves the workloads: classes are ranked largest first, and each
// class's pods are spread evenly through the queue, so every node receives the same
// mix of shapes as the whole and fills cpu and memory together. (Placing all of one
// shape first fills one resource of a node while the other idles.)
func (s *solver) order() []*podInfo {
	classes := slices.Clone(s.classList)
	slices.SortStableFunc(classes, func(a, b *podClass) int {
		if c := cmp.Compare(b.req.At(ResourceCPU), a.req.At(ResourceCPU)); c != 0 {
			return c
		}
		return cmp.Compare(b.req.At(ResourceMemory), a.req.At(ResourceMemory))
	})
	rank := make(map[*podClass]int, len(classes))
	for i, c := range classes {
		rank[c] = i
	}
	members := make([][]*podInfo, len(classes))
	for _, p := range s.pods {
		r := rank[p.class]
		members[r] = append(members[r], p)
	}
	type slot struct {
		at   float64
		rank int
		p    *podInfo
	}
	slots := make([]slot, 0, len(s.pods))
	for r, ps := range members {
		slices.SortStableFunc(ps, func(a, b *podInfo) int {
			if c := strings.Compare(a.pod.Namespace, b.pod.Namespace); c != 0 {
				return c
			}
			return strings.Compare(a.pod.Name, b.pod.Name)
		})
		for j, p := range ps {
			slots = append(slots, slot{at: (float64(j) + 0.5) / float64(len(ps)), rank: r, p: p})
		}
	}
	slices.SortFunc(slots, func(a, b slot) int {
		if c := cmp.Compare(a.at, b.at); c != 0 {
			return c
		}
		return cmp.Compare(a.rank, b.rank)
	})
	out := make([]*podInfo, len(slots))
	for i, sl := range slots {
		out[i] = sl.p
	}
	return out
}

func (s *solver) place(p *podInfo) bool {
	c := p.class
	if c.invalid != "" {
		return false
	}
	for i, v := range c.levels {
		// A monotone class's refusals last (see setMonotone); they are taken at
		// their word at the most relaxed level only.
		if s.firstFit(p, v, c.monotone && i == len(c.levels)-1) {
			return true
		}
		if n, _ := s.openNode(p, v, false); n != nil {
			return true
		}
	}
	return false
}

// explain says why a pod fits nowhere: per NodePool, at its most relaxed level.
func (s *solver) explain(p *podInfo) string {
	c := p.class
	if c.invalid != "" {
		return c.invalid
	}
	if len(s.pools) == 0 {
		return "no NodePool, and no existing node fits"
	}
	_, reason := s.openNode(p, c.levels[len(c.levels)-1], true)
	return reason
}

// openNode starts a new node for the pod from the first NodePool that can take it.
// With explain set it returns every pool's reason when none can.
func (s *solver) openNode(p *podInfo, v *variant, explain bool) (*simNode, string) {
	var reasons []string
	for _, ps := range s.poolOrder(v) {
		fit := s.poolFit(v, ps)
		if fit.reason != "" {
			reasons = append(reasons, fmt.Sprintf("NodePool %s: %s", ps.name, fit.reason))
			continue
		}
		n := &simNode{name: fmt.Sprintf("planned-%d", s.planned+1), kind: plannedNode, pool: ps,
			reqs:   ps.reqs.With(Requirement{Key: v1.LabelHostname, values: []string{fmt.Sprintf("planned-%d", s.planned+1)}}),
			taints: ps.taints, ports: slices.Clone(ps.daemonPorts)}
		n.options, n.optionsFrom = ps.types, "pool"
		if len(ps.limited) > 0 {
			n.options = slices.DeleteFunc(slices.Clone(ps.types), func(t *typeInfo) bool { return !ps.withinLimits(t) })
			n.optionsFrom = ""
		}
		if len(n.options) == 0 {
			reasons = append(reasons, fmt.Sprintf("NodePool %s: %s", ps.name, ps.limitReason(s.idx)))
			continue
		}
		n.alloc = ps.maxAlloc
		if len(n.options) < len(ps.types) {
			n.alloc = maxAlloc(n.options, s.n)
		}
		vd, reason := s.tryNode(p, v, n, explain)
		if vd != accepted {
			if explain && len(n.options) < len(ps.types) {
				// The pod may fit a type the limits ruled out: say so, not only
				// that the types left are too small.
				reason = fmt.Sprintf("%s; %s", ps.limitsLeft(s.idx), reason)
			}
			reasons = append(reasons, fmt.Sprintf("NodePool %s: %s", ps.name, reason))
			continue
		}
		// Fill the node up to the best-scoring type that holds what it has: the
		// anchor. Its cheapest fitting type is chosen at the end.
		for _, t := range ps.ranked {
			if _, ok := slices.BinarySearchFunc(n.options, t.idx, func(o *typeInfo, idx int) int { return cmp.Compare(o.idx, idx) }); ok &&
				Fits(&Resources{}, &n.used, &t.alloc, s.n) < 0 {
				n.anchor = t.alloc
				break
			}
		}
		n.alloc = n.anchor
		s.planned++
		s.nodes = append(s.nodes, n)
		return n, ""
	}
	return nil, strings.Join(reasons, "; ")
}

// fitting yields the node's options that hold what it has, cheapest first.
func (n *simNode) fitting(resources int) iter.Seq[*typeInfo] {
	return func(yield func(*typeInfo) bool) {
		for _, t := range n.options[n.first:] {
			if Fits(&Resources{}, &n.used, &t.alloc, resources) < 0 && !yield(t) {
				return
			}
		}
	}
}

func maxAlloc(types []*typeInfo, n int) Resources {
	var out Resources
	for _, t := range types {
		out.max(&t.alloc, n)
	}
	return out
}

// poolFit says, once per variant and pool, whether the pool can take the pods at
// all, and what the cheapest type that holds one costs there.
func (s *solver) poolFit(v *variant, ps *poolState) *poolFit {
	if fit, ok := v.pools[ps]; ok {
		return fit
	}
	fit := &poolFit{reason: s.poolReason(v, ps), price: math.Inf(1)}
	if fit.reason == "" {
		for _, t := range ps.types { // cheapest first
			if Fits(&Resources{}, &v.class.req, &t.alloc, s.n) >= 0 {
				continue
			}
			for _, term := range v.terms {
				if _, ok := ps.reqs.Narrow(term).Intersects(t.reqs); ok {
					fit.price = t.price
					break
				}
			}
			if !math.IsInf(fit.price, 1) {
				break
			}
		}
	}
	v.pools[ps] = fit
	return fit
}

// freshPrice is what the cheapest new node for a pod of the variant costs in the
// pool it would open one in (infinite when none can).
func (s *solver) freshPrice(v *variant) float64 {
	if v.fresh != nil {
		return *v.fresh
	}
	price := math.Inf(1)
	for _, ps := range s.poolOrder(v) {
		if fit := s.poolFit(v, ps); fit.reason == "" {
			price = fit.price
			break
		}
	}
	v.fresh = &price
	return price
}

// poolOrder is the order pools are tried for a new node: by weight, and among
// equal weights the one where the pod is cheapest to host first (then by name).
func (s *solver) poolOrder(v *variant) []*poolState {
	if len(s.pools) < 2 {
		return s.pools
	}
	order := slices.Clone(s.pools)
	slices.SortStableFunc(order, func(a, b *poolState) int {
		if a.weight != b.weight {
			return cmp.Compare(b.weight, a.weight)
		}
		return cmp.Compare(s.poolFit(v, a).price, s.poolFit(v, b).price)
	})
	return order
}

// poolReason says why no node of the pool can take pods of the variant, or "".
func (s *solver) poolReason(v *variant, ps *poolState) string {
	effects := []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute}
	if v.softTaint {
		effects = append(effects, corev1.TaintEffectPreferNoSchedule)
	}
	if ps.unavailable != "" {
		return ps.unavailable
	}
	if t := Untolerated(v.class.tolerations, ps.taints, effects...); t != nil {
		return fmt.Sprintf("taint %s not tolerated", taintString(t))
	}
	if len(ps.types) == 0 {
		return "no instance type matches its requirements with an available offering"
	}
	var why []string
	for _, term := range v.terms {
		key, ok := ps.reqs.Admits(term)
		if ok {
			return ""
		}
		pr, _ := term.Get(key)
		if nr, has := ps.reqs.Get(key); has {
			why = append(why, fmt.Sprintf("pod requires %s but nodes offer %s", pr, nr))
		} else {
			why = append(why, fmt.Sprintf("pod requires %s, a label no instance type or template defines", pr))
		}
	}
	return strings.Join(why, ", or ")
}

func (ps *poolState) withinLimits(t *typeInfo) bool {
	for _, r := range ps.limited {
		if ps.used.At(r)+t.capacity.At(r) > ps.limits.At(r) {
			return false
		}
	}
	return true
}

func (ps *poolState) fitsLimits(used *Resources) bool {
	for _, r := range ps.limited {
		if used.At(r) > ps.limits.At(r) {
			return false
		}
	}
	return true
}

func (ps *poolState) limitReason(idx *ResourceIndex) string {
	for _, r := range ps.limited {
		smallest := int64(MaxQuantity)
		for _, t := range ps.types {
			smallest = min(smallest, t.capacity.At(r))
		}
		if used, limit := ps.used.At(r), ps.limits.At(r); used+smallest > limit {
			return fmt.Sprintf("limit %s=%s reached (%s in use, the smallest instance type adds %s)",
				idx.Name(r), idx.Quantity(r, limit), idx.Quantity(r, used), idx.Quantity(r, smallest))
		}
	}
	return "limits reached"
}

// limitsLeft names the limits that rule out some of the pool's instance types now.
func (ps *poolState) limitsLeft(idx *ResourceIndex) string {
	var why []string
	for _, r := range ps.limited {
		for _, t := range ps.types {
			if used, limit := ps.used.At(r), ps.limits.At(r); used+t.capacity.At(r) > limit {
				why = append(why, fmt.Sprintf("limit %s=%s leaves %s", idx.Name(r), idx.Quantity(r, limit), idx.Quantity(r, limit-used)))
				break
			}
		}
	}
	return strings.Join(why, ", ")
}

var strictEffects = []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule}
var hardEffects = strictEffects[:2]

// tryNode places the pod on n if it fits, and reports why not otherwise (the reason
// is spelled out only when explain is set: the hot path does not pay for it) and
// whether the refusal is for good.
func (s *solver) tryNode(p *podInfo, v *variant, n *simNode, explain bool) (verdict, string) {
	c := v.class
	if n.kind != plannedNode {
		if n.unschedulable && !tolerated(c.tolerations, &unschedulableTaint) {
			return refusedForGood, "node is unschedulable"
		}
		effects := hardEffects
		if v.softTaint {
			effects = strictEffects
		}
		if t := Untolerated(c.tolerations, n.taints, effects...); t != nil {
			return refusedForGood, "taint " + taintString(t) + " not tolerated"
		}
	} else if fit := s.poolFit(v, n.pool); fit.reason != "" {
		return refusedForGood, fit.reason
	}
	if r := Fits(&n.used, &c.req, &n.alloc, s.n); r >= 0 {
		if !explain {
			return refusedForGood, ""
		}
		return refusedForGood, s.resourceReason(n, c, r)
	}
	for _, hp := range c.ports {
		for _, used := range n.ports {
			if hp.conflicts(used) {
				return refusedForGood, fmt.Sprintf("host port %s/%d in use", hp.protocol, hp.port)
			}
		}
	}
	// CSI attach limits: an existing node's from its CSINode, a planned node's
	// from its instance types (narrowOptions).
	var volumes map[string]int64
	if len(c.volumes) > 0 && (n.volumeLimits != nil || n.kind == plannedNode && n.pool.volumeLimited) {
		volumes = n.volumeDemand(c.volumes)
		if driver, limit, over := volumesExceed(n.volumeLimits, volumes); over {
			if !explain {
				return refusedNow, ""
			}
			return refusedNow, volumeReason(driver, limit)
		}
	}
	var term Requirements
	found := false
	for _, t := range v.terms {
		if _, ok := n.reqs.Admits(t); ok {
			term, found = t, true
			break
		}
	}
	if !found {
		return refusedForGood, "node affinity or selector not matched"
	}
	reqs := n.reqs
	if n.kind == plannedNode {
		reqs = reqs.Narrow(term)
	}
	reqs, vd, reason := s.topologyFits(c, v, n, reqs, explain)
	if vd != accepted {
		return vd, reason
	}
	if n.kind == plannedNode {
		if vd, reason := s.narrowOptions(n, v, reqs, &c.req, volumes, explain); vd != accepted {
			return vd, reason
		}
		n.reqs = reqs
	}
	n.used.add(&c.req, s.n)
	n.ports = append(n.ports, c.ports...)
	n.attach(c.volumes)
	n.pods = append(n.pods, p)
	s.placed[p.pod] = n
	for _, g := range c.matched {
		s.record(g, n, 1)
	}
	for _, g := range c.anti {
		if d, ok := n.domain(g.key); ok {
			g.owners[d]++
		}
	}
	return accepted, ""
}

var unschedulableTaint = corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}

func (s *solver) resourceReason(n *simNode, c *podClass, r int) string {
	name := s.idx.Name(r)
	if n.kind != plannedNode {
		return fmt.Sprintf("insufficient %s", name)
	}
	return fmt.Sprintf("no instance type offers %s %s", s.idx.Quantity(r, c.req.At(r)), name)
}

// narrowOptions keeps the planned node's instance types that match reqs, have an
// available offering there, hold the node's pods plus req, and attach the volumes
// (per CSI driver; nil: no limit matters); it fails, changing nothing, when none
// would remain or a minValues requirement would be broken. Only the pool's limits
// look beyond the node: any other refusal, when reqs are the node's own, stands
// until a pod lands on the node.
func (s *solver) narrowOptions(n *simNode, v *variant, reqs Requirements, req *Resources, volumes map[string]int64, explain bool) (verdict, string) {
	changed := changedRequirements(n.reqs, reqs)
	local := refusedNow
	if len(changed) == 0 {
		local = refusedUntilChanged
	}
	offerings := false // the zone or capacity type narrowed: offerings must be checked again
	for _, r := range changed {
		offerings = offerings || r.Key == v1.LabelZone || r.Key == v1.CapacityTypeLabelKey
	}
	admitted := n.pool.admitting(changed)
	// An option must hold all the node will have, not only what req asks for:
	// options too small for what it has already are skipped lazily (fitting).
	want := n.used.Add(*req, s.n)
	// The cheapest option that would remain, offerings and minValues aside.
	next := n.first
	for ; next < len(n.options); next++ {
		t := n.options[next]
		if Fits(&Resources{}, &want, &t.alloc, s.n) < 0 && (admitted == nil || admitted[t.idx]) && (volumes == nil || !typeVolumesExceed(t, volumes)) {
			break
		}
	}
	// Growing the node must cost no more than a fresh node for the pod would: a pod
	// does not drag a node into a pricier type when it is cheaper on its own. The
	// check comes first because most refusals are this one.
	// Where the pool's pods are all of one size, rank sized the node (its anchor)
	// by the price of whole nodes of them: up to the anchor it grows, since
	// filled it costs less per pod than fresh nodes would.
	uniformGrowth := n.pool.uniform && !n.anchor.IsZero() && Fits(&n.used, req, &n.anchor, s.n) < 0
	if len(n.pods) > 0 && v != nil && !uniformGrowth && next < len(n.options) {
		if grow := n.options[next].price - n.options[n.first].price; grow > 1e-12 && grow > s.freshPrice(v)*(1+s.growSlack) {
			return local, "a fresh node would cost less than growing this one"
		}
	}
	// Without an anchor the node's allocatable is its options' largest, which
	// lazily skipped options would leave too large; the first pod's openNode
	// anchors the node right after.
	lazy := !s.exhaustive && volumes == nil && (!n.anchor.IsZero() || len(n.pods) == 0) && !s.checksMinValues(reqs)
	if lazy && len(changed) == 0 {
		return s.growInPlace(n, next, reqs, req, explain)
	}
	var offered []bool
	if offerings {
		offered = n.pool.offered(reqs)
	}
	if lazy && n.optionsFrom != "" {
		return s.narrowShared(n, changed, admitted, offered, reqs, req, &want, explain)
	}
	kept := s.scratch[:0]
	volumesRefused := false
	for _, t := range n.options[n.first:] {
		if Fits(&Resources{}, &want, &t.alloc, s.n) >= 0 || admitted != nil && !admitted[t.idx] || offered != nil && !offered[t.idx] {
			continue
		}
		if volumes != nil && typeVolumesExceed(t, volumes) {
			volumesRefused = true
			continue
		}
		kept = append(kept, t)
	}
	s.scratch = kept
	if len(kept) == 0 {
		if !explain {
			return local, ""
		}
		if volumesRefused {
			return local, "no instance type attaches the volumes its CSI drivers would need"
		}
		return local, s.optionsReason(n, reqs, req)
	}

	for i := range reqs {
		if reqs[i].MinValues > 0 && !s.relaxMinValues {
			if got := distinctValues(kept, reqs[i].Key); got < reqs[i].MinValues {
				return local, fmt.Sprintf("minValues %d for %s not met: %d distinct values remain", reqs[i].MinValues, reqs[i].Key, got)
			}
		}
	}
	if !s.withinPoolLimits(n, &kept[0].capacity) {
		if !explain {
			return refusedNow, ""
		}
		return refusedNow, n.pool.limitReason(s.idx)
	}
	n.options, n.first, n.optionsFrom = slices.Clone(kept), 0, ""
	switch {
	case !n.anchor.IsZero():
		n.alloc = n.anchor
	case len(n.pods) > 0: // for the first pod, openNode sets the anchor next
		n.alloc = maxAlloc(n.options, s.n)
	}
	s.reserve(n)
	return accepted, ""
}

// growInPlace takes req onto the node when nothing but its size changes: the
// options stay as they are and its cheapest becomes options[next]. Options too
// small for what the node holds are skipped where they are read (see first), which
// spares each pod a pass over every instance type.
func (s *solver) growInPlace(n *simNode, next int, reqs Requirements, req *Resources, explain bool) (verdict, string) {
	if next == len(n.options) {
		if !explain {
			return refusedUntilChanged, ""
		}
		return refusedUntilChanged, s.optionsReason(n, reqs, req)
	}
	if !s.withinPoolLimits(n, &n.options[next].capacity) {
		if !explain {
			return refusedNow, ""
		}
		return refusedNow, n.pool.limitReason(s.idx)
	}
	n.first = next
	s.reserve(n)
	return accepted, ""
}

// narrowShared narrows a node whose options are a list the pool shares: to the
// pool's list of those the changed requirements admit and offered allows, shared
// in turn by every node narrowed alike, its cheapest the first that holds req too.
// Nodes narrow by the same few zones, and a real catalog would otherwise cost a
// copy of hundreds of types per node.
func (s *solver) narrowShared(n *simNode, changed []*Requirement, admitted, offered []bool, reqs Requirements, req, want *Resources, explain bool) (verdict, string) {
	from, options := n.pool.narrowed(n.optionsFrom, n.options, changed, reqs, admitted, offered)
	first := 0
	for first < len(options) && Fits(&Resources{}, want, &options[first].alloc, s.n) >= 0 {
		first++
	}
	if first == len(options) {
		if !explain {
			return refusedNow, ""
		}
		return refusedNow, s.optionsReason(n, reqs, req)
	}
	if !s.withinPoolLimits(n, &options[first].capacity) {
		if !explain {
			return refusedNow, ""
		}
		return refusedNow, n.pool.limitReason(s.idx)
	}
	n.options, n.first, n.optionsFrom = options, first, from
	s.reserve(n)
	return accepted, ""
}

// narrowed is options (the pool's list named from) less the types that admitted
// (for changed) and offered (for reqs) rule out, nil meaning none, and the name of
// that list.
func (ps *poolState) narrowed(from string, options []*typeInfo, changed []*Requirement, reqs Requirements, admitted, offered []bool) (string, []*typeInfo) {
	key := append(ps.key[:0], from...)
	key = append(key, 2)
	for _, r := range changed {
		key = r.appendKey(key)
	}
	if offered != nil {
		key = appendOfferKey(key, reqs)
	}
	ps.key = key
	if out, ok := ps.lists[string(key)]; ok {
		return string(key), out
	}
	var out []*typeInfo
	for _, t := range options {
		if (admitted == nil || admitted[t.idx]) && (offered == nil || offered[t.idx]) {
			out = append(out, t)
		}
	}
	if ps.lists == nil {
		ps.lists = map[string][]*typeInfo{}
	}
	ps.lists[string(key)] = out
	return string(key), out
}

// checksMinValues reports whether reqs hold a minValues the solve enforces.
func (s *solver) checksMinValues(reqs Requirements) bool {
	return !s.relaxMinValues && slices.ContainsFunc(reqs, func(r Requirement) bool { return r.MinValues > 0 })
}

// withinPoolLimits reports whether the node's pool stays within its limits with
// the node reserving capacity instead of what it reserves now.
func (s *solver) withinPoolLimits(n *simNode, capacity *Resources) bool {
	if len(n.pool.limited) == 0 {
		return true
	}
	after := n.pool.used
	after.sub(&n.reserved, s.n)
	after.add(capacity, s.n)
	return n.pool.fitsLimits(&after)
}

// reserve counts the node's cheapest option against its pool's limits.
func (s *solver) reserve(n *simNode) {
	n.pool.used.sub(&n.reserved, s.n)
	n.reserved = n.options[n.first].capacity
	n.pool.used.add(&n.reserved, s.n)
}

// reservation is what a node counts against its pool's limits: the capacity of its
// cheapest option, the one the plan prices. finish keeps only options no larger in
// any limited resource, so no choice the cloud makes among them breaks a limit.
func (s *solver) reservation(options []*typeInfo) Resources {
	if len(options) == 0 {
		return Resources{}
	}
	return options[0].capacity
}

// changedRequirements lists the requirements of next that differ from prev; Narrow
// and With return their receiver when nothing changed, which makes that case free.
func changedRequirements(prev, next Requirements) []*Requirement {
	if len(prev) == len(next) && (len(prev) == 0 || &prev[0] == &next[0]) {
		return nil
	}
	var out []*Requirement
	for i := range next {
		r := &next[i]
		old, ok := prev.Get(r.Key)
		if !ok || !old.Equal(r) {
			out = append(out, r)
		}
	}
	return out
}

// admitting says, by position in the pool's types, which types admit the
// requirements that changed (nil: none changed, all do). Nodes narrow by the same
// few requirements (a zone, a capacity type) over and over, and a real catalog has
// hundreds of types, so the answer is kept per pool.
func (ps *poolState) admitting(changed []*Requirement) []bool {
	if len(changed) == 0 {
		return nil
	}
	ps.key = append(ps.key[:0], 'a')
	for _, r := range changed {
		ps.key = r.appendKey(ps.key)
	}
	return ps.memo(ps.key, func(t *typeInfo) bool { return admitsChanged(t.reqs, changed) })
}

// offered says, by position in the pool's types, which types have an available
// offering in the zones and capacity types reqs allow.
func (ps *poolState) offered(reqs Requirements) []bool {
	ps.key = appendOfferKey(ps.key[:0], reqs)
	filter := ps.offerFilter(reqs)
	return ps.memo(ps.key, func(t *typeInfo) bool { _, ok := t.cheapest(filter); return ok })
}

// appendOfferKey names the zone and capacity type requirements of reqs, which
// alone decide the offerings a node may take.
func appendOfferKey(b []byte, reqs Requirements) []byte {
	b = append(b, 'o')
	for _, k := range []string{v1.LabelZone, v1.CapacityTypeLabelKey} {
		if r, ok := reqs.Get(k); ok {
			b = r.appendKey(b)
		}
	}
	return b
}

// memo returns the answers of f for the pool's types, computed once per key.
func (ps *poolState) memo(key []byte, f func(*typeInfo) bool) []bool {
	if out, ok := ps.answers[string(key)]; ok {
		return out
	}
	out := make([]bool, len(ps.types))
	for i, t := range ps.types {
		out[i] = f(t)
	}
	if ps.answers == nil {
		ps.answers = map[string][]bool{}
	}
	ps.answers[string(key)] = out
	return out
}

// admitsChanged checks a type's labels against only the requirements that changed.
func admitsChanged(typeReqs Requirements, changed []*Requirement) bool {
	for _, r := range changed {
		if tr, ok := typeReqs.Get(r.Key); ok && !tr.intersects(r) {
			return false
		}
	}
	return true
}

func distinctValues(types []*typeInfo, key string) int {
	seen := map[string]bool{}
	for _, t := range types {
		if r, ok := t.reqs.Get(key); ok {
			for _, v := range r.Values() {
				seen[v] = true
			}
		}
	}
	return len(seen)
}

func (s *solver) optionsReason(n *simNode, reqs Requirements, req *Resources) string {
	want := n.used.Add(*req, s.n)
	var biggest Resources
	matching := 0
	for t := range n.fitting(s.n) {
		if _, ok := reqs.Intersects(t.reqs); !ok {
			continue
		}
		if _, ok := t.it.CheapestOffering(reqs); !ok {
			continue
		}
		matching++
		biggest = biggest.Max(t.alloc, s.n)
	}
	if matching == 0 {
		return fmt.Sprintf("no instance type with an available offering matches %s", reqs)
	}
	for r := range s.n {
		if want.At(r) > biggest.At(r) {
			return fmt.Sprintf("no instance type offers %s %s", s.idx.Quantity(r, want.At(r)), s.idx.Name(r))
		}
	}
	return "no single instance type fits all of cpu, memory and pods requested"
}

// topologyFits checks the pod's spread, affinity and anti-affinity constraints, and
// the anti-affinity of pods already placed, on node n described by reqs. On a
// planned node whose domain for a key is still open it picks one, returning reqs
// narrowed to it.
func (s *solver) topologyFits(c *podClass, v *variant, n *simNode, reqs Requirements, explain bool) (Requirements, verdict, string) {
	if len(v.spreads)+len(v.affinity)+len(v.anti)+len(c.matched) == 0 {
		return reqs, accepted, ""
	}
	for _, key := range topologyKeys(v, c) {
		d, settled := domainIn(reqs, key)
		if settled {
			if vd, why := s.domainAdmits(c, v, key, d, true, explain); vd != accepted {
				// A domain the pod's term chose, not the node, may change.
				if _, own := domainIn(n.reqs, key); !own {
					vd = refusedNow
				}
				return reqs, vd, why
			}
			continue
		}
		r, has := reqs.Get(key)
		if n.kind != plannedNode || !has || !r.Finite() {
			// The node will not have the key.
			if vd, why := s.domainAdmits(c, v, key, "", false, explain); vd != accepted {
				return reqs, vd, why
			}
			continue
		}
		chosen := ""
		for _, cand := range s.preferredDomains(c, v, key, r.values) {
			if vd, _ := s.domainAdmits(c, v, key, cand, true, false); vd == accepted {
				chosen = cand
				break
			}
		}
		if chosen == "" {
			if !explain {
				return reqs, refusedNow, ""
			}
			_, why := s.domainAdmits(c, v, key, r.values[0], true, true)
			return reqs, refusedNow, why
		}
		reqs = n.settle(reqs, key, chosen)
	}
	return reqs, accepted, ""
}

// settle returns reqs with key settled to domain d. Pod after pod offers a planned
// node the same few domains, so while reqs are the node's own the results are kept
// (each is a copy of the node's requirements).
func (n *simNode) settle(reqs Requirements, key, d string) Requirements {
	if !sameRequirements(reqs, n.reqs) {
		return reqs.With(Requirement{Key: key, values: []string{d}})
	}
	if !sameRequirements(n.settledFrom, n.reqs) {
		n.settled, n.settledFrom = nil, n.reqs
	}
	k := [2]string{key, d}
	if out, ok := n.settled[k]; ok {
		return out
	}
	out := reqs.With(Requirement{Key: key, values: []string{d}})
	if n.settled == nil {
		n.settled = map[[2]string]Requirements{}
	}
	n.settled[k] = out
	return out
}

// sameRequirements reports whether a and b are one slice (With and Narrow return
// their receiver when nothing changes).
func sameRequirements(a, b Requirements) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func domainIn(reqs Requirements, key string) (string, bool) {
	r, ok := reqs.Get(key)
	if !ok || !r.Finite() || len(r.values) != 1 {
		return "", false
	}
	return r.values[0], true
}

// topologyKeys lists, in a stable order, the keys the pod's constraints and its
// matching groups use.
func topologyKeys(v *variant, c *podClass) []string {
	if v.keys != nil {
		return v.keys
	}
	keys := []string{}
	add := func(gs []*group) {
		for _, g := range gs {
			if !slices.Contains(keys, g.key) {
				keys = append(keys, g.key)
			}
		}
	}
	add(v.spreads)
	add(v.affinity)
	add(v.anti)
	add(c.matched)
	v.keys = keys
	return keys
}

// preferredDomains orders candidate values: least loaded first for a spread,
// most populated first for an affinity, else as given.
func (s *solver) preferredDomains(c *podClass, v *variant, key string, values []string) []string {
	for _, g := range v.spreads {
		if g.key == key {
			out := slices.Clone(values)
			slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(g.counts[a], g.counts[b]) })
			return out
		}
	}
	for _, g := range v.affinity {
		if g.key == key {
			out := slices.Clone(values)
			slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(g.counts[b], g.counts[a]) })
			return out
		}
	}
	for _, g := range c.matched {
		if g.key == key && g.kind == spreadGroup {
			out := slices.Clone(values)
			slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(g.counts[a], g.counts[b]) })
			return out
		}
	}
	return values
}

// domainAdmits checks every constraint on key for domain d (has=false: the node has
// no such label). Counts only grow, so a refusal is for good where a count alone
// refuses: anti-affinity, and a spread whose minimum cannot rise.
func (s *solver) domainAdmits(c *podClass, v *variant, key, d string, has bool, explain bool) (verdict, string) {
	for _, g := range v.spreads {
		if g.key != key {
			continue
		}
		if !has {
			if !explain {
				return refusedNow, ""
			}
			return refusedNow, fmt.Sprintf("node has no label %s for its topology spread", key)
		}
		if !g.admitsSpread(d, g.matches(c.ns, c.labels)) {
			vd := refusedNow
			if g.minFixed() {
				vd = refusedForGood
			}
			if !explain {
				return vd, ""
			}
			return vd, fmt.Sprintf("topology spread on %s: %s=%s would exceed maxSkew %d", key, key, d, g.maxSkew)
		}
	}
	if len(v.affinity) > 0 {
		selfOK := true
		for _, g := range v.affinity {
			if g.total > 0 || !g.matches(c.ns, c.labels) {
				selfOK = false
			}
		}
		for _, g := range v.affinity {
			if g.key != key {
				continue
			}
			// The first pod of a group that selects itself goes anywhere, but only to
			// a node with the key.
			if !has {
				if !explain {
					return refusedNow, ""
				}
				return refusedNow, fmt.Sprintf("node has no label %s for its pod affinity", key)
			}
			if !selfOK && g.counts[d] == 0 {
				if !explain {
					return refusedNow, ""
				}
				return refusedNow, fmt.Sprintf("pod affinity on %s: no matching pod in %s=%s", key, key, d)
			}
		}
	}
	if !has {
		return accepted, ""
	}
	for _, g := range v.anti {
		if g.key == key && g.counts[d] > 0 {
			if !explain {
				return refusedForGood, ""
			}
			return refusedForGood, fmt.Sprintf("pod anti-affinity on %s: a matching pod runs in %s=%s", key, key, d)
		}
	}
	for _, g := range c.matched {
		if g.kind == antiAffinityGroup && g.key == key && g.owners[d] > 0 {
			if !explain {
				return refusedForGood, ""
			}
			return refusedForGood, fmt.Sprintf("another pod's anti-affinity on %s excludes %s=%s", key, key, d)
		}
	}
	return accepted, ""
}

// refine revisits the new nodes whose pods are free of topology constraints and
// host ports, and repacks them when other nodes would cost less: each such node on
// its own (one big node may cost more than several small ones), and small groups
// of nodes with the same pool and requirements together (several nodes may cost
// more than one that holds them all). A repack tries each cheaper instance type:
// the pods are packed first-fit decreasing into nodes of that type, the last one
// shrunk to the cheapest type that holds its share. The greedy pass sizes nodes for
// the whole workload; this fixes the nodes where that sizing misses.
func (s *solver) refine() {
	const smallGroup = 64 // pods; larger groups are already packed by the anchor
	groups := map[string][]*simNode{}
	var keys []string
	for _, n := range s.nodes {
		if n.kind == plannedNode && s.splittable(n) {
			k := s.requirementsKey(n)
			if _, ok := groups[k]; !ok {
				keys = append(keys, k)
			}
			groups[k] = append(groups[k], n)
		}
	}
	replaced := map[*simNode][]*simNode{}
	for _, k := range keys {
		group := groups[k]
		pods := 0
		for _, n := range group {
			pods += len(n.pods)
		}
		if len(group) > 1 && pods <= smallGroup {
			if pieces := s.repack(group, k); pieces != nil {
				replaced[group[0]] = pieces
				for _, n := range group[1:] {
					replaced[n] = []*simNode{}
				}
				continue
			}
		}
		for _, n := range group {
			if len(n.pods) > 1 {
				if pieces := s.repack([]*simNode{n}, k); pieces != nil {
					replaced[n] = pieces
				}
			}
		}
	}
	var nodes []*simNode
	for _, n := range s.nodes {
		if pieces, ok := replaced[n]; ok {
			nodes = append(nodes, pieces...)
		} else {
			nodes = append(nodes, n)
		}
	}
	s.nodes = nodes
}

func (s *solver) splittable(n *simNode) bool {
	for _, p := range n.pods {
		c := p.class
		if len(c.ports)+len(c.spreads)+len(c.softSpreads)+len(c.affinity)+len(c.anti)+len(c.prefAffinity)+len(c.prefAnti)+len(c.matched) > 0 {
			return false
		}
		// A repack does not count volumes against the types' attach limits.
		if len(c.volumes) > 0 && n.pool.volumeLimited {
			return false
		}
	}
	return len(n.pods) > 0
}

// repack returns cheaper nodes holding the pods of group (nodes of one pool with the
// same requirements, key), or nil when none are cheaper.
func (s *solver) repack(group []*simNode, key string) []*simNode {
	first := group[0]
	candidates, prices := s.splitCandidates(first, key)
	current := 0.0
	var used, reservedBefore Resources
	var members []*podInfo
	for _, n := range group {
		o, ok := n.options[n.first].cheapest(n.pool.offerFilter(n.reqs))
		if !ok {
			return nil
		}
		current += o.Price
		used = used.Add(n.used, s.n)
		reservedBefore = reservedBefore.Add(n.reserved, s.n)
		members = append(members, n.pods...)
	}
	slices.SortStableFunc(members, func(a, b *podInfo) int {
		if c := cmp.Compare(b.class.req.At(ResourceCPU), a.class.req.At(ResourceCPU)); c != 0 {
			return c
		}
		return cmp.Compare(b.class.req.At(ResourceMemory), a.class.req.At(ResourceMemory))
	})
	// Nodes of type t cannot hold the pods for less than the fluid bound:
	// price × the fraction of t's allocatable the pods take in their tightest
	// resource. Trying types in that order, the search stops at the first bound
	// that cannot beat the best found.
	type trial struct {
		t     *typeInfo
		bound float64
	}
	var trials []trial
	for _, t := range candidates {
		if prices[t] >= current {
			break
		}
		frac := 0.0
		for r := range s.n {
			if u := used.At(r); u > 0 {
				a := t.alloc.At(r)
				if a <= 0 {
					frac = math.Inf(1)
					break
				}
				frac = max(frac, float64(u)/float64(a))
			}
		}
		if b := prices[t] * frac; b < current {
			trials = append(trials, trial{t, b})
		}
	}
	slices.SortStableFunc(trials, func(a, b trial) int { return cmp.Compare(a.bound, b.bound) })
	bestCost := current
	var bestBins [][]*podInfo
	for _, tr := range trials {
		t := tr.t
		if tr.bound >= bestCost {
			break
		}
		// A packing whose nodes but the last already cost bestCost loses: it is
		// given up as soon as it needs that many.
		tooMany := func(nodes int) bool { return float64(nodes-1)*prices[t] >= bestCost }
		if !s.packing.pack(members, &t.alloc, s.n, tooMany) || !s.binsKeepMinValues(first.reqs, candidates, s.packing.used) {
			continue
		}
		binUsed := s.packing.used
		cost := float64(len(binUsed)-1) * prices[t]
		last := binUsed[len(binUsed)-1]
		lastPrice := math.Inf(1)
		for _, u := range candidates {
			if Fits(&Resources{}, &last, &u.alloc, s.n) < 0 {
				lastPrice = prices[u]
				break
			}
		}
		if cost+lastPrice < bestCost-1e-12 {
			bestCost, bestBins = cost+lastPrice, s.packing.bins(members)
		}
	}
	if bestBins == nil {
		return nil
	}
	pieces := make([]*simNode, 0, len(bestBins))
	var reserved Resources
	for _, bin := range bestBins {
		piece := &simNode{name: first.name, kind: plannedNode, pool: first.pool, reqs: first.reqs, taints: first.taints, pods: bin}
		for _, p := range bin {
			piece.used.add(&p.class.req, s.n)
		}
		for _, t := range candidates {
			if Fits(&Resources{}, &piece.used, &t.alloc, s.n) < 0 {
				piece.options = append(piece.options, t)
			}
		}
		piece.reserved = s.reservation(piece.options)
		reserved = reserved.Add(piece.reserved, s.n)
		pieces = append(pieces, piece)
	}
	after := first.pool.used.Sub(reservedBefore, s.n).Add(reserved, s.n)
	if !first.pool.fitsLimits(&after) {
		return nil
	}
	first.pool.used = after
	for _, piece := range pieces {
		for _, p := range piece.pods {
			s.placed[p.pod] = piece
		}
	}
	return pieces
}

// binsKeepMinValues reports whether, for each bin of a repack, enough of the
// candidate types hold it for the requirements' minValues.
func (s *solver) binsKeepMinValues(reqs Requirements, candidates []*typeInfo, binUsed []Resources) bool {
	if s.relaxMinValues || !slices.ContainsFunc(reqs, func(r Requirement) bool { return r.MinValues > 0 }) {
		return true
	}
	for i := range binUsed {
		var options []*typeInfo
		for _, t := range candidates {
			if Fits(&Resources{}, &binUsed[i], &t.alloc, s.n) < 0 {
				options = append(options, t)
			}
		}
		if !minValuesMet(reqs, options, func(t *typeInfo) *typeInfo { return t }) {
			return false
		}
	}
	return true
}

// requirementsKey identifies a node's pool and requirements, less its hostname.
// A requirement still the pool's is named rather than spelled out: on a real
// catalog the instance types alone would spell hundreds of names per node.
func (s *solver) requirementsKey(n *simNode) string {
	var key strings.Builder
	key.WriteString(n.pool.name)
	for i := range n.reqs {
		r := &n.reqs[i]
		switch pr, ok := n.pool.reqs.Get(r.Key); {
		case r.Key == v1.LabelHostname:
		case ok && pr.Equal(r):
			key.WriteString("|=" + r.Key)
		default:
			key.WriteString("|" + r.String())
		}
	}
	return key.String()
}

// splitCandidates lists the pool's types the node's requirements (key) allow,
// with an offering there, cheapest first; nodes with the same requirements share
// the list.
func (s *solver) splitCandidates(n *simNode, key string) ([]*typeInfo, map[*typeInfo]float64) {
	if c, ok := s.candidates[key]; ok {
		return c.types, c.prices
	}
	c := candidateList{prices: map[*typeInfo]float64{}}
	filter := n.pool.offerFilter(n.reqs)
	for _, t := range n.pool.types {
		if _, ok := n.reqs.Intersects(t.reqs); !ok {
			continue
		}
		o, ok := t.cheapest(filter)
		if !ok {
			continue
		}
		c.prices[t] = o.Price
		c.types = append(c.types, t)
	}
	slices.SortStableFunc(c.types, func(a, b *typeInfo) int { return cmp.Compare(c.prices[a], c.prices[b]) })
	if s.candidates == nil {
		s.candidates = map[string]candidateList{}
	}
	s.candidates[key] = c
	return c.types, c.prices
}

type candidateList struct {
	types  []*typeInfo
	prices map[*typeInfo]float64
}

// packing is a first-fit packing of pods into nodes of one size: each pod's node
// and each node's use. A repack tries it for many sizes, so it keeps its storage.
type packing struct {
	node []int32
	used []Resources
}

// pack packs the pods first-fit into nodes of allocatable alloc; false when one
// does not fit at all, or when tooMany says the nodes needed so far are too many.
func (pk *packing) pack(pods []*podInfo, alloc *Resources, n int, tooMany func(nodes int) bool) bool {
	pk.node, pk.used = pk.node[:0], pk.used[:0]
	for _, p := range pods {
		i := 0
		for i < len(pk.used) && Fits(&pk.used[i], &p.class.req, alloc, n) >= 0 {
			i++
		}
		if i == len(pk.used) {
			if Fits(&Resources{}, &p.class.req, alloc, n) >= 0 || tooMany(i+1) {
				return false
			}
			pk.used = append(pk.used, Resources{})
		}
		pk.used[i].add(&p.class.req, n)
		pk.node = append(pk.node, int32(i))
	}
	return true
}

// bins lists the pods of each node of the last packing.
func (pk *packing) bins(pods []*podInfo) [][]*podInfo {
	out := make([][]*podInfo, len(pk.used))
	for j, i := range pk.node {
		out[i] = append(out[i], pods[j])
	}
	return out
}

// plan turns the solver's nodes into the result.
func (s *solver) plan() *Plan {
	out := &Plan{Unschedulable: s.failures, Warnings: s.warnings}
	for _, p := range s.pods {
		n := s.placed[p.pod]
		if n != nil && n.kind != plannedNode {
			out.Bindings = append(out.Bindings, Binding{Pod: p.pod, Node: n.name})
		}
	}
	// What the limited pools may still grow by: new nodes keep fallback options
	// larger than their cheapest as far as this allows (see finish).
	for _, ps := range s.pools {
		if len(ps.limited) > 0 {
			ps.headroom = ps.limits.Sub(ps.used, s.n)
		}
	}
	for _, n := range s.nodes {
		if n.kind != plannedNode {
			continue
		}
		nn := s.finish(n)
		nn.Name = fmt.Sprintf("planned-%d", len(out.NewNodes)+1)
		out.NewNodes = append(out.NewNodes, nn)
	}
	return out
}

// finish ranks a planned node's options by price and fixes its requirements.
func (s *solver) finish(n *simNode) *NewNode {
	reqs := slices.DeleteFunc(slices.Clone(n.reqs), func(r Requirement) bool { return r.Key == v1.LabelHostname })
	options := s.priced[:0]
	defer func() { s.priced = options[:0] }() // the buffer, for the next node
	// An option may be larger than the cheapest one the plan reserved for as far
	// as the pool's limits still allow: the launch keeps its fallbacks, and the
	// limits hold whichever the cloud launches.
	within := func(t *typeInfo) bool {
		for _, r := range n.pool.limited {
			if t.capacity.At(r)-n.reserved.At(r) > n.pool.headroom.At(r) {
				return false
			}
		}
		return true
	}
	filter := n.pool.offerFilter(reqs)
	if sameOfferings(n.pool.reqs, reqs) {
		// The options are in the pool's price order, which still holds.
		for t := range n.fitting(s.n) {
			if !within(t) {
				continue
			}
			o, _ := t.cheapest(filter)
			options = append(options, priced{t, o})
			if len(options) >= s.opts.MaxInstanceTypes && minValuesMet(reqs, options, func(p priced) *typeInfo { return p.t }) {
				break
			}
		}
	} else {
		less := func(a, b priced) int {
			return cmp.Or(cmp.Compare(a.offer.Price, b.offer.Price), strings.Compare(a.t.it.Name, b.t.it.Name))
		}
		// Without minValues only the cheapest MaxInstanceTypes are kept: keep them
		// sorted as they come rather than sorting hundreds of options.
		bounded := !slices.ContainsFunc(reqs, func(r Requirement) bool { return r.MinValues > 0 })
		for t := range n.fitting(s.n) {
			// Options come by their cheapest price in the pool, no more than what
			// the node's offerings cost: past the last kept, none can be kept.
			if bounded && len(options) == s.opts.MaxInstanceTypes && t.price > options[len(options)-1].offer.Price {
				break
			}
			o, ok := t.cheapest(filter)
			if !ok || !within(t) {
				continue
			}
			p := priced{t, o}
			if !bounded {
				options = append(options, p)
				continue
			}
			if len(options) == s.opts.MaxInstanceTypes && less(p, options[len(options)-1]) >= 0 {
				continue
			}
			i, _ := slices.BinarySearchFunc(options, p, less)
			if len(options) == s.opts.MaxInstanceTypes {
				options = options[:len(options)-1]
			}
			options = slices.Insert(options, i, p)
		}
		if !bounded {
			slices.SortFunc(options, less)
		}
	}
	options, reqs = s.spendReservations(options, reqs, filter)
	keep := min(len(options), s.opts.MaxInstanceTypes)
	// Keep going past the bound while a minValues requirement needs more variety.
	for keep < len(options) && !minValuesMet(reqs, options[:keep], func(p priced) *typeInfo { return p.t }) {
		keep++
	}
	options = options[:keep]
	for _, r := range n.pool.limited {
		extra := int64(0)
		for _, o := range options {
			extra = max(extra, o.t.capacity.At(r)-n.reserved.At(r))
		}
		n.pool.headroom.Set(r, n.pool.headroom.At(r)-extra)
	}
	nn := &NewNode{Name: n.name, NodePool: n.pool.name, Taints: n.pool.taints, StartupTaints: n.pool.startup}
	for _, p := range n.pods {
		nn.Pods = append(nn.Pods, p.pod)
	}
	names := make([]string, len(options))
	for i, o := range options {
		if i == 0 {
			nn.InstanceTypes = make([]*InstanceType, 0, len(options))
		}
		nn.InstanceTypes = append(nn.InstanceTypes, o.t.it)
		names[i] = o.t.it.Name
	}
	if len(options) > 0 {
		nn.InstanceType, nn.Offering = options[0].t.it, options[0].offer
		nn.Requests = s.idx.List(n.used.Add(options[0].t.daemons, s.n))
	}
	if s.nodesPos >= 0 {
		delete(nn.Requests, "nodes")
	}
	slices.Sort(names) // names is ours: sortedUnique's copy is not needed
	nn.Requirements = reqs.With(Requirement{Key: v1.LabelInstanceType, values: slices.Compact(names)})
	if s.relaxMinValues {
		types := make([]*typeInfo, len(options))
		for i, o := range options {
			types[i] = o.t
		}
		for i := range nn.Requirements {
			r := &nn.Requirements[i]
			if got := distinctValues(types, r.Key); r.MinValues > got {
				r.MinValues, nn.MinValuesRelaxed = got, true
			}
		}
	}
	return nn
}

// priced is a node's option: an instance type and the offering it would take.
type priced struct {
	t     *typeInfo
	offer Offering
}

// spendReservations gives the node the count-bounded offering (a capacity
// reservation) its cheapest option takes, while the count lasts: planned nodes
// take them in order. An option whose bounded offering ran out falls back to its
// next offering, and the options are ranked again; a node left with no bounded
// offering no longer allows the capacity types of those that ran out, so the
// launch follows the plan. When every option ran out the node is kept as it was,
// and the launch finds out.
func (s *solver) spendReservations(options []priced, reqs Requirements, filter offerFilter) ([]priced, Requirements) {
	if !slices.ContainsFunc(options, func(p priced) bool { return p.offer.ReservationCapacity > 0 }) {
		return options, reqs
	}
	var spent []string // capacity types of bounded offerings that ran out
	var fallback []priced
	for _, p := range options {
		name := p.t.it.Name
		if p.offer.ReservationCapacity <= 0 || s.boundLeft(name, p.offer) > 0 {
			fallback = append(fallback, p)
			continue
		}
		spent = append(spent, p.offer.CapacityType)
		o, ok := p.t.cheapestWhere(filter, func(o Offering) bool { return o.ReservationCapacity <= 0 || s.boundLeft(name, o) > 0 })
		if ok {
			fallback = append(fallback, priced{p.t, o})
		}
	}
	if len(fallback) == 0 {
		return options, reqs
	}
	if len(spent) > 0 {
		slices.SortStableFunc(fallback, func(a, b priced) int { return cmp.Compare(a.offer.Price, b.offer.Price) })
		options = fallback
	}
	if first := options[0]; first.offer.ReservationCapacity > 0 {
		s.takeBounded(first.t.it.Name, first.offer)
		return options, reqs
	}
	for _, ct := range spent {
		narrowed := reqs.With(MustRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpNotIn, ct))
		if r, _ := narrowed.Get(v1.CapacityTypeLabelKey); r.Satisfiable() {
			reqs = narrowed
		}
	}
	return options, reqs
}

// sameOfferings reports whether a node's zone and capacity-type requirements are
// still the pool's, so the pool's offering prices apply.
func sameOfferings(pool, node Requirements) bool {
	for _, key := range []string{v1.LabelZone, v1.CapacityTypeLabelKey} {
		a, okA := pool.Get(key)
		b, okB := node.Get(key)
		if okA != okB || (okA && !a.Equal(b)) {
			return false
		}
	}
	return true
}

func minValuesMet[T any](reqs Requirements, options []T, typeOf func(T) *typeInfo) bool {
	for i := range reqs {
		if reqs[i].MinValues == 0 {
			continue
		}
		types := make([]*typeInfo, len(options))
		for j, o := range options {
			types[j] = typeOf(o)
		}
		if distinctValues(types, reqs[i].Key) < reqs[i].MinValues {
			return false
		}
	}
	return true
}

func labelsOf(p *corev1.Pod) map[string]string { return p.Labels }
