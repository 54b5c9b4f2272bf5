package aws

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/disruption"
)

// EC2's status checks feed node repair: an instance whose system check fails
// gets a False EC2SystemStatusOK condition from the time EC2 says it failed; with
// the AWS repair policies its claim is repaired two minutes on, and not before; a
// healthy instance gets no condition.
func TestInstanceStatusFeedsRepair(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{Seed: 0x25603, PendingDelay: time.Nanosecond})
	nc := e.nodeClass(t, nil)
	var claims []*v1.NodeClaim
	var nodes []*corev1.Node
	for _, name := range []string{"sick", "well-1", "well-2", "well-3", "well-4", "well-5"} {
		launched, err := e.cloud.Create(t.Context(), e.claim(nc, name, req(v1.LabelInstanceType, "m5.large")))
		if err != nil {
			t.Fatal(err)
		}
		launched.Labels[v1.NodePoolLabelKey] = "default"
		claims = append(claims, launched)
		nodes = append(nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: launched.Labels},
			Spec:   corev1.NodeSpec{ProviderID: launched.Status.ProviderID},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	}
	time.Sleep(time.Millisecond) // running
	sick := e.instanceOf(t, claims[0])
	if err := e.fake.ImpairInstance(sick.ID, fakeaws.CheckSystem); err != nil {
		t.Fatal(err)
	}
	health := NewInstanceHealth(e.clients.EC2, e.clock)
	conds, err := health.NodeConditions(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := conds[claims[0].Status.ProviderID]
	if len(got) != 1 || got[0].Type != ConditionSystemStatusOK || got[0].Status != corev1.ConditionFalse || time.Since(got[0].LastTransitionTime.Time) > time.Minute {
		t.Fatalf("conditions of the impaired instance: %+v", got)
	}
	if len(conds) != 1 {
		t.Errorf("conditions for %d instances, want the impaired one only: %v", len(conds), conds)
	}
	decide := func(now time.Time) *disruption.RepairDecision {
		withConds := append([]*corev1.Node(nil), nodes...)
		n := nodes[0].DeepCopy()
		n.Status.Conditions = append(n.Status.Conditions, got...)
		withConds[0] = n
		return disruption.DecideRepairs(&disruption.RepairInput{Now: now, Nodes: withConds, Claims: claims, Policies: RepairPolicies})
	}
	since := got[0].LastTransitionTime.Time
	if dec := decide(since.Add(time.Minute)); len(dec.Repairs) != 0 {
		t.Errorf("repaired a minute into the failure: %+v", dec.Repairs)
	}
	dec := decide(since.Add(2 * time.Minute))
	if len(dec.Repairs) != 1 || dec.Repairs[0].Claim.Name != "sick" || dec.Repairs[0].Condition.Type != ConditionSystemStatusOK {
		t.Errorf("repairs two minutes on: %+v, want the sick node's", dec.Repairs)
	}
}

// The AWS repair policies are Karpenter's: the kubelet's Ready and the EKS node
// monitoring agent's conditions with their tolerations.
func TestAWSRepairPolicies(t *testing.T) {
	want := map[corev1.NodeConditionType]time.Duration{
		"AcceleratedHardwareReady": 10 * time.Minute, "StorageReady": 30 * time.Minute, "NetworkingReady": 30 * time.Minute,
		"KernelReady": 30 * time.Minute, "ContainerRuntimeReady": 30 * time.Minute,
	}
	got := map[corev1.NodeConditionType]time.Duration{}
	ready := 0
	for _, p := range RepairPolicies {
		if p.ConditionType == corev1.NodeReady {
			ready++
			continue
		}
		if p.ConditionStatus != corev1.ConditionFalse {
			t.Errorf("%s on %s, want False", p.ConditionType, p.ConditionStatus)
		}
		got[p.ConditionType] = p.Toleration
	}
	if ready != len(cloudprovider.KubeletRepairPolicies) {
		t.Errorf("%d Ready policies, want the kubelet's %d", ready, len(cloudprovider.KubeletRepairPolicies))
	}
	for c, tol := range want {
		if got[c] != tol {
			t.Errorf("%s tolerated %s, want %s", c, got[c], tol)
		}
	}
}
