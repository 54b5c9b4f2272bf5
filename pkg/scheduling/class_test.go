package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Pods share a class exactly when their scheduling-relevant specs match, whatever
// their names and the order their maps were filled in.
func TestClassKey(t *testing.T) {
	antiAffinity := func(key string) *corev1.Affinity {
		return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a", "tier": "web"}}}}}}
	}
	podOf := func(name string, labels map[string]string, aff *corev1.Affinity) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels}, Spec: corev1.PodSpec{Affinity: aff}}
	}
	key := func(p *corev1.Pod) string { return string(appendClassKey(nil, p, &Resources{}, 4)) }
	labels := map[string]string{"app": "a", "tier": "web"}
	base := podOf("p1", labels, antiAffinity("kubernetes.io/hostname"))
	same := podOf("p2", map[string]string{"tier": "web", "app": "a"}, antiAffinity("kubernetes.io/hostname"))
	if key(base) != key(same) {
		t.Errorf("pods alike but for their names have different keys")
	}
	for name, other := range map[string]*corev1.Pod{
		"zonal anti-affinity": podOf("p3", labels, antiAffinity("topology.kubernetes.io/zone")),
		"no affinity":         podOf("p4", labels, nil),
		"other labels":        podOf("p5", map[string]string{"app": "a"}, antiAffinity("kubernetes.io/hostname")),
	} {
		if key(base) == key(other) {
			t.Errorf("%s: same key as the base pod", name)
		}
	}
}
