package fidelity

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// shrink makes a disagreement's case as small as it can while the two checks
// still disagree, the same way round, on the same node: it drops nodes, pods,
// constraints, terms, labels and taints one at a time, keeping each removal
// that leaves a valid case with the disagreement, until none does.
func shrink(ctx context.Context, k *kubeFilters, d disagreement) disagreement {
	still := func(c *testCase) (disagreement, bool) {
		if validate(c) != nil {
			return d, false
		}
		ours, kube, err := verdicts(ctx, k, c)
		if err != nil {
			return d, false
		}
		o, kb := ours[d.node], kube[d.node]
		if (o == "") != d.oursFits || (kb == "") == d.oursFits {
			return d, false
		}
		return disagreement{index: d.index, c: c, node: d.node, oursFits: d.oursFits, ours: o, kube: kb}, true
	}
	cur := d
	for budget := 5000; budget > 0; {
		progressed := false
		for _, reduce := range reductions(cur.c, d.node) {
			budget--
			next := cur.c.clone()
			reduce(next)
			if nd, ok := still(next); ok {
				cur, progressed = nd, true
				break
			}
		}
		if !progressed {
			break
		}
	}
	return cur
}

type reduction func(c *testCase)

// del removes element i, leaving nil rather than an empty slice.
func del[T any](s []T, i int) []T {
	s = slices.Delete(slices.Clone(s), i, i+1)
	if len(s) == 0 {
		return nil
	}
	return s
}

func delKey(m map[string]string, k string) map[string]string {
	delete(m, k)
	if len(m) == 0 {
		return nil
	}
	return m
}

