// Package sandbox tests `tailor sandbox` and the demo as a person runs them: the
// real binary, background processes, and nothing left behind.
package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/operator"
)

func TestSandboxDemo(t *testing.T) {
	tailor := testenv.BuildTailor(t)
	dir := filepath.Join(t.TempDir(), "sandbox")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(tailor, append(args, "--dir", dir)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tailor %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Cleanup(func() { _ = exec.Command(tailor, "sandbox", "down", "--dir", dir).Run() })

	// --dir naming someone else's directory: refused, nothing deleted.
	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tailor, "sandbox", "up", "--dir", foreign).CombinedOutput(); err == nil || !strings.Contains(string(out), "is not a sandbox") {
		t.Errorf("sandbox up --dir on a directory with a file: %v, want a non-zero exit saying it is not a sandbox:\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(foreign, "notes.txt")); err != nil {
		t.Errorf("sandbox up deleted a file it was not given: %v", err)
	}

	up := run("sandbox", "up")
	if !strings.Contains(up, "export KUBECONFIG="+filepath.Join(dir, "kubeconfig")) {
		t.Errorf("sandbox up does not print the kubeconfig:\n%s", up)
	}
	status := run("sandbox", "status")
	for _, c := range []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok", "kwok-resync", "tailor-controller"} {
		if !strings.Contains(status, c) || strings.Contains(status, c+" stopped") {
			t.Errorf("status does not show %s running:\n%s", c, status)
		}
	}
	start := time.Now()
	demo := run("sandbox", "demo")
	t.Logf("demo took %s:\n%s", time.Since(start).Round(time.Second), demo)
	for _, want := range []string{"all 10 pods running", "SUMMARY", "price at peak: $", "all nodes removed after", "price back to $0.0000/hour"} {
		if !strings.Contains(demo, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	run("sandbox", "down")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("sandbox directory %s left behind", dir)
	}
	if left := processesUsing(dir); len(left) > 0 {
		t.Errorf("processes left after sandbox down:\n%s", strings.Join(left, "\n"))
	}
}

func processesUsing(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), dir) {
			continue
		}
		if stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); strings.Contains(string(stat), ") Z ") {
			continue
		}
		found = append(found, e.Name()+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return found
}

// `sandbox up --cloud aws`: the fake AWS runs beside the control plane, the
// default EC2NodeClass resolves against it, a pending pod gets an EC2 instance
// whose kubelet registers the Node it runs on, and down leaves nothing behind.
func TestSandboxOnFakeAWS(t *testing.T) {
	tailor := testenv.BuildTailor(t)
	dir := filepath.Join(t.TempDir(), "sandbox")
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(tailor, append(args, "--dir", dir)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tailor %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Cleanup(func() { _ = exec.Command(tailor, "sandbox", "down", "--dir", dir).Run() })

	if out, err := exec.Command(tailor, "sandbox", "up", "--cloud", "gcp", "--dir", dir).CombinedOutput(); err == nil || !strings.Contains(string(out), `cloud "gcp"`) {
		t.Errorf("sandbox up --cloud gcp: %v, want a non-zero exit naming the cloud:\n%s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("sandbox up --cloud gcp made %s", dir)
	}

	run("sandbox", "up", "--cloud", "aws")
	status := run("sandbox", "status")
	for _, c := range []string{"kwok", "kwok-resync", "fake-aws", "tailor-controller"} {
		if !strings.Contains(status, c) || strings.Contains(status, c+" stopped") {
			t.Errorf("status does not show %s running:\n%s", c, status)
		}
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
	pod := testobj.Pod("web", "1", "1Gi")
	if err := kube.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	last := ""
	err = wait.PollUntilContextTimeout(t.Context(), time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := kube.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("pod %s on %q", pod.Status.Phase, pod.Spec.NodeName)
		return pod.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		nc := &awsv1.EC2NodeClass{}
		_ = kube.Get(t.Context(), client.ObjectKey{Name: "default"}, nc)
		t.Fatalf("the pod does not run: %s; EC2NodeClass default conditions %v", last, nc.Status.Conditions)
	}
	node := &corev1.Node{}
	if err := kube.Get(t.Context(), client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(node.Spec.ProviderID, "aws:///us-east-1") || node.Labels[v1.NodePoolLabelKey] != "default" {
		t.Errorf("node %s (provider ID %q, labels %v) is not an EC2 instance of NodePool default", node.Name, node.Spec.ProviderID, node.Labels)
	}
	claims := &v1.NodeClaimList{}
	if err := kube.List(t.Context(), claims); err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) != 1 || claims.Items[0].Spec.NodeClassRef.Kind != "EC2NodeClass" || claims.Items[0].Status.NodeName != node.Name {
		t.Errorf("want one NodeClaim of the EC2NodeClass for node %s, got %d: %+v", node.Name, len(claims.Items), claims.Items)
	}

	run("sandbox", "down")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("sandbox directory %s left behind", dir)
	}
	if left := processesUsing(dir); len(left) > 0 {
		t.Errorf("processes left after sandbox down:\n%s", strings.Join(left, "\n"))
	}
}
