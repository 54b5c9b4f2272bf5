package disruption

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
)

// placeholder is a CapacityBuffer's placeholder pod of cpu, unbound, labelled as
// the fixture's pods are (so a PDB over app=web selects it).
func placeholder(cpu string) *corev1.Pod {
	p := pod(cpu, "1Gi")
	p.Annotations = map[string]string{v1alpha1.CapacityBufferPodAnnotationKey: "default/room"}
	p.Status.Phase = corev1.PodPending
	return p
}

// A node that holds only a buffer's room is not empty and is not consolidated
// away; once the buffer shrinks, it is deleted as empty, before any move.
func TestBufferRoomIsKept(t *testing.T) {
	c := newCluster(t)
	c.node(3, v1.CapacityTypeOnDemand, pod("3", "1Gi"))
	room := c.node(1, v1.CapacityTypeOnDemand)
	// Every pod is held by a PDB: placeholders are never evicted, so it holds
	// none of them back.
	c.in.PDBs = []*policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, MaxUnavailable: &intstr.IntOrString{IntVal: 0}},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: 0}}}
	c.in.Buffers = []*corev1.Pod{placeholder("1500m")}
	if cmd := Decide(c.in).Command; cmd != nil {
		t.Fatalf("the buffer's room is the only free room: want nothing, got %s", cmd)
	}
	c.in.Buffers = nil
	cmd := Decide(c.in).Command
	if cmd == nil || cmd.Reason != v1.DisruptionReasonEmpty || cmd.Candidates[0].Node.Node.Name != room.Node.Name {
		t.Fatalf("the buffer shrank to nothing: want %s deleted as empty, got %v", room.Node.Name, cmd)
	}
}

// The buffer's room may move: two half-empty nodes whose pods and placeholders
// fit one smaller node are consolidated, and the replacement holds the
// placeholders too.
func TestBufferRoomMovesWithConsolidation(t *testing.T) {
	c := newCluster(t)
	c.node(7, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
	c.node(7, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
	c.in.Buffers = []*corev1.Pod{placeholder("1"), placeholder("1")}
	cmd := Decide(c.in).Command
	if cmd == nil || cmd.Reason != v1.DisruptionReasonUnderutilized {
		t.Fatalf("want the two 8-cpu nodes consolidated, got %v", cmd)
	}
	var cpu int64
	for _, r := range cmd.Replacements {
		a := r.InstanceType.Allocatable()
		cpu += a.Cpu().MilliValue()
	}
	if kept := len(cmd.Candidates); kept == 2 && cpu < 4000 {
		t.Errorf("replacements with %dm cpu for two pods and two placeholders of 1 cpu", cpu)
	}
}
