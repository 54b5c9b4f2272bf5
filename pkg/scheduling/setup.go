package scheduling

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Setup: the solver's state built from the Input: DaemonSets, existing and launching
// nodes, NodePools with their instance types, and pod classes.

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
	s.addDemand(in.Demand)
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
		if in.Launching {
			s.chargeDaemons(n, in.Pods)
		}
		s.nodes = append(s.nodes, n)
	}
}

// chargeDaemons counts on a launching node the DaemonSet pods that will run there
// once it registers: none is bound to it yet, and its promised room (the
// instance's allocatable once launched; before, its smallest option's, or the
// claim's requests, which include them) is not all free for pods. Left out, every node in flight showed the
// DaemonSets' share as free, re-plans filled it, and the pods put there found no
// room when the node came up and got nodes of their own. pods are those already
// on the node: a DaemonSet with a pod among them is not counted twice.
func (s *solver) chargeDaemons(n *simNode, pods []*corev1.Pod) {
	reqs := daemonView(n.reqs)
	for _, d := range s.daemons {
		if Untolerated(d.pod.Spec.Tolerations, n.taints, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute) != nil ||
			!admitsAny(reqs, d.terms) || slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return ownedByDaemonSet(p, d.pod) }) {
			continue
		}
		n.used = n.used.Add(d.req, allResources)
		n.ports = append(n.ports, d.ports...)
	}
}

// ownedByDaemonSet reports whether p is a pod of the DaemonSet whose template is
// daemon (named and placed as its DaemonSet).
func ownedByDaemonSet(p, daemon *corev1.Pod) bool {
	if p.Namespace != daemon.Namespace {
		return false
	}
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Name == daemon.Name {
			return true
		}
	}
	return false
}

// addPools reads the NodePools. One whose requirements cannot be read (the API
// server's validation should have refused them) cannot launch anything, and says
// why; a limit too large to represent saturates, practically unlimited.
func (s *solver) addPools(pools []*NodePool) {
	for _, np := range pools {
		p := np.NodePool
		ps := &poolState{name: p.Name, pool: p, unavailable: np.Unavailable, taints: p.Spec.Template.Spec.Taints,
			startup: p.Spec.Template.Spec.StartupTaints, domainsK: map[string][]string{}, nodeCost: np.NodeCost}
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
			t := &typeInfo{it: it, reqs: it.Requirements, price: offer.Price + ps.nodeCost.Total(),
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
		ps.addDaemonPorts(s.daemons, reqs)
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

// addDaemonPorts sorts the host ports of the DaemonSets that run on the pool's
// nodes (reqs: the pool's own requirements): those of a DaemonSet that runs on
// every type are taken on each new node from the start; those of one that runs on
// some types only (its node affinity or selector admits their labels alone) stay
// with those types, and a pod that wants such a port narrows its node to the
// other types (see portTypes).
func (ps *poolState) addDaemonPorts(daemons []*daemon, reqs Requirements) {
	for _, d := range daemons {
		if len(d.ports) == 0 || Untolerated(d.pod.Spec.Tolerations, ps.taints, corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute) != nil {
			continue
		}
		var on []*typeInfo
		for _, t := range ps.types {
			if admitsAny(daemonView(reqs.And(t.reqs)), d.terms) {
				on = append(on, t)
			}
		}
		switch len(on) {
		case 0:
		case len(ps.types):
			ps.daemonPorts = append(ps.daemonPorts, d.ports...)
		default:
			ps.typePorts = true
			for _, t := range on {
				t.daemonPorts = append(t.daemonPorts, d.ports...)
			}
		}
	}
}

// portTypes says, by position in the pool's types, which types leave the ports
// free of the DaemonSets that run on some types only; nil when every type does.
func (ps *poolState) portTypes(ports []hostPort) []bool {
	if !ps.typePorts || len(ports) == 0 {
		return nil
	}
	ps.key = append(ps.key[:0], 'h')
	for _, p := range ports {
		ps.key = fmt.Appendf(ps.key, "%s/%s/%d;", p.protocol, p.ip, p.port)
	}
	free := ps.memo(ps.key, func(t *typeInfo) bool {
		for _, want := range ports {
			for _, taken := range t.daemonPorts {
				if want.conflicts(taken) {
					return false
				}
			}
		}
		return true
	})
	if !slices.Contains(free, false) {
		return nil
	}
	return free
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

// addDemand reads the pods that only size new nodes: those of a class some pod to
// place has (the classes the solve places), each counted Count times.
func (s *solver) addDemand(demand []Demand) {
	var key []byte
	for _, d := range demand {
		req, quick := s.idx.quickPodVector(d.Pod)
		if !quick || d.Count <= 0 {
			continue // a pod to place of this shape would have been read the slow way
		}
		key = appendClassKey(key[:0], d.Pod, &req, s.idx.Len())
		if c, ok := s.classes[string(key)]; ok && c.invalid == "" {
			s.demand = append(s.demand, classDemand{class: c, count: int64(d.Count)})
		}
	}
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
