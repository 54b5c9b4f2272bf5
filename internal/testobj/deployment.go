package testobj

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeploymentOption changes a Deployment being built.
type DeploymentOption func(*appsv1.Deployment)

// Deployment is a Deployment in namespace default of replicas pods of one
// container requesting cpu and memory, selecting and labelling them app=name.
func Deployment(name string, replicas int32, cpu, memory string, opts ...DeploymentOption) *appsv1.Deployment {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       podSpec(cpu, memory),
			},
		},
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Template applies pod options to the Deployment's pod template: to its labels,
// annotations and spec (what they do to a pod's name, namespace, UID or status is
// dropped).
func Template(opts ...PodOption) DeploymentOption {
	return func(d *appsv1.Deployment) {
		t := &d.Spec.Template
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: t.Labels, Annotations: t.Annotations}, Spec: t.Spec}
		for _, o := range opts {
			o(p)
		}
		t.Labels, t.Annotations, t.Spec = p.Labels, p.Annotations, p.Spec
	}
}

// SelectorLabels adds the key/value pairs kv to the Deployment's selector and to
// its pods' labels.
func SelectorLabels(kv ...string) DeploymentOption {
	return func(d *appsv1.Deployment) {
		d.Spec.Selector.MatchLabels = merge(d.Spec.Selector.MatchLabels, kv)
		d.Spec.Template.Labels = merge(d.Spec.Template.Labels, kv)
	}
}
