package scheduling

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

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

// spreadSelector is the constraint's selector plus matchLabelKeys taken from the pod.
func spreadSelector(c *corev1.TopologySpreadConstraint, podLabels map[string]string) (labels.Selector, error) {
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
