package testobj

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeOption changes a node being built.
type NodeOption func(*corev1.Node)

// Node is a Ready node with room (allocatable and capacity) for cpu, memory and
// 110 pods, labelled with its hostname.
func Node(name, cpu, memory string, opts ...NodeOption) *corev1.Node {
	room := resources(cpu, memory)
	room[corev1.ResourcePods] = resource.MustParse("110")
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{Allocatable: room, Capacity: room.DeepCopy(), Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

// NodeLabels adds the key/value pairs kv to the node's labels.
func NodeLabels(kv ...string) NodeOption {
	return func(n *corev1.Node) { n.Labels = merge(n.Labels, kv) }
}

// NodeTaints adds taints to the node.
func NodeTaints(taints ...corev1.Taint) NodeOption {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, taints...) }
}

// ProviderID sets the node's provider ID.
func ProviderID(id string) NodeOption { return func(n *corev1.Node) { n.Spec.ProviderID = id } }

// NodeReady sets the node's Ready condition to status, as it has been since since
// (its last heartbeat too).
func NodeReady(status corev1.ConditionStatus, since time.Time) NodeOption {
	return func(n *corev1.Node) {
		reason := "KubeletReady"
		if status != corev1.ConditionTrue {
			reason = "KubeletNotReady"
		}
		cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: reason,
			LastHeartbeatTime: metav1.NewTime(since), LastTransitionTime: metav1.NewTime(since)}
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i] = cond
				return
			}
		}
		n.Status.Conditions = append(n.Status.Conditions, cond)
	}
}

// NodeCapacity replaces the node's capacity and allocatable.
func NodeCapacity(capacity, allocatable corev1.ResourceList) NodeOption {
	return func(n *corev1.Node) { n.Status.Capacity, n.Status.Allocatable = capacity, allocatable }
}
