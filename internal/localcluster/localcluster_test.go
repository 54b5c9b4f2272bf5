package localcluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// The whole control plane: a Deployment's pods stay Pending until a kwok Node
// appears, then the real scheduler binds them and kwok runs them.
func TestFullControlPlaneRunsPodsOnKwokNodes(t *testing.T) {
	cluster, err := Start(t.Context(), Options{Scheduler: true, ControllerManager: true, Kwok: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := cluster.Dir
	defer func() {
		cluster.Stop()
		assertNoProcessUses(t, dir)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("working directory %s left behind", dir)
		}
	}()
	if _, err := os.Stat(cluster.Kubeconfig); err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	kube := kubernetes.NewForConfigOrDie(cluster.Config)
	ctx := t.Context()

	replicas := int32(3)
	labels := map[string]string{"app": "web"}
	deployment := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "nginx",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
				}}},
			},
		},
	}
	// The ServiceAccount controller creates "default" in the namespace shortly after
	// start; until then pod creation is refused and the ReplicaSet controller retries.
	if _, err := kube.AppsV1().Deployments("default").Create(ctx, deployment, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 pods marked unschedulable", func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil || len(pods.Items) != 3 {
			return false, err
		}
		for _, p := range pods.Items {
			if !unschedulable(&p) {
				return false, nil
			}
		}
		return true, nil
	})

	// The cluster starts, as kind's does, with a control-plane node kwok plays,
	// tainted so the pods stay off it.
	waitFor(t, "the control-plane node ready", func(ctx context.Context) (bool, error) {
		cp, err := kube.CoreV1().Nodes().Get(ctx, ControlPlaneNode, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range cp.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return len(cp.Spec.Taints) == 1 && cp.Spec.Taints[0].Key == "node-role.kubernetes.io/control-plane", nil
			}
		}
		return false, nil
	})
	pods, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s landed on %s", p.Name, p.Spec.NodeName)
		}
	}

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "kwok-node-1",
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			Labels:      map[string]string{corev1.LabelHostname: "kwok-node-1"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi"),
			corev1.ResourcePods: resource.MustParse("110")}},
	}
	node.Status.Capacity = node.Status.Allocatable
	if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "3 pods running on kwok-node-1", func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == "kwok-node-1" && p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 3, nil
	})
}

func unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// A component that fails to start is named, with its log, and nothing is left running.
func TestStartReportsTheFailingComponent(t *testing.T) {
	real, err := BinDir()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(filepath.Join(real, "etcd"), filepath.Join(bin, "etcd")); err != nil {
		t.Fatal(err)
	}
	broken := "#!/bin/sh\necho 'E1121 flag provided but not defined: --oops'\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "kube-apiserver"), []byte(broken), 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, err = Start(t.Context(), Options{BinDir: bin, Dir: dir})
	if err == nil {
		t.Fatal("Start succeeded with a broken kube-apiserver")
	}
	for _, want := range []string{"kube-apiserver exited before becoming ready", "flag provided but not defined: --oops", "kube-apiserver.log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	assertNoProcessUses(t, dir)
}

func TestStartWithoutBinaries(t *testing.T) {
	_, err := Start(t.Context(), Options{BinDir: t.TempDir(), Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Fatalf("Start without binaries: got %v, want an error pointing at `make tools`", err)
	}
}

// If the process that started the cluster dies without calling Stop — a panic, a
// SIGKILL — the kernel ends every component with it.
func TestNoProcessOutlivesItsParent(t *testing.T) {
	for _, death := range []string{"panic", "sigkill"} {
		t.Run(death, func(t *testing.T) {
			dir := t.TempDir()
			child := exec.Command(os.Args[0], "-test.run=^TestHelperStartAndDie$", "-test.v")
			child.Env = append(os.Environ(), "LOCALCLUSTER_HELPER_DIR="+dir, "LOCALCLUSTER_HELPER_DEATH="+death)
			out, err := child.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			child.Stderr = os.Stderr
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			started := false
			scanner := bufio.NewScanner(out)
			for scanner.Scan() {
				if strings.HasPrefix(scanner.Text(), "cluster started") {
					started = true
					if death == "sigkill" {
						_ = child.Process.Signal(syscall.SIGKILL)
					}
				}
			}
			_ = child.Wait()
			if !started {
				t.Fatal("the helper never started its cluster")
			}
			if len(processesUsing(dir)) == 0 && !fileExists(filepath.Join(dir, "etcd.log")) {
				t.Fatal("the helper left no trace of its cluster; the test would prove nothing")
			}
			assertNoProcessUses(t, dir)
		})
	}
}

func TestHelperStartAndDie(t *testing.T) {
	dir := os.Getenv("LOCALCLUSTER_HELPER_DIR")
	if dir == "" {
		t.Skip("helper for TestNoProcessOutlivesItsParent")
	}
	cluster, err := Start(context.Background(), Options{Dir: dir, Scheduler: true})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("cluster started: %v\n", cluster.Pids())
	if os.Getenv("LOCALCLUSTER_HELPER_DEATH") == "panic" {
		panic("helper dies without stopping its cluster")
	}
	time.Sleep(time.Minute) // the parent kills us
}

// assertNoProcessUses waits briefly for processes whose command line mentions dir to
// go away, and fails naming any that remain.
func assertNoProcessUses(t *testing.T, dir string) {
	t.Helper()
	var left []string
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		left = processesUsing(dir)
		return len(left) == 0, nil
	})
	if len(left) > 0 {
		for _, p := range left { // do not let one failure leak into the next test
			if pid, err := strconv.Atoi(strings.Fields(p)[0]); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		t.Errorf("processes left running:\n%s", strings.Join(left, "\n"))
	}
}

// processesUsing lists "pid cmdline" of live processes whose command line mentions dir.
func processesUsing(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), dir) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if strings.Contains(string(stat), ") Z ") { // a zombie has already exited
			continue
		}
		found = append(found, e.Name()+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return found
}

func fileExists(path string) bool { _, err := os.Stat(path); return err == nil }

func waitFor(t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last error: %v)", what, err, last)
	}
}
