package scheduling_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	. "github.com/nodetailor/tailor/pkg/scheduling"
)

func TestFeasibility(t *testing.T) {
	a := existingNode("a", "2", "4Gi", map[string]string{v1.LabelZone: "z1"}, makePod("web-1", "1", "1Gi", withLabels("app", "web")))
	b := existingNode("b", "8", "16Gi", map[string]string{v1.LabelZone: "z2"})
	b.Node.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	c := existingNode("c", "8", "16Gi", map[string]string{v1.LabelZone: "z1"})
	c.Node.Spec.Unschedulable = true
	in := &Input{Nodes: []*Node{a, b, c}}
	got, err := Feasibility(in, makePod("p", "1500m", "1Gi", withLabels("app", "web"), withPodAntiAffinity(v1.LabelZone, map[string]string{"app": "web"})))
	if err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]string{"a": "insufficient cpu", "b": "taint dedicated=db:NoSchedule not tolerated", "c": "node is unschedulable"} {
		if got[node] != want {
			t.Errorf("node %s: %q, want %q", node, got[node], want)
		}
	}
	got, _ = Feasibility(in, makePod("q", "100m", "1Gi", withLabels("app", "web"), withPodAntiAffinity(v1.LabelZone, map[string]string{"app": "web"}),
		withToleration("dedicated", "db", corev1.TaintEffectNoSchedule)))
	if got["b"] != "" || got["a"] == "" {
		t.Errorf("anti-affinity: %v, want b feasible and a refused (web-1 runs in z1)", got)
	}
}
