package scheduling_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// Each pending pod's effective zone, as Karpenter's scheduler reports it before
// placing any: its one zone where its node selector, node affinity, volumes and
// zone topology constraints (against the pods already running) leave one,
// flexible where they leave several or say nothing, none where they leave none.
// Pods not pending have none.
func TestEffectiveZones(t *testing.T) {
	pending := testobj.Phase(corev1.PodPending)
	db := map[string]string{"app": "db"}
	inZones := func(zones ...string) podOption {
		return withNodeAffinity([]corev1.NodeSelectorRequirement{{Key: v1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: zones}})
	}
	in := &Input{
		NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(4))},
		Nodes: []*Node{
			existingNode("a", "4", "16Gi", map[string]string{v1.LabelZone: "zone-a"}, makePod("db-a", "1", "1Gi", withLabels("app", "db"))),
			existingNode("b", "4", "16Gi", map[string]string{v1.LabelZone: "zone-b"}, makePod("db-b", "1", "1Gi", withLabels("app", "db"))),
		},
		Pods: []*corev1.Pod{
			makePod("anywhere", "1", "1Gi", pending),
			makePod("selected", "1", "1Gi", pending, withNodeSelector(v1.LabelZone, "zone-b")),
			makePod("two-zones", "1", "1Gi", pending, inZones("zone-a", "zone-b")),
			makePod("left-over", "1", "1Gi", pending, withLabels("app", "db"), withPodAntiAffinity(v1.LabelZone, db)),
			makePod("excluded", "1", "1Gi", pending, withNodeSelector(v1.LabelZone, "zone-a"), withPodAntiAffinity(v1.LabelZone, db)),
			makePod("running", "1", "1Gi", testobj.Phase(corev1.PodRunning)),
			makePod("volume", "1", "1Gi", pending, withClaims("data")),
		},
		PersistentVolumes: []*corev1.PersistentVolume{{ObjectMeta: metav1.ObjectMeta{Name: "pv"}, Spec: corev1.PersistentVolumeSpec{
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-c"}}}}}}}}}},
		PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}},
	}
	plan := solve(t, in)
	got := map[string]string{}
	for p, z := range plan.EffectiveZones {
		got[p.Name] = z
	}
	want := map[string]string{"anywhere": ZoneFlexible, "selected": "zone-b", "two-zones": ZoneFlexible, "left-over": "zone-c", "excluded": ZoneNone, "volume": "zone-c"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("effective zones (-want +got):\n%s", diff)
	}
}
