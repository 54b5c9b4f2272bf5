package scheduling_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// A volume that may be in several zones (a PV's node affinity listing them, a
// StorageClass's allowed topologies) lets its pod run in any of them. When a
// pod's zonal anti-affinity or spread rules out the first, the kube-scheduler's
// VolumeBinding and the pod's constraints meet in another: so must the plan.
func TestVolumeInSeveralZonesTriesTheNext(t *testing.T) {
	zoneTerms := func(oneTerm bool, zones ...string) []corev1.NodeSelectorTerm {
		if oneTerm {
			return []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: zones}}}}
		}
		var out []corev1.NodeSelectorTerm
		for _, z := range zones {
			out = append(out, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{z}}}})
		}
		return out
	}
	topologies := func(oneTerm bool, zones ...string) []corev1.TopologySelectorTerm {
		if oneTerm {
			return []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: v1.LabelZone, Values: zones}}}}
		}
		var out []corev1.TopologySelectorTerm
		for _, z := range zones {
			out = append(out, corev1.TopologySelectorTerm{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: v1.LabelZone, Values: []string{z}}}})
		}
		return out
	}
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	sel := map[string]string{"app": "db"}
	// input has three db pods, each with a claim of its own: bound to a PV in
	// zones a, b, c (bound) or waiting for its first consumer under a class
	// allowing them.
	input := func(bound, oneTerm bool, constraint podOption) *Input {
		in := &Input{NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(4))}}
		sc := "regional"
		in.StorageClasses = []*storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: sc}, VolumeBindingMode: &wait,
			AllowedTopologies: topologies(oneTerm, "zone-a", "zone-b", "zone-c")}}
		for i := range 3 {
			claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("data-%d", i), Namespace: "default"},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc}}
			if bound {
				pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pv-%d", i)}, Spec: corev1.PersistentVolumeSpec{
					NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: zoneTerms(oneTerm, "zone-a", "zone-b", "zone-c")}}}}
				in.PersistentVolumes = append(in.PersistentVolumes, pv)
				claim.Spec.VolumeName = pv.Name
				claim.Status.Phase = corev1.ClaimBound
			}
			in.PersistentVolumeClaims = append(in.PersistentVolumeClaims, claim)
			in.Pods = append(in.Pods, makePod(fmt.Sprintf("db-%d", i), "1", "1Gi", withLabels("app", "db"), constraint, func(p *corev1.Pod) {
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
					PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name}}})
			}))
		}
		return in
	}
	constraints := map[string]podOption{
		"anti-affinity": withPodAntiAffinity(v1.LabelZone, sel),
		"spread":        withSpread(v1.LabelZone, 1, corev1.DoNotSchedule, sel),
	}
	for _, bound := range []bool{true, false} {
		for _, oneTerm := range []bool{true, false} {
			for name, constraint := range constraints {
				t.Run(fmt.Sprintf("%s/bound=%v/oneTerm=%v", name, bound, oneTerm), func(t *testing.T) {
					plan := solve(t, input(bound, oneTerm, constraint))
					if len(plan.Unschedulable) != 0 {
						t.Fatalf("unschedulable: %s; want the three pods in three zones", plan.Unschedulable[0].Reason)
					}
					zones := map[string]bool{}
					for _, n := range plan.NewNodes {
						zones[n.Offering.Zone] = true
					}
					if len(zones) != 3 {
						t.Errorf("zones %v, want three", zones)
					}
				})
			}
		}
	}
}
