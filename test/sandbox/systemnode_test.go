package sandbox

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/pkg/operator"
	"github.com/nodetailor/tailor/pkg/sandbox"
)

// `sandbox up --system-node`: the system node is there once up returns, Ready,
// untainted and no NodePool's, for a chart to be tried on.
func TestSandboxSystemNode(t *testing.T) {
	tailor := testenv.BuildTailor(t)
	dir := filepath.Join(t.TempDir(), "sandbox")
	t.Cleanup(func() { _ = exec.Command(tailor, "sandbox", "down", "--dir", dir).Run() })
	out, err := exec.Command(tailor, "sandbox", "up", "--system-node", "--dir", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("tailor sandbox up --system-node: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "adding the node "+sandbox.SystemNode) {
		t.Errorf("up does not say it adds the system node:\n%s", out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{}
	if err := kube.Get(t.Context(), client.ObjectKey{Name: sandbox.SystemNode}, node); err != nil {
		t.Fatal(err)
	}
	ready := false
	for _, c := range node.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	_, role := node.Labels[sandbox.SystemNodeRole]
	_, pool := node.Labels[v1.NodePoolLabelKey]
	if !ready || !role || pool || len(node.Spec.Taints) > 0 {
		t.Errorf("node %s: conditions %v, labels %v, taints %v; want it Ready, labelled %s, untainted and no NodePool's",
			node.Name, node.Status.Conditions, node.Labels, node.Spec.Taints, sandbox.SystemNodeRole)
	}
	if out, err := exec.Command(tailor, "sandbox", "down", "--dir", dir).CombinedOutput(); err != nil {
		t.Errorf("tailor sandbox down: %v\n%s", err, out)
	}
}
