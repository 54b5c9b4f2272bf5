package scheduling_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// The kube-scheduler's PodTopologySpread counts the domains of the nodes the pod's
// nodeSelector and required node affinity admit (nodeAffinityPolicy Honor); a
// volume's node affinity is VolumeBinding's filter and takes no domain away. So a
// pod whose volume pins it to zone-a still sees three zones for minDomains 3, and
// the global minimum is the smallest of their counts.
func TestVolumeZoneKeepsSpreadDomains(t *testing.T) {
	sel := map[string]string{"app": "db"}
	three := int32(3)
	spread := func(p *corev1.Pod) {
		withSpread(v1.LabelZone, 1, corev1.DoNotSchedule, sel)(p)
		p.Spec.TopologySpreadConstraints[0].MinDomains = &three
	}
	pvInA := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-a"}, Spec: corev1.PersistentVolumeSpec{
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}}}}}}}}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-a"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	withData := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}})
	}
	input := func(pending *corev1.Pod) *Input {
		// One matching pod in each zone already.
		var nodes []*Node
		for _, z := range []string{"a", "b", "c"} {
			nodes = append(nodes, existingNode("in-"+z, "4", "8Gi", map[string]string{v1.LabelZone: "zone-" + z},
				makePod("old-"+z, "100m", "100Mi", withLabels("app", "db"))))
		}
		return &Input{Pods: []*corev1.Pod{pending}, Nodes: nodes,
			PersistentVolumes: []*corev1.PersistentVolume{pvInA}, PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{claim},
			NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(4))}}
	}

	t.Run("volume", func(t *testing.T) {
		plan := solve(t, input(makePod("db", "1", "1Gi", withLabels("app", "db"), spread, withData)))
		if len(plan.Unschedulable) != 0 {
			t.Fatalf("unschedulable: %s; want the pod in zone-a (counts 1/1/1 over three domains, skew 1)", plan.Unschedulable[0].Reason)
		}
		if len(plan.Bindings) != 1 || plan.Bindings[0].Node != "in-a" {
			t.Errorf("bindings %v, new nodes %d; want the pod bound to in-a", plan.Bindings, len(plan.NewNodes))
		}
	})
	// A nodeSelector does narrow the domains: one domain is below minDomains, so the
	// minimum is 0 and zone-a's count of 1 leaves no room for skew 1.
	t.Run("nodeSelector", func(t *testing.T) {
		plan := solve(t, input(makePod("db", "1", "1Gi", withLabels("app", "db"), spread, withNodeSelector(v1.LabelZone, "zone-a"))))
		if len(plan.Unschedulable) != 1 {
			t.Errorf("bindings %v, new nodes %d; want the pod unschedulable", plan.Bindings, len(plan.NewNodes))
		}
	})
}
