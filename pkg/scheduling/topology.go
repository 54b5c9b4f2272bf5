package scheduling

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Topology bookkeeping: the groups that count pods per domain for topology spreads,
// pod affinity and anti-affinity.

type groupKind int

const (
	spreadGroup groupKind = iota
	affinityGroup
	antiAffinityGroup
)

func (k groupKind) String() string {
	return [...]string{"topology spread", "pod affinity", "pod anti-affinity"}[k]
}

// group counts the pods matching one topology constraint (a spread constraint, or a
// pod affinity or anti-affinity term) per domain of its topology key. Pods sharing a
// constraint share its group.
type group struct {
	kind groupKind
	key  string
	podSelection
	// also are more selections a pod must match to count: for a required pod
	// affinity term, the pod's other required terms, as one pod must meet them all.
	also []podSelection

	// Spread only.
	maxSkew    int32
	minDomains int32
	// others are the keys of the owner's other spread constraints of the same kind:
	// a node without one of them does not count.
	others []string
	// eligible, when set, says whether a node's pods and domain count for the spread
	// (nodeAffinityPolicy and nodeTaintsPolicy Honor, others).
	eligible func(*simNode) bool
	// honorTaints: nodeTaintsPolicy Honor, so NodePools whose taints the owner does
	// not tolerate bring no domain.
	honorTaints bool

	counts map[string]int32 // matching pods per domain
	total  int32            // matching pods anywhere
	owners map[string]int32 // anti-affinity: pods owning the term, per domain

	// domains known for the key (spread min), in sorted order; fresh means a new
	// node can open another empty domain (hostname), so the minimum is zero.
	domains []string
	fresh   bool
	// owner is the class whose constraint a spread group is (for its domains).
	owner *podClass
}

// podSelection is the pods a constraint selects: its selector, over namespaces.
type podSelection struct {
	selector labels.Selector
	// namespaces the selector applies to, sorted; allNamespaces when a
	// namespaceSelector matches everything.
	namespaces    []string
	allNamespaces bool
}

func (p *podSelection) matches(ns string, lbls labels.Set) bool {
	if !p.allNamespaces {
		if _, ok := slices.BinarySearch(p.namespaces, ns); !ok {
			return false
		}
	}
	return p.selector.Matches(lbls)
}

func (p *podSelection) String() string {
	return fmt.Sprintf("%s|%v|%s", selectorKey(p.selector), p.allNamespaces, strings.Join(p.namespaces, ","))
}

func (g *group) matches(ns string, lbls labels.Set) bool {
	if !g.podSelection.matches(ns, lbls) {
		return false
	}
	for i := range g.also {
		if !g.also[i].matches(ns, lbls) {
			return false
		}
	}
	return true
}

func (g *group) addDomain(d string) {
	if i, ok := slices.BinarySearch(g.domains, d); !ok {
		g.domains = slices.Insert(g.domains, i, d)
	}
}

// minCount is the smallest count over the known domains (zero when a fresh domain
// can be made or minDomains is not reached).
func (g *group) minCount() int32 {
	if g.minFixed() {
		return 0
	}
	m := int32(-1)
	for _, d := range g.domains {
		if c := g.counts[d]; m < 0 || c < m {
			m = c
		}
	}
	return m
}

// minFixed reports whether minCount stays where it is however pods land: the
// domains are fixed from the start, so only a fresh domain or too few keep it at zero.
func (g *group) minFixed() bool {
	return g.fresh || len(g.domains) == 0 || int32(len(g.domains)) < g.minDomains
}

// admitsSpread reports whether one more pod (selfMatch: one that the selector
// matches) in domain d keeps the skew within maxSkew.
func (g *group) admitsSpread(d string, selfMatch bool) bool {
	self := int32(0)
	if selfMatch {
		self = 1
	}
	return g.counts[d]+self-g.minCount() <= g.maxSkew
}

func (g *group) describe() string {
	return fmt.Sprintf("%s on %s (%s)", g.kind, g.key, g.selector)
}

