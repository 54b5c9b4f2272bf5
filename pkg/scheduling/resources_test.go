package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// quickPodVector must read the usual pod as Vector(PodRequests) does, and leave
// every other pod to them.
func TestQuickPodVector(t *testing.T) {
	list := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	container := func(requests, limits corev1.ResourceList) corev1.Container {
		return corev1.Container{Name: "c", Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}
	}
	podOf := func(cs ...corev1.Container) *corev1.Pod { return &corev1.Pod{Spec: corev1.PodSpec{Containers: cs}} }
	withInit := podOf(container(list("cpu", "1"), nil))
	withInit.Spec.InitContainers = []corev1.Container{container(list("cpu", "2"), nil)}
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		quick bool
	}{
		{"requests", podOf(container(list("cpu", "250m", "memory", "1Gi"), nil)), true},
		{"limit without request", podOf(container(list("cpu", "1"), list("cpu", "2", "memory", "3Gi"))), true},
		{"pods requested", podOf(container(list("cpu", "1", "pods", "5"), nil)), true},
		{"nothing", podOf(container(nil, nil)), true},
		{"resource the index lacks", podOf(container(list("cpu", "1", "example.com/gpu", "1"), nil)), false},
		{"two containers", podOf(container(list("cpu", "1"), nil), container(list("cpu", "1"), nil)), false},
		{"init container", withInit, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, quick := NewResourceIndex().quickPodVector(tc.pod)
			if quick != tc.quick {
				t.Fatalf("quick = %v, want %v", quick, tc.quick)
			}
			idx := NewResourceIndex()
			want := idx.Vector(PodRequests(tc.pod))
			if quick && !got.Equal(&want, idx.Len()) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}
