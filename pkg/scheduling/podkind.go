package scheduling

import corev1 "k8s.io/api/core/v1"

// IsDaemonSetPod reports a pod a DaemonSet owns: it follows nodes rather than
// needing one.
func IsDaemonSetPod(p *corev1.Pod) bool {
	for _, ref := range p.OwnerReferences {
		if ref.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// IsMirrorPod reports the API server's copy of a static pod: the kubelet runs it and
// it cannot be evicted or moved.
func IsMirrorPod(p *corev1.Pod) bool {
	_, ok := p.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

// IsTerminal reports a pod that has finished.
func IsTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// Reschedulable reports a pod on a node that is going away which will need a place
// elsewhere: not finished, not a DaemonSet's or a mirror pod, and not terminating
// unless a StatefulSet owns it. A StatefulSet makes a pod's replacement only once
// the pod is gone, under the same name, so its place is planned while it still
// terminates (as Karpenter does) rather than after the drain; a ReplicaSet's
// replacement is pending already.
func Reschedulable(p *corev1.Pod) bool {
	return (p.DeletionTimestamp == nil || ownedBy(p, "StatefulSet")) && !IsTerminal(p) && !IsDaemonSetPod(p) && !IsMirrorPod(p)
}

func ownedBy(p *corev1.Pod, kind string) bool {
	for _, ref := range p.OwnerReferences {
		if ref.Kind == kind && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}
