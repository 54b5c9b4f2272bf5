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
	"github.com/nodetailor/tailor/internal/testobj"
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
		nodePool("general", "select", testobj.TemplateLabels("pool", "select"),
			testobj.Requirement("karpenter.k8s.aws/instance-gpu-count", v1.NodeSelectorOpIn, "0")),
		nodePool("gpu", "select", testobj.TemplateLabels("pool", "select"), testobj.TemplateTaint("nvidia.com/gpu", "true", corev1.TaintEffectNoSchedule),
			testobj.Requirement("karpenter.k8s.aws/instance-gpu-count", v1.NodeSelectorOpGte, "1")))
	create(t, testobj.Deployment("arm", 2, "1", "2Gi", onPool("select"), testobj.Template(testobj.NodeSelector(v1.LabelArch, "arm64"))))
	create(t, testobj.Deployment("trainer", 1, "2", "8Gi", onPool("select"), testobj.Template(
		testobj.Tolerations(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}),
		func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
		})))
	create(t, testobj.Deployment("plain", 2, "500m", "512Mi", onPool("select")))

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
	onlyM5 := testobj.Requirement(v1.LabelInstanceType, v1.NodeSelectorOpIn, "m5.large")
	create(t, nc,
		nodePool("scarce-spot", "scarce", testobj.Weight(50), testobj.TemplateLabels("pool", "scarce"), onlyM5,
			testobj.Requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeSpot)),
		nodePool("scarce-on-demand", "scarce", testobj.TemplateLabels("pool", "scarce"), onlyM5,
			testobj.Requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeOnDemand)))
	provider.withoutCapacity(t, nc, v1alpha1.Offering{InstanceType: "m5.large", CapacityType: v1.CapacityTypeSpot})
	create(t, testobj.Deployment("scarce", 1, "500m", "512Mi", onPool("scarce")))
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
		failed = failed || (e.InvolvedObject.Kind == "NodeClaim" && e.Reason == "InsufficientCapacityError")
	}
	if !failed {
		t.Error("no InsufficientCapacityError event: the spot launch was never attempted")
	}
}

// A pod no NodePool can ever hold gets an event saying why, and the controller
// keeps serving the others.
func TestImpossiblePodGetsAnEvent(t *testing.T) {
	create(t, nodeClass("huge"), nodePool("huge", "huge", testobj.TemplateLabels("pool", "huge")))
	create(t, testobj.Deployment("impossible", 1, "1000", "1Gi", onPool("huge")))
	eventually(t, time.Minute, "an event on the impossible pod", func(ctx context.Context) (bool, string) {
		return podEvent(ctx, "impossible", "FailedScheduling", "no instance type offers 1000 cpu")
	})
	create(t, testobj.Deployment("possible", 1, "1", "1Gi", onPool("huge")))
	runningOn(t, "possible", 1)
}
