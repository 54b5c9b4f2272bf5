package sandbox

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// The demo applies the seed example's own Deployment, as the README describes it.
func TestSeedDeployment(t *testing.T) {
	d, err := seedDeployment()
	if err != nil {
		t.Fatal(err)
	}
	if got := describeWorkload(d); d.Name != "inflate" || d.Namespace != "default" || got != "10 replicas of 1 cpu and 1Gi" {
		t.Errorf("seed Deployment %s/%s: %s, want default/inflate: 10 replicas of 1 cpu and 1Gi", d.Namespace, d.Name, got)
	}
}

// Like a real cluster's, the sandbox's DaemonSets run on every node, whatever its
// taints, and ask for room there.
func TestDefaultDaemonSetsRunOnEveryNode(t *testing.T) {
	objs, err := documents(defaults)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, obj := range objs {
		if obj.GetKind() != "DaemonSet" {
			continue
		}
		n++
		ds := &appsv1.DaemonSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, ds); err != nil {
			t.Fatal(err)
		}
		spec := ds.Spec.Template.Spec
		if len(spec.Tolerations) != 1 || spec.Tolerations[0] != (corev1.Toleration{Operator: corev1.TolerationOpExists}) {
			t.Errorf("DaemonSet %s tolerates %+v, want every taint ({operator: Exists})", ds.Name, spec.Tolerations)
		}
		for _, c := range spec.Containers {
			if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
				t.Errorf("DaemonSet %s container %s requests no cpu or memory", ds.Name, c.Name)
			}
		}
	}
	if n < 3 {
		t.Errorf("%d DaemonSets in the defaults, want a proxy, a CNI agent and a log agent", n)
	}
}

// A Node that has not registered yet may lack its capacity type (an AWS kubelet
// starts without it): the demo takes it from the node's claim, and never shows a
// blank.
func TestDescribeNodeNeverBlank(t *testing.T) {
	node := func(labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-1"}}
	}
	full := map[string]string{v1.LabelInstanceType: "m5.large", v1.LabelZone: "us-east-1a", v1.CapacityTypeLabelKey: v1.CapacityTypeSpot}
	launched := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: full}}
	noCapacityType := map[string]string{v1.LabelInstanceType: "m5.large", v1.LabelZone: "us-east-1a"}
	for _, tc := range []struct {
		name  string
		node  *corev1.Node
		claim *v1.NodeClaim
		want  string
	}{
		{"registered", node(full), nil, "m5.large us-east-1a spot"},
		{"from its claim", node(noCapacityType), launched, "m5.large us-east-1a spot"},
		{"no claim", node(noCapacityType), nil, "m5.large us-east-1a unknown"},
		{"nothing known", node(nil), &v1.NodeClaim{}, "unknown unknown unknown"},
	} {
		if got := describeNode(tc.node, tc.claim); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
