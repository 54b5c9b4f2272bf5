package sandbox

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/localcluster"
)

// The system node is kwok's, untainted, in a zone, no NodePool's, and has room for
// the chart's controller (500m, 512Mi) beside the DaemonSets but none for a pod of
// 1 cpu, such as the demo's.
func TestSystemNode(t *testing.T) {
	node := systemNode()
	if node.Annotations[localcluster.KwokNodeAnnotation] != "fake" {
		t.Errorf("annotations %v: kwok would not play the node", node.Annotations)
	}
	if _, ok := node.Labels[SystemNodeRole]; !ok || node.Labels[corev1.LabelTopologyZone] == "" || node.Labels[corev1.LabelHostname] != SystemNode {
		t.Errorf("labels %v, want %s, a zone and its hostname", node.Labels, SystemNodeRole)
	}
	if _, ok := node.Labels[v1.NodePoolLabelKey]; ok || len(node.Spec.Taints) > 0 {
		t.Errorf("labels %v, taints %v: want no NodePool and no taints", node.Labels, node.Spec.Taints)
	}
	objs, err := documents(daemonSets())
	if err != nil {
		t.Fatal(err)
	}
	free := node.Status.Allocatable.DeepCopy()
	for _, obj := range objs {
		ds := &appsv1.DaemonSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, ds); err != nil {
			t.Fatal(err)
		}
		for _, c := range ds.Spec.Template.Spec.Containers {
			for name, q := range c.Resources.Requests {
				f := free[name]
				f.Sub(q)
				free[name] = f
			}
		}
	}
	if free.Cpu().Cmp(resource.MustParse("500m")) < 0 || free.Memory().Cmp(resource.MustParse("512Mi")) < 0 {
		t.Errorf("%v free beside the DaemonSets, want room for 500m and 512Mi", free)
	}
	if free.Cpu().Cmp(resource.MustParse("1")) >= 0 {
		t.Errorf("%v free beside the DaemonSets: a pod of 1 cpu would fit", free)
	}
}