// reductions lists the ways to make c smaller, each addressing c's elements by
// position so that it applies to a clone. Bigger cuts come first.
func reductions(c *testCase, target string) []reduction {
	var out []reduction
	add := func(r reduction) { out = append(out, r) }

	for i, n := range c.nodes {
		if n.Node.Name != target {
			add(func(x *testCase) { x.nodes = del(x.nodes, i) })
		}
	}
	for i, n := range c.nodes {
		for j := range n.Pods {
			add(func(x *testCase) { x.nodes[i].Pods = del(x.nodes[i].Pods, j) })
		}
	}

	// The pending pod.
	spec := &c.pod.Spec
	out = append(out, affinityReductions(c.pod.Spec.Affinity, func(x *testCase) **corev1.Affinity { return &x.pod.Spec.Affinity })...)
	for i, tsc := range spec.TopologySpreadConstraints {
		at := func(x *testCase) *corev1.TopologySpreadConstraint { return &x.pod.Spec.TopologySpreadConstraints[i] }
		add(func(x *testCase) { x.pod.Spec.TopologySpreadConstraints = del(x.pod.Spec.TopologySpreadConstraints, i) })
		if tsc.MinDomains != nil {
			add(func(x *testCase) { at(x).MinDomains = nil })
		}
		if tsc.NodeAffinityPolicy != nil {
			add(func(x *testCase) { at(x).NodeAffinityPolicy = nil })
		}
		if tsc.NodeTaintsPolicy != nil {
			add(func(x *testCase) { at(x).NodeTaintsPolicy = nil })
		}
		if tsc.MatchLabelKeys != nil {
			add(func(x *testCase) { at(x).MatchLabelKeys = nil })
		}
		out = append(out, selectorReductions(tsc.LabelSelector, func(x *testCase) *metav1.LabelSelector { return at(x).LabelSelector })...)
	}
	for i := range spec.Tolerations {
		add(func(x *testCase) { x.pod.Spec.Tolerations = del(x.pod.Spec.Tolerations, i) })
	}
	for _, k := range sortedKeys(spec.NodeSelector) {
		add(func(x *testCase) { x.pod.Spec.NodeSelector = delKey(x.pod.Spec.NodeSelector, k) })
	}
	for i := range spec.InitContainers {
		add(func(x *testCase) { x.pod.Spec.InitContainers = del(x.pod.Spec.InitContainers, i) })
	}
	if len(spec.Containers) > 1 {
		for i := range spec.Containers {
			add(func(x *testCase) { x.pod.Spec.Containers = del(x.pod.Spec.Containers, i) })
		}
	}
	out = append(out, containerReductions(spec, func(x *testCase) *corev1.PodSpec { return &x.pod.Spec })...)
	if spec.Overhead != nil {
		add(func(x *testCase) { x.pod.Spec.Overhead = nil })
	}
	if spec.Resources != nil {
		add(func(x *testCase) { x.pod.Spec.Resources = nil })
	}
	for _, k := range sortedKeys(c.pod.Labels) {
		add(func(x *testCase) { x.pod.Labels = delKey(x.pod.Labels, k) })
	}

	// The nodes and their pods.
	for i, n := range c.nodes {
		node := n.Node
		for j := range node.Spec.Taints {
			add(func(x *testCase) { x.nodes[i].Node.Spec.Taints = del(x.nodes[i].Node.Spec.Taints, j) })
		}
		if node.Spec.Unschedulable {
			add(func(x *testCase) { x.nodes[i].Node.Spec.Unschedulable = false })
		}
		for _, k := range sortedKeys(node.Labels) {
			if k != labelHostname {
				add(func(x *testCase) { x.nodes[i].Node.Labels = delKey(x.nodes[i].Node.Labels, k) })
			}
		}
		for _, name := range sortedKeys(node.Status.Allocatable) {
			if name == gpu || name == corev1.ResourceEphemeralStorage {
				add(func(x *testCase) {
					delete(x.nodes[i].Node.Status.Allocatable, name)
					delete(x.nodes[i].Node.Status.Capacity, name)
				})
			}
		}
		for j, p := range n.Pods {
			pod := func(x *testCase) *corev1.Pod { return x.nodes[i].Pods[j] }
			out = append(out, affinityReductions(p.Spec.Affinity, func(x *testCase) **corev1.Affinity { return &pod(x).Spec.Affinity })...)
			out = append(out, containerReductions(&p.Spec, func(x *testCase) *corev1.PodSpec { return &pod(x).Spec })...)
			for _, k := range sortedKeys(p.Labels) {
				add(func(x *testCase) { pod(x).Labels = delKey(pod(x).Labels, k) })
			}
			if p.DeletionTimestamp != nil {
				add(func(x *testCase) { pod(x).DeletionTimestamp, pod(x).DeletionGracePeriodSeconds = nil, nil })
			}
		}
	}
	return out
}

// containerReductions drop the containers' ports and requests.
func containerReductions(spec *corev1.PodSpec, at func(x *testCase) *corev1.PodSpec) []reduction {
	var out []reduction
	list := func(s *corev1.PodSpec, init bool) []corev1.Container {
		if init {
			return s.InitContainers
		}
		return s.Containers
	}
	for _, init := range []bool{false, true} {
		for i, c := range list(spec, init) {
			if c.Ports != nil {
				out = append(out, func(x *testCase) { list(at(x), init)[i].Ports = nil })
			}
			for _, name := range sortedKeys(c.Resources.Requests) {
				out = append(out, func(x *testCase) {
					r := &list(at(x), init)[i].Resources
					delete(r.Requests, name)
					delete(r.Limits, name)
				})
			}
		}
	}
	return out
}