// groupKey identifies a constraint, so pods that share one share its counts.
func groupKey(kind groupKind, key string, sel labels.Selector, namespaces []string, all bool, extra string) string {
	return fmt.Sprintf("%d|%s|%s|%v|%s|%s", kind, key, selectorKey(sel), all, strings.Join(namespaces, ","), extra)
}

// selectorKey renders a selector for a group key. A nil label selector matches no
// pod and an empty one every pod, yet both print as "": Nothing has no
// requirements to list, which tells it apart.
func selectorKey(sel labels.Selector) string {
	if _, ok := sel.Requirements(); !ok {
		return "<nothing>"
	}
	return sel.String()
}

// SpreadSelector is the constraint's selector plus matchLabelKeys taken from the pod.
func SpreadSelector(c *corev1.TopologySpreadConstraint, podLabels map[string]string) (labels.Selector, error) {
	sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
	if err != nil {
		return nil, err
	}
	for _, k := range c.MatchLabelKeys {
		if v, ok := podLabels[k]; ok {
			r, err := labels.NewRequirement(k, selection.In, []string{v})
			if err != nil {
				return nil, err
			}
			sel = sel.Add(*r)
		}
	}
	if sel.Empty() {
		// The kube-scheduler counts no pod for an empty selector. The pod itself
		// still matches it there, but that adds one, and maxSkew is at least one:
		// the constraint never refuses a node, just as a selector matching nothing.
		return labels.Nothing(), nil
	}
	return sel, nil
}

// affinitySelector is a pod affinity term's selector with matchLabelKeys and
// mismatchLabelKeys applied from the pod.
func affinitySelector(t *corev1.PodAffinityTerm, podLabels map[string]string) (labels.Selector, error) {
	sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
	if err != nil {
		return nil, err
	}
	for _, k := range t.MatchLabelKeys {
		if v, ok := podLabels[k]; ok {
			r, err := labels.NewRequirement(k, selection.In, []string{v})
			if err != nil {
				return nil, err
			}
			sel = sel.Add(*r)
		}
	}
	for _, k := range t.MismatchLabelKeys {
		if v, ok := podLabels[k]; ok {
			r, err := labels.NewRequirement(k, selection.NotIn, []string{v})
			if err != nil {
				return nil, err
			}
			sel = sel.Add(*r)
		}
	}
	return sel, nil
}

// termNamespaces resolves the namespaces a pod affinity term applies to: its list,
// plus those its namespaceSelector matches; the pod's own when both are empty.
func termNamespaces(t *corev1.PodAffinityTerm, podNamespace string, namespaces []*corev1.Namespace) ([]string, bool, error) {
	out := slices.Clone(t.Namespaces)
	if t.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector)
		if err != nil {
			return nil, false, err
		}
		if sel.Empty() {
			return nil, true, nil
		}
		for _, ns := range namespaces {
			if sel.Matches(labels.Set(ns.Labels)) {
				out = append(out, ns.Name)
			}
		}
	} else if len(out) == 0 {
		out = []string{podNamespace}
	}
	slices.Sort(out)
	return slices.Compact(out), false, nil
}

// spreadGroup finds or makes the group for a pod's spread constraint.
func (s *solver) spreadGroup(c *podClass, tsc *corev1.TopologySpreadConstraint, pod *corev1.Pod) (*group, error) {
	sel, err := SpreadSelector(tsc, pod.Labels)
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
			if !admitsAny(ps.reqs, c.nodeTerms) || !poolHasLabels(ps.reqs, g.others) {
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

// poolHasLabels is hasLabels for a NodePool's nodes. Each has a hostname label
// (the kubelet sets it) though no NodePool's requirements name it: counting it
// absent left a zone spread beside a hostname spread without zones, its minimum
// at zero, and each zone full at maxSkew pods.
func poolHasLabels(reqs Requirements, keys []string) bool {
	for _, k := range keys {
		if k != v1.LabelHostname && !hasLabel(reqs, k) {
			return false
		}
	}
	return true
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

func labelsOf(p *corev1.Pod) map[string]string { return p.Labels }
