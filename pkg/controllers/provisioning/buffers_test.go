package provisioning

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
	"github.com/nodetailor/tailor/pkg/state"
)

// placeholders are n placeholder pods of a buffer of pods of cpu.
func placeholders(name string, n int, cpu string) []*corev1.Pod {
	b := &cb.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID("uid-" + name)}}
	tmpl := &corev1.PodTemplateSpec{Spec: pod("x", cpu).Spec}
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = state.PlaceholderPod(b, tmpl, i)
	}
	return out
}

// A buffer with no pod pending gets a node of its own: the node that holds only
// placeholders is kept, unlike one that holds only expected pods.
func TestPlanWithBuffers(t *testing.T) {
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	in := &scheduling.Input{NodePools: []*scheduling.NodePool{{NodePool: pool, InstanceTypes: schedtest.SyntheticTypes(8)}}}
	buffers := placeholders("room", 3, "1")
	_, plan, _, _, planned, err := planWithExpected(in, in, nil, buffers, nil, false, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !planned || len(plan.NewNodes) != 1 || len(plan.NewNodes[0].Pods) != 3 {
		t.Fatalf("planned %v, %d new nodes; want the buffer planned on one new node with its three pods", planned, len(plan.NewNodes))
	}
	if cpu := plan.NewNodes[0].InstanceType.Capacity[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("3")) < 0 {
		t.Errorf("the node has %s cpu, want room for three pods of one cpu", cpu.String())
	}
	// Where the room is there already, nothing is launched.
	node := &scheduling.Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "up", Labels: map[string]string{corev1.LabelHostname: "up"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"),
			corev1.ResourcePods: resource.MustParse("110")}}}}
	withRoom := *in
	withRoom.Nodes = []*scheduling.Node{node}
	_, plan, _, _, _, err = planWithExpected(&withRoom, &withRoom, nil, buffers, nil, false, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NewNodes) != 0 || len(plan.Bindings) != 3 {
		t.Errorf("%d new nodes, %d bindings; want the three placeholders on the node up", len(plan.NewNodes), len(plan.Bindings))
	}
}

// At a NodePool limit, placeholders never take the headroom a pending pod needs.
func TestBuffersYieldToRealPods(t *testing.T) {
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	// Two pods of 2 cpu fit one node of 5 cpu, the limit.
	pool.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("5")}
	in := &scheduling.Input{NodePools: []*scheduling.NodePool{{NodePool: pool, InstanceTypes: schedtest.SyntheticTypes(8)}},
		Pods: []*corev1.Pod{pod("a", "2"), pod("b", "2")}}
	buffers := placeholders("room", 4, "1")
	_, plan, _, _, _, err := planWithExpected(in, in, nil, buffers, nil, false, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fs := realFailures(plan.Unschedulable); len(fs) != 0 {
		t.Errorf("%d pending pods left without a node; want both placed", len(fs))
	}
	for _, n := range plan.NewNodes {
		for _, p := range n.Pods {
			if state.IsBufferPod(p) {
				t.Errorf("placeholder %s planned on a new node past the limit", p.Name)
			}
		}
	}
	// Room left under the limit goes to the buffer.
	in.Pods = in.Pods[:1]
	_, plan, _, _, planned, err := planWithExpected(in, in, nil, buffers, nil, false, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := bufferOutcomes(plan, []bool{true, true, true, true}[:len(plan.NewNodes)], make([]string, len(plan.NewNodes)))["default/room"]
	if !planned || got == nil || got.placed != 2 || got.why == "" {
		t.Errorf("planned %v, outcome %+v; want two placeholders with room and why the other two have none", planned, got)
	}
}

// The status says what Tailor did: the chunks, whether they have room, and why
// a buffer is refused.
func TestBufferStatus(t *testing.T) {
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	buffer := &cb.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "room", Namespace: "default", Generation: 2}}
	resolved := &state.Buffer{Buffer: buffer, Pods: placeholders("room", 3, "1"), Replicas: 3, PodTemplate: &cb.LocalObjectRef{Name: "chunk"}}
	for _, tc := range []struct {
		name    string
		buffer  *state.Buffer
		outcome *bufferOutcome
		ready   metav1.ConditionStatus
		prov    metav1.ConditionStatus
		reason  string
	}{
		{"all have room", resolved, &bufferOutcome{placed: 3}, metav1.ConditionTrue, metav1.ConditionTrue, BufferReasonProvisioned},
		{"some have room", resolved, &bufferOutcome{placed: 1, why: "NodePool default: limit"}, metav1.ConditionTrue, metav1.ConditionTrue, BufferReasonPartial},
		{"none has room", resolved, &bufferOutcome{why: "fits no NodePool"}, metav1.ConditionTrue, metav1.ConditionFalse, BufferReasonNoCapacity},
		{"pending pods first", resolved, nil, metav1.ConditionTrue, metav1.ConditionFalse, BufferReasonNoCapacity},
		{"empty", &state.Buffer{Buffer: buffer}, &bufferOutcome{}, metav1.ConditionTrue, metav1.ConditionFalse, BufferReasonEmpty},
		{"refused", &state.Buffer{Buffer: buffer, Refused: state.BufferUnsupportedScalableRef, Message: "no"}, nil, metav1.ConditionFalse, metav1.ConditionFalse, BufferReasonNotReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := BufferStatus(tc.buffer, tc.outcome, now)
			ready := meta.FindStatusCondition(st.Conditions, cb.ConditionReadyForProvisioning)
			prov := meta.FindStatusCondition(st.Conditions, cb.ConditionProvisioning)
			if ready == nil || prov == nil {
				t.Fatalf("conditions %v", st.Conditions)
			}
			if ready.Status != tc.ready || prov.Status != tc.prov || prov.Reason != tc.reason || prov.ObservedGeneration != 2 || prov.Message == "" {
				t.Errorf("ready %s, provisioning %s %s (%q, generation %d); want %s, %s %s", ready.Status, prov.Status, prov.Reason, prov.Message, prov.ObservedGeneration, tc.ready, tc.prov, tc.reason)
			}
			if tc.buffer.Refused == "" && (st.Replicas == nil || *st.Replicas != tc.buffer.Replicas) {
				t.Errorf("replicas %v, want %d", st.Replicas, tc.buffer.Replicas)
			}
			if tc.buffer.Refused != "" && (st.Replicas != nil || ready.Reason != tc.buffer.Refused) {
				t.Errorf("refused: replicas %v, reason %s", st.Replicas, ready.Reason)
			}
			if st.ProvisioningStrategy == nil || *st.ProvisioningStrategy != cb.ActiveCapacityStrategy {
				t.Errorf("strategy %v", st.ProvisioningStrategy)
			}
		})
	}
}
