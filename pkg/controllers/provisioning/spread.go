package provisioning

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/nodetailor/tailor/pkg/scheduling"
)

// spreadAdmits reports whether the kube-scheduler's topology spread filter lets pod
// onto node once the pods on nodes (bound, and waiting for their planned node,
// launching or up) are all in place: for each hard constraint (DoNotSchedule), the
// pods that match its selector in the pod's namespace, counted per domain over the
// nodes the pod may use (its node selector and required node affinity unless
// nodeAffinityPolicy is Ignore; untolerated taints when nodeTaintsPolicy is Honor)
// that carry every key of its constraints, and the node's domain may not exceed
// the smallest by more than maxSkew. The pod itself is not counted where it waits.
//
// Checked against the cluster as it stands, a pod whose peers in another zone are
// still on their way would be barred only for now; counted as they are planned,
// a bar is one their landing will not lift.
func spreadAdmits(nodes []*scheduling.Node, node *scheduling.Node, pod *corev1.Pod) bool {
	var hard []corev1.TopologySpreadConstraint
	for _, c := range pod.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable == corev1.DoNotSchedule {
			hard = append(hard, c)
		}
	}
	if len(hard) == 0 {
		return true
	}
	affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
	for _, c := range hard {
		domain, ok := node.Node.Labels[c.TopologyKey]
		if !ok {
			return false
		}
		sel, err := scheduling.SpreadSelector(&c, pod.Labels)
		if err != nil {
			return true // the API server validates selectors; leave the judgement to the solver
		}
		counts := map[string]int32{}
		for _, n := range nodes {
			if !counted(n.Node, hard, c, affinity, pod) {
				continue
			}
			d := n.Node.Labels[c.TopologyKey]
			counts[d] += matching(n.Pods, pod, sel)
		}
		if _, ok := counts[domain]; !ok {
			counts[domain] = 0
		}
		least := int32(-1)
		for _, k := range counts {
			if least < 0 || k < least {
				least = k
			}
		}
		if c.MinDomains != nil && int32(len(counts)) < *c.MinDomains {
			least = 0
		}
		self := int32(0)
		if sel.Matches(labels.Set(pod.Labels)) {
			self = 1
		}
		if counts[domain]+self-least > c.MaxSkew {
			return false
		}
	}
	return true
}

// counted reports whether node n is one of constraint c's domains for pod.
func counted(n *corev1.Node, hard []corev1.TopologySpreadConstraint, c corev1.TopologySpreadConstraint, affinity nodeaffinity.RequiredNodeAffinity, pod *corev1.Pod) bool {
	for _, other := range hard {
		if _, ok := n.Labels[other.TopologyKey]; !ok {
			return false
		}
	}
	if c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
		if ok, _ := affinity.Match(n); !ok {
			return false
		}
	}
	if c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
		_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(n.Spec.Taints, pod.Spec.Tolerations, func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		})
		if untolerated {
			return false
		}
	}
	return true
}

// matching counts the pods the kube-scheduler counts for pod's spread: not
// terminating, not finished, in its namespace, selected; not pod itself.
func matching(pods []*corev1.Pod, pod *corev1.Pod, sel labels.Selector) int32 {
	var k int32
	for _, p := range pods {
		if p.UID == pod.UID || p.DeletionTimestamp != nil || scheduling.IsTerminal(p) || p.Namespace != pod.Namespace {
			continue
		}
		if sel.Matches(labels.Set(p.Labels)) {
			k++
		}
	}
	return k
}
