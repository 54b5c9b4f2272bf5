package termination

import (
	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Drain is one pass of draining a node, decided from its pods alone.
type Drain struct {
	// Evict are the pods to evict now; Delete, to delete outright (the grace period
	// is up); Waiting, pods held back (do-not-disrupt) or already on their way out.
	Evict, Delete, Waiting []*corev1.Pod
	Why                    string
	// Done: nothing that matters runs on the node any more.
	Done bool
}

// PlanDrain orders a node's pods for eviction: ordinary pods first; DaemonSet and
// system-critical pods once those are gone; mirror pods and finished pods never.
// Pods annotated karpenter.sh/do-not-disrupt are not evicted until the grace period
// expires; then everything left is deleted.
func PlanDrain(pods []corev1.Pod, expired bool) Drain {
	var d Drain
	var first, last []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		switch {
		case scheduling.IsTerminal(p), scheduling.IsMirrorPod(p):
			continue
		case p.DeletionTimestamp != nil:
			d.Waiting = append(d.Waiting, p)
			d.Why = "terminating"
			continue
		case expired:
			d.Delete = append(d.Delete, p)
		case p.Annotations[v1.DoNotDisruptAnnotationKey] == "true":
			d.Waiting = append(d.Waiting, p)
			d.Why = v1.DoNotDisruptAnnotationKey
		case scheduling.IsDaemonSetPod(p) || isCritical(p):
			last = append(last, p)
		default:
			first = append(first, p)
		}
	}
	switch {
	case len(first) > 0:
		d.Evict = first
	case len(d.Waiting) == 0:
		d.Evict = last
	}
	d.Done = len(first)+len(last)+len(d.Waiting)+len(d.Delete) == 0
	return d
}

func isCritical(p *corev1.Pod) bool {
	return p.Spec.PriorityClassName == "system-node-critical" || p.Spec.PriorityClassName == "system-cluster-critical"
}
