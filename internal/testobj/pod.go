package testobj

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PodOption changes a pod being built.
type PodOption func(*corev1.Pod)

// Pod is a pod of one container requesting cpu and memory, in namespace default,
// its UID its name.
func Pod(name, cpu, memory string, opts ...PodOption) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec:       podSpec(cpu, memory),
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Pods is n pods named prefix-0 to prefix-(n-1).
func Pods(n int, prefix, cpu, memory string, opts ...PodOption) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = Pod(fmt.Sprintf("%s-%d", prefix, i), cpu, memory, opts...)
	}
	return out
}

func podSpec(cpu, memory string) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: Image,
		Resources: corev1.ResourceRequirements{Requests: resources(cpu, memory)}}}}
}

// Namespace puts the pod in namespace ns.
func Namespace(ns string) PodOption { return func(p *corev1.Pod) { p.Namespace = ns } }

// UID sets the pod's UID; "" leaves it without one, as a pod not yet created is.
func UID(uid types.UID) PodOption { return func(p *corev1.Pod) { p.UID = uid } }

// Labels adds the key/value pairs kv to the pod's labels.
func Labels(kv ...string) PodOption {
	return func(p *corev1.Pod) { p.Labels = merge(p.Labels, kv) }
}

// Annotations adds the key/value pairs kv to the pod's annotations.
func Annotations(kv ...string) PodOption {
	return func(p *corev1.Pod) { p.Annotations = merge(p.Annotations, kv) }
}

// NodeSelector adds the key/value pairs kv to the pod's node selector.
func NodeSelector(kv ...string) PodOption {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = merge(p.Spec.NodeSelector, kv) }
}

// Toleration makes the pod tolerate the taint key=value:effect.
func Toleration(key, value string, effect corev1.TaintEffect) PodOption {
	return Tolerations(corev1.Toleration{Key: key, Operator: corev1.TolerationOpEqual, Value: value, Effect: effect})
}

// Tolerations adds ts to the pod's tolerations.
func Tolerations(ts ...corev1.Toleration) PodOption {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, ts...) }
}

// NodeName binds the pod to node.
func NodeName(node string) PodOption { return func(p *corev1.Pod) { p.Spec.NodeName = node } }

// OwnedBy makes the pod controlled by the kind's object name of uid.
func OwnedBy(kind, name string, uid types.UID) PodOption {
	apiVersion := "v1"
	switch kind {
	case "ReplicaSet", "StatefulSet", "DaemonSet", "Deployment":
		apiVersion = "apps/v1"
	case "Job", "CronJob":
		apiVersion = "batch/v1"
	}
	return func(p *corev1.Pod) {
		controller := true
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid,
			Controller: &controller})
	}
}

// Phase sets the pod's phase.
func Phase(phase corev1.PodPhase) PodOption { return func(p *corev1.Pod) { p.Status.Phase = phase } }

// Unschedulable marks the pod as the kube-scheduler does when no node fits it:
// PodScheduled False, reason Unschedulable.
func Unschedulable() PodOption {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled,
			Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable})
	}
}

// Priority sets the pod's priority.
func Priority(priority int32) PodOption { return func(p *corev1.Pod) { p.Spec.Priority = &priority } }

// Request makes the pod's first container request qty of name.
func Request(name corev1.ResourceName, qty string) PodOption {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		c.Resources.Requests[name] = resource.MustParse(qty)
	}
}

// Spread adds a topology spread constraint over key of the pods selector matches.
func Spread(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, selector map[string]string) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when,
			LabelSelector: &metav1.LabelSelector{MatchLabels: selector}})
	}
}

func affinity(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

// PodAffinity requires the pod in the same key domain as the pods selector matches.
func PodAffinity(key string, selector map[string]string) PodOption {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: selector}})
	}
}

// PodAntiAffinity keeps the pod out of the key domains of the pods selector matches.
func PodAntiAffinity(key string, selector map[string]string) PodOption {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: selector}})
	}
}

// NodeAffinity sets the pod's required node affinity: one node selector term per
// list of requirements (the terms are ORed).
func NodeAffinity(terms ...[]corev1.NodeSelectorRequirement) PodOption {
	return func(p *corev1.Pod) {
		sel := &corev1.NodeSelector{}
		for _, t := range terms {
			sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: t})
		}
		a := affinity(p)
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = sel
	}
}

// PreferredNodeAffinity adds a preferred node affinity term of weight.
func PreferredNodeAffinity(weight int32, exprs ...corev1.NodeSelectorRequirement) PodOption {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: exprs}})
	}
}

// HostPort makes the pod's first container listen on port of its node.
func HostPort(port int32) PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port})
	}
}
