package operator

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodetailor/tailor/internal/testenv"
)

// In a rollout the old controller is stopped while the new one waits for the
// lease. The old one must hand the lease over as it stops: the new one then holds
// it before the old lease could have expired, instead of waiting out
// LeaseDuration with no controller at all. The controllers run as the binary
// does, one process each.
func TestStoppedLeaderHandsOverTheLease(t *testing.T) {
	tailor := testenv.BuildTailor(t)
	ns := newNamespace(t)
	start := func(name string) (*exec.Cmd, string) {
		logPath := filepath.Join(t.TempDir(), name+".log")
		log, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { log.Close() })
		cmd := exec.Command(tailor, "controller", "--kubeconfig", env.cluster.Kubeconfig,
			"--leader-elect", "--leader-election-namespace", ns,
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		})
		return cmd, logPath
	}
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: ns, Name: "tailor-controller"}
	holder := func() string {
		if env.kube.Get(t.Context(), key, lease) != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}

	old, oldLog := start("old")
	eventually(t, time.Minute, func() (bool, string) {
		return holder() != "", "the first controller does not hold the lease; its log:\n" + tail(oldLog)
	})
	oldID := holder()
	_, newLog := start("new")
	eventually(t, time.Minute, func() (bool, string) {
		b, _ := os.ReadFile(newLog)
		return strings.Contains(string(b), "attempting to acquire leader lease"), "the second controller is not waiting for the lease; its log:\n" + tail(newLog)
	})

	// The old lease expires LeaseDuration after its holder's last renewal: follow
	// the renewals up to the hand-over.
	var expires time.Time
	renewed := func() {
		expires = lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	}
	if holder() != oldID {
		t.Fatalf("the lease moved from %s before the first controller stopped", oldID)
	}
	renewed()
	if err := old.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	newID := ""
	eventually(t, time.Minute, func() (bool, string) {
		switch h := holder(); h {
		case oldID:
			renewed()
		case "":
		default:
			newID = h
			return true, ""
		}
		return false, "the second controller did not take the lease; its log:\n" + tail(newLog)
	})
	acquired := lease.Spec.AcquireTime.Time
	t.Logf("%s took the lease %s before the old one would have expired", newID, expires.Sub(acquired))
	if !acquired.Before(expires) {
		t.Errorf("%s took the lease from %s at %s, %s after the old lease expired: the old leader did not step down",
			newID, oldID, acquired.Format(time.RFC3339Nano), acquired.Sub(expires))
	}
	if err := old.Wait(); err != nil {
		t.Errorf("the stopped controller exited with %v, want a clean exit; its log:\n%s", err, tail(oldLog))
	}
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprint(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}
