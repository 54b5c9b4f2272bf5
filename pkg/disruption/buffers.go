package disruption

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// withBuffers returns in with the CapacityBuffers' placeholder pods (in.Buffers)
// running where the engine places them on the room there is (nodes launching
// too, no new node), in copies of the nodes: a node whose only pods are
// placeholders is not empty, and taking a node away needs room for its
// placeholders elsewhere, as for any pod, so consolidation keeps a buffer's
// room. When a buffer shrinks, the placeholders it no longer has leave their
// room to be consolidated like any other. Nodes going away hold none.
func withBuffers(in *Input) *Input {
	if len(in.Buffers) == 0 {
		return in
	}
	leaving := map[string]bool{}
	for _, nc := range in.Claims {
		if nc.DeletionTimestamp != nil || in.InFlight[nc.Name] {
			leaving[nc.Status.ProviderID] = true
		}
	}
	place := *in.Cluster
	place.Pods, place.NodePools, place.Demand, place.Nodes = in.Buffers, nil, nil, nil
	for _, n := range in.Cluster.Nodes {
		if id := n.Node.Spec.ProviderID; (id == "" || !leaving[id]) && !hasTaint(n.Node, v1.DisruptedNoScheduleTaint) {
			place.Nodes = append(place.Nodes, n)
		}
	}
	plan, err := scheduling.Solve(&place, in.Options.Scheduling)
	if err != nil || len(plan.Bindings) == 0 {
		return in
	}
	cluster := *in.Cluster
	cluster.Nodes = slices.Clone(in.Cluster.Nodes)
	index := make(map[string]int, len(cluster.Nodes))
	for i, n := range cluster.Nodes {
		index[n.Node.Name] = i
	}
	copied := map[int]bool{}
	for _, b := range plan.Bindings {
		i, ok := index[b.Node]
		if !ok {
			continue
		}
		if !copied[i] {
			c := *cluster.Nodes[i]
			c.Pods, c.Requests = slices.Clone(c.Pods), nil
			cluster.Nodes[i] = &c
			copied[i] = true
		}
		p := *b.Pod
		p.Spec.NodeName = cluster.Nodes[i].Node.Name
		cluster.Nodes[i].Pods = append(cluster.Nodes[i].Pods, &p)
	}
	out := *in
	out.Cluster = &cluster
	return &out
}

// isBufferPod reports a CapacityBuffer's placeholder: nothing evicts it, so no
// PodDisruptionBudget or do-not-disrupt holds its node back.
func isBufferPod(p *corev1.Pod) bool { return v1alpha1.IsCapacityBufferPod(p) }
