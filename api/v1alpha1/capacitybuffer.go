package v1alpha1

import corev1 "k8s.io/api/core/v1"

// CapacityBufferPodAnnotationKey marks a placeholder pod of a CapacityBuffer
// (autoscaling.x-k8s.io): a pod that exists only in Tailor's plans, standing for
// room the buffer keeps free. Its value is the buffer's namespace/name. Nothing
// evicts such a pod, so no PodDisruptionBudget or do-not-disrupt holds it back.
const CapacityBufferPodAnnotationKey = Group + "/capacity-buffer"

// IsCapacityBufferPod reports a CapacityBuffer's placeholder pod.
func IsCapacityBufferPod(p *corev1.Pod) bool {
	_, ok := p.Annotations[CapacityBufferPodAnnotationKey]
	return ok
}
