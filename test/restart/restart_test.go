// Package restart kills the controller in the middle of provisioning and checks
// that a new one finishes the job with no duplicate node and no leaked instance.
package restart

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/internal/localcluster"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/internal/testobj"
)

func TestKillMidProvisioning(t *testing.T) {
	tmp := t.TempDir()
	tailor := testenv.BuildTailor(t)
	ctx := t.Context()
	cluster, kube, stop, err := testenv.Start(localcluster.Options{Scheduler: true, ControllerManager: true, Kwok: true})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// Slow launches, so the controller dies with some in flight.
	nc := &v1alpha1.SimNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "slow"},
		Spec: v1alpha1.SimNodeClassSpec{LaunchDelay: metav1.Duration{Duration: 2 * time.Second}}}
	// Small types only, so the pods need several nodes.
	np := testobj.NodePool("default", testobj.NodeClassRef(testobj.SimClass("slow")),
		testobj.Requirement("karpenter.k8s.aws/instance-cpu", v1.NodeSelectorOpLte, "2"))
	d := testobj.Deployment("web", 6, "1", "1Gi")
	objs := []client.Object{nc, np, d}
	for _, ds := range testenv.SystemDaemonSets() {
		objs = append(objs, ds)
	}
	for _, o := range objs {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	start := func(name string) *exec.Cmd {
		log, err := os.Create(filepath.Join(tmp, name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(tailor, "controller", "--kubeconfig", cluster.Kubeconfig, "--leader-elect=false",
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	first := start("first")
	// Kill it once claims exist but before their launches finished.
	poll(t, time.Minute, "NodeClaims created", func(ctx context.Context) (bool, string) {
		claims := &v1.NodeClaimList{}
		if err := kube.List(ctx, claims); err != nil {
			return false, err.Error()
		}
		return len(claims.Items) > 0, fmt.Sprintf("%d claims", len(claims.Items))
	})
	_ = first.Process.Signal(syscall.SIGKILL)
	_ = first.Wait()

	second := start("second")
	defer func() { _ = second.Process.Signal(syscall.SIGTERM); _ = second.Wait() }()
	poll(t, 3*time.Minute, "all pods running", func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := kube.List(ctx, pods, client.MatchingLabels{"app": "web"}); err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 6, fmt.Sprintf("%d of 6 running", running)
	})
	// One instance per claim, one claim per instance, right away: not only once
	// garbage collection (30 s grace) has had a chance to clean up. And no claim
	// twice: the pods need six nodes (a 2-vCPU type holds one pod of 1 cpu), and
	// the second controller makes only those the first did not.
	poll(t, 5*time.Second, "six claims, instances and nodes, matching", func(ctx context.Context) (bool, string) {
		claims := &v1.NodeClaimList{}
		instances := &v1alpha1.SimInstanceList{}
		if err := kube.List(ctx, claims); err != nil {
			return false, err.Error()
		}
		if err := kube.List(ctx, instances); err != nil {
			return false, err.Error()
		}
		perClaim := map[string]int{}
		for _, inst := range instances.Items {
			perClaim[inst.Spec.NodeClaim]++
		}
		for _, c := range claims.Items {
			if perClaim[c.Name] != 1 {
				return false, fmt.Sprintf("claim %s has %d instances", c.Name, perClaim[c.Name])
			}
			delete(perClaim, c.Name)
		}
		if len(perClaim) > 0 {
			return false, fmt.Sprintf("instances without a claim: %v", perClaim)
		}
		nodes := &corev1.NodeList{}
		if err := kube.List(ctx, nodes, client.HasLabels{v1.NodePoolLabelKey}); err != nil {
			return false, err.Error()
		}
		if len(claims.Items) != 6 || len(nodes.Items) != 6 {
			return false, fmt.Sprintf("%d claims and %d nodes, want 6 of each", len(claims.Items), len(nodes.Items))
		}
		return true, ""
	})
}

func poll(t *testing.T, timeout time.Duration, what string, cond func(context.Context) (bool, string)) {
	t.Helper()
	last := ""
	if err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, s := cond(ctx)
		last = s
		return ok, nil
	}); err != nil {
		t.Fatalf("%s: not within %s (%s)", what, timeout, last)
	}
}
