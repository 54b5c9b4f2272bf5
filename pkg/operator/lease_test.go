package operator

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodetailor/tailor/internal/testenv"
)

// Without --leader-election-namespace the Lease lives in the controller's own
// namespace, which Karpenter's chart passes as SYSTEM_NAMESPACE; the name comes
// from LEADER_ELECTION_NAME. Stopped, the controller releases it.
func TestLeaseInOwnNamespace(t *testing.T) {
	tailor := testenv.BuildTailor(t)
	ns := newNamespace(t)
	logPath := filepath.Join(t.TempDir(), "tailor.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	cmd := exec.Command(tailor, "controller", "--kubeconfig", env.cluster.Kubeconfig)
	cmd.Env = append(os.Environ(), "SYSTEM_NAMESPACE="+ns, "LEADER_ELECTION_NAME=tailor-test",
		"METRICS_PORT=0", "HEALTH_PROBE_PORT=0", "LOG_LEVEL=debug")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: ns, Name: "tailor-test"}
	holder := func() string {
		if env.kube.Get(t.Context(), key, lease) != nil || lease.Spec.HolderIdentity == nil {
			return ""
		}
		return *lease.Spec.HolderIdentity
	}
	eventually(t, time.Minute, func() (bool, string) {
		return holder() != "", "no Lease " + key.String() + " held; the controller's log:\n" + tail(logPath)
	})
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the stopped controller exited with %v; its log:\n%s", err, tail(logPath))
	}
	if h := holder(); h != "" {
		t.Errorf("the stopped controller did not release the Lease: held by %s", h)
	}
}
