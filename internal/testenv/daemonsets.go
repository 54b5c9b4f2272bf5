package testenv

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SystemDaemonSets are what every real cluster runs on each node: a kube-proxy and a
// log agent, both tolerating every taint (karpenter.sh/disrupted included), so every
// scenario provisions room for them and has to drain around them.
func SystemDaemonSets() []*appsv1.DaemonSet {
	return []*appsv1.DaemonSet{
		systemDaemonSet("kube-proxy", "system-node-critical", "100m", "64Mi"),
		systemDaemonSet("log-agent", "", "50m", "100Mi"),
	}
}

func systemDaemonSet(name, priorityClass, cpu, memory string) *appsv1.DaemonSet {
	labels := map[string]string{"daemon": name}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					PriorityClassName: priorityClass,
					Tolerations:       []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{Name: name, Image: "registry.k8s.io/pause:3.10",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}}},
				},
			},
		},
	}
}
