package state

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// A batch planned a second after the last, before the last one's claims have
// launched, fits into the room those claims will have (their smallest option's,
// less the DaemonSets), not only what they were made for: on the realistic cloud
// (launches take 1.5 s) five Online Boutique pods of such a batch got three claims
// of their own (issue 26 §3). The room the plan holds for the claim's own pods is
// reserved by the provisioner, not here: the claim below was made for 1 cpu.
func TestUnlaunchedClaimOffersItsSmallestOptionsRoom(t *testing.T) {
	types := schedtest.SyntheticTypes(4) // fake-it-i: i+1 cpu, 100m overhead
	np := readyPool("default", 0, metav1.ConditionTrue)
	claim := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "last-batch", Labels: map[string]string{v1.NodePoolLabelKey: "default"}},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn,
				Values: []string{"fake-it-3", "fake-it-2"}}},
			// Its pods' 1 cpu and the DaemonSet's 500m.
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}},
		}}
	daemon := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system"}}
	daemon.Spec.Template.Spec.Containers = []corev1.Container{{Name: "agent", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}
	// The claim's own pod is the provisioner's to reserve; here the claim has room
	// for it and for this one: fake-it-2 has 2900m, less 500m for the agent.
	pending := testobj.Pod("this-batch", "1", "", testobj.Unschedulable())
	snap := Build(&Objects{Pods: []*corev1.Pod{pending}, NodeClaims: []*v1.NodeClaim{claim}, NodePools: []*v1.NodePool{np},
		DaemonSets: []*appsv1.DaemonSet{daemon}}, func(*v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil }, BuildOptions{})
	in := snap.Input
	for _, n := range in.Nodes {
		if n.Launching {
			n.Pods = append(n.Pods, testobj.Pod("its-own", "1", ""))
		}
	}
	plan, err := scheduling.Solve(in, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NewNodes) != 0 || len(plan.Bindings) != 1 {
		t.Errorf("%d new nodes, %d pods on the claim; want this batch's pod on the claim: its smallest option holds the agent and both pods",
			len(plan.NewNodes), len(plan.Bindings))
	}
}
