package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
)

// nodesOf returns the nodes running app's pods.
func nodesOf(t *testing.T, app string, n int) []*corev1.Node {
	t.Helper()
	var out []*corev1.Node
	for name := range runningOn(t, app, n) {
		node := &corev1.Node{}
		if err := kube.Get(t.Context(), client.ObjectKey{Name: name}, node); err != nil {
			t.Fatal(err)
		}
		out = append(out, node)
	}
	return out
}

// arm64 pods get arm64 nodes; GPU pods get GPU nodes from the tainted GPU pool,
// which takes only pods that tolerate its taint.
func TestArchitectureAndGPUPools(t *testing.T) {
	create(t, nodeClass("select"),
		nodePool("general", "select", func(np *v1.NodePool) {
			np.Spec.Template.Labels = map[string]string{"pool": "select"}
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
				{Key: "karpenter.k8s.aws/instance-gpu-count", Operator: v1.NodeSelectorOpIn, Values: []string{"0"}}}
		}),
		nodePool("gpu", "select", func(np *v1.NodePool) {
			np.Spec.Template.Labels = map[string]string{"pool": "select"}
			np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
				{Key: "karpenter.k8s.aws/instance-gpu-count", Operator: v1.NodeSelectorOpGte, Values: []string{"1"}}}
		}))
	onPool := func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"pool": "select"} }
	create(t, deployment("arm", 2, "1", "2Gi", func(s *corev1.PodSpec) {
		onPool(s)
		s.NodeSelector[v1.LabelArch] = "arm64"
	}))
	create(t, deployment("trainer", 1, "2", "8Gi", func(s *corev1.PodSpec) {
		onPool(s)
		s.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		s.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	}))
	create(t, deployment("plain", 2, "500m", "512Mi", onPool))

	for _, n := range nodesOf(t, "arm", 2) {
		if n.Labels[v1.LabelArch] != "arm64" {
			t.Errorf("arm pod on %s (%s)", n.Name, n.Labels[v1.LabelArch])
		}
	}
	for _, n := range nodesOf(t, "trainer", 1) {
		if n.Labels[v1.NodePoolLabelKey] != "gpu" || n.Labels["karpenter.k8s.aws/instance-gpu-count"] == "0" {
			t.Errorf("GPU pod on %s from NodePool %s with %s GPUs", n.Name, n.Labels[v1.NodePoolLabelKey], n.Labels["karpenter.k8s.aws/instance-gpu-count"])
		}
		if gpus := n.Status.Allocatable["nvidia.com/gpu"]; gpus.IsZero() {
			t.Errorf("GPU node %s has no nvidia.com/gpu allocatable", n.Name)
		}
	}
	for _, n := range nodesOf(t, "plain", 2) {
		if n.Labels[v1.NodePoolLabelKey] == "gpu" {
			t.Errorf("a pod without the GPU toleration runs on GPU node %s", n.Name)
		}
	}
}

// When a launch finds no capacity for any offering its claim allows, the claim is
// dropped, those offerings are avoided for a while, and the next plan falls back:
// here from a spot-only NodePool to an on-demand one of lower weight.
func TestInsufficientCapacityFallsBack(t *testing.T) {
	nc := nodeClass("scarce")
	onlyM5 := v1.NodeSelectorRequirementWithMinValues{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"m5.large"}}
	weight := int32(50)
	create(t, nc,
		nodePool("scarce-spot", "scarce", func(np *v1.NodePool) {
			np.Spec.Weight = &weight
			np.Spec.Template.Labels = map[string]string{"pool": "scarce"}
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{onlyM5,
				{Key: v1.CapacityTypeLabelKey, Operator: v1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeSpot}}}
		}),
		nodePool("scarce-on-demand", "scarce", func(np *v1.NodePool) {
			np.Spec.Template.Labels = map[string]string{"pool": "scarce"}
			np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{onlyM5,
				{Key: v1.CapacityTypeLabelKey, Operator: v1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeOnDemand}}}
		}))
	provider.withoutCapacity(t, nc, v1alpha1.Offering{InstanceType: "m5.large", CapacityType: v1.CapacityTypeSpot})
	create(t, deployment("scarce", 1, "500m", "512Mi", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"pool": "scarce"} }))
	for _, n := range nodesOf(t, "scarce", 1) {
		if n.Labels[v1.NodePoolLabelKey] != "scarce-on-demand" || n.Labels[v1.CapacityTypeLabelKey] != v1.CapacityTypeOnDemand {
			t.Errorf("node %s from %s is %s; m5.large spot has no capacity", n.Name, n.Labels[v1.NodePoolLabelKey], n.Labels[v1.CapacityTypeLabelKey])
		}
	}
	// The spot launch was tried first and failed: the fallback was earned.
	events := &corev1.EventList{}
	if err := kube.List(t.Context(), events); err != nil {
		t.Fatal(err)
	}
	failed := false
	for _, e := range events.Items {
		failed = failed || (e.InvolvedObject.Kind == "NodeClaim" && e.Reason == "InsufficientCapacity")
	}
	if !failed {
		t.Error("no InsufficientCapacity event: the spot launch was never attempted")
	}
}

// A pod no NodePool can ever hold gets an event saying why, and the controller
// keeps serving the others.
func TestImpossiblePodGetsAnEvent(t *testing.T) {
	create(t, nodeClass("huge"), nodePool("huge", "huge", func(np *v1.NodePool) {
		np.Spec.Template.Labels = map[string]string{"pool": "huge"}
	}))
	onPool := func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"pool": "huge"} }
	create(t, deployment("impossible", 1, "1000", "1Gi", onPool))
	eventually(t, time.Minute, "an event on the impossible pod", func(ctx context.Context) (bool, string) {
		return podEvent(ctx, "impossible", "FailedScheduling", "no instance type offers 1000 cpu")
	})
	create(t, deployment("possible", 1, "1", "1Gi", onPool))
	runningOn(t, "possible", 1)
}
