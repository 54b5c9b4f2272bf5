package scheduling

import (
	corev1 "k8s.io/api/core/v1"
)

// Feasibility judges one pod against each existing node of in as the
// kube-scheduler's filter plugins would: resources, node selector and affinity,
// taints, host ports, cordons, topology spread (DoNotSchedule) and inter-pod
// affinity and anti-affinity, counting the pods already bound. Preferences play no
// part. It maps each node's name to "" when the pod fits there, else the reason.
// It is the single-node check the solver runs, exposed for differential testing
// against the kube-scheduler.
func Feasibility(in *Input, pod *corev1.Pod) (map[string]string, error) {
	out := make(map[string]string, len(in.Nodes))
	for _, node := range in.Nodes {
		// A fresh solver per node: trying a node commits the pod to it.
		s := newSolver(&Input{Pods: []*corev1.Pod{pod}, Nodes: in.Nodes, Namespaces: in.Namespaces,
			PersistentVolumeClaims: in.PersistentVolumeClaims, PersistentVolumes: in.PersistentVolumes,
			StorageClasses: in.StorageClasses}, Options{})
		p := s.pods[0]
		if p.class.invalid != "" {
			out[node.Node.Name] = p.class.invalid
			continue
		}
		hard := p.class.levels[len(p.class.levels)-1]
		for _, n := range s.nodes {
			if n.name != node.Node.Name {
				continue
			}
			vd, reason := s.tryNode(p, hard, n, true)
			if vd == accepted {
				reason = ""
			} else if reason == "" {
				reason = "does not fit"
			}
			out[n.name] = reason
		}
	}
	return out, nil
}