// affinityReductions drop affinity terms, then simplify the ones left.
func affinityReductions(a *corev1.Affinity, at func(x *testCase) **corev1.Affinity) []reduction {
	if a == nil {
		return nil
	}
	var out []reduction
	add := func(r reduction) {
		out = append(out, func(x *testCase) {
			r(x)
			tidyAffinity(at(x))
		})
	}
	if na := a.NodeAffinity; na != nil {
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			terms := func(x *testCase) *[]corev1.NodeSelectorTerm {
				return &(*at(x)).NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			}
			for i, term := range req.NodeSelectorTerms {
				add(func(x *testCase) { *terms(x) = del(*terms(x), i) })
				for j := range term.MatchExpressions {
					add(func(x *testCase) { (*terms(x))[i].MatchExpressions = del((*terms(x))[i].MatchExpressions, j) })
				}
				if term.MatchFields != nil {
					add(func(x *testCase) { (*terms(x))[i].MatchFields = nil })
				}
			}
		}
		if na.PreferredDuringSchedulingIgnoredDuringExecution != nil {
			add(func(x *testCase) { (*at(x)).NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = nil })
		}
	}
	podTerms := func(terms []corev1.PodAffinityTerm, list func(x *testCase) *[]corev1.PodAffinityTerm) {
		for i, t := range terms {
			add(func(x *testCase) { *list(x) = del(*list(x), i) })
			term := func(x *testCase) *corev1.PodAffinityTerm { return &(*list(x))[i] }
			if t.Namespaces != nil {
				add(func(x *testCase) { term(x).Namespaces = nil })
			}
			if t.NamespaceSelector != nil {
				add(func(x *testCase) { term(x).NamespaceSelector = nil })
			}
			if t.MatchLabelKeys != nil || t.MismatchLabelKeys != nil {
				add(func(x *testCase) { term(x).MatchLabelKeys, term(x).MismatchLabelKeys = nil, nil })
			}
			for _, r := range selectorReductions(t.LabelSelector, func(x *testCase) *metav1.LabelSelector { return term(x).LabelSelector }) {
				add(r)
			}
		}
	}
	if pa := a.PodAffinity; pa != nil {
		podTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, func(x *testCase) *[]corev1.PodAffinityTerm {
			return &(*at(x)).PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		})
		if pa.PreferredDuringSchedulingIgnoredDuringExecution != nil {
			add(func(x *testCase) { (*at(x)).PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = nil })
		}
	}
	if pa := a.PodAntiAffinity; pa != nil {
		podTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, func(x *testCase) *[]corev1.PodAffinityTerm {
			return &(*at(x)).PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		})
		if pa.PreferredDuringSchedulingIgnoredDuringExecution != nil {
			add(func(x *testCase) { (*at(x)).PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = nil })
		}
	}
	return out
}

// tidyAffinity removes what reductions left empty, as a user would not write it
// (and validation would refuse a required node affinity without terms).
func tidyAffinity(a **corev1.Affinity) {
	x := *a
	if na := x.NodeAffinity; na != nil {
		if na.RequiredDuringSchedulingIgnoredDuringExecution != nil && len(na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
			na.RequiredDuringSchedulingIgnoredDuringExecution = nil
		}
		if na.RequiredDuringSchedulingIgnoredDuringExecution == nil && na.PreferredDuringSchedulingIgnoredDuringExecution == nil {
			x.NodeAffinity = nil
		}
	}
	if pa := x.PodAffinity; pa != nil && pa.RequiredDuringSchedulingIgnoredDuringExecution == nil && pa.PreferredDuringSchedulingIgnoredDuringExecution == nil {
		x.PodAffinity = nil
	}
	if pa := x.PodAntiAffinity; pa != nil && pa.RequiredDuringSchedulingIgnoredDuringExecution == nil && pa.PreferredDuringSchedulingIgnoredDuringExecution == nil {
		x.PodAntiAffinity = nil
	}
	if x.NodeAffinity == nil && x.PodAffinity == nil && x.PodAntiAffinity == nil {
		*a = nil
	}
}

func selectorReductions(s *metav1.LabelSelector, at func(x *testCase) *metav1.LabelSelector) []reduction {
	if s == nil {
		return nil
	}
	var out []reduction
	for _, k := range sortedKeys(s.MatchLabels) {
		out = append(out, func(x *testCase) { at(x).MatchLabels = delKey(at(x).MatchLabels, k) })
	}
	for i := range s.MatchExpressions {
		out = append(out, func(x *testCase) { at(x).MatchExpressions = del(at(x).MatchExpressions, i) })
	}
	return out
}

func sortedKeys[K ~string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
