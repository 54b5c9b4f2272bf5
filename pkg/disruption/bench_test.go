package disruption

import (
	"fmt"
	corev1 "k8s.io/api/core/v1"
	"slices"
	"testing"

	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// benchCluster is about nodes nodes packed by the scheduling engine from plain pods,
// then scaled down: keep 1 keeps every pod, k > 1 one pod in k, -1 one pod per node.
func benchCluster(b *testing.B, nodes, keep int) *cluster {
	c := newCluster(b)
	c.types = c.types[:8] // small types, so many nodes
	c.in.Cluster.NodePools[0].InstanceTypes = c.types
	pods := schedtest.PlainPods(nodes*23/2, 1)
	in := *c.in.Cluster
	in.Pods = pods
	plan, err := scheduling.Solve(&in, scheduling.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range plan.NewNodes {
		c.node(slices.Index(c.types, n.InstanceType), v1.CapacityTypeOnDemand, n.Pods...)
	}
	if keep < 0 { // one pod left per node: nothing empty, much to consolidate
		for _, n := range c.in.Cluster.Nodes {
			n.Pods = n.Pods[:1]
		}
	}
	if keep > 1 {
		i := 0
		for _, n := range c.in.Cluster.Nodes {
			n.Pods = slices.DeleteFunc(n.Pods, func(*corev1.Pod) bool { i++; return i%keep != 0 })
		}
	}
	return c
}

func BenchmarkDecide(b *testing.B) {
	for _, tc := range []struct {
		name  string
		nodes int
		keep  int
	}{{"stable", 1000, 1}, {"scaled-down", 1000, 3}, {"one-pod-per-node", 1000, -1}} {
		b.Run(fmt.Sprintf("%s-%d", tc.name, tc.nodes), func(b *testing.B) {
			c := benchCluster(b, tc.nodes, tc.keep)
			b.ResetTimer()
			var dec *Decision
			for range b.N {
				dec = Decide(c.in)
			}
			b.ReportMetric(float64(len(c.in.Cluster.Nodes)), "nodes")
			if dec.Command != nil {
				b.ReportMetric(float64(len(dec.Command.Candidates)), "candidates")
			}
		})
	}
}
