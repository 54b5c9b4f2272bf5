// Package testenv gives tests a real API server with Tailor's CRDs, and a built
// tailor binary, so every test package sets them up the same way.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodetailor/tailor/config/crd"
	"github.com/nodetailor/tailor/internal/kubescheme"
	"github.com/nodetailor/tailor/internal/localcluster"
)

// Start brings up a local control plane with the given components, installs the
// CRDs, and returns it with a client that knows Tailor's kinds. Call the returned
// stop when done (in TestMain, after m.Run).
func Start(opts localcluster.Options) (*localcluster.Cluster, client.Client, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cluster, err := localcluster.Start(ctx, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := crd.Install(ctx, cluster.Config); err != nil {
		cluster.Stop()
		return nil, nil, nil, err
	}
	scheme, err := kubescheme.New()
	if err != nil {
		cluster.Stop()
		return nil, nil, nil, err
	}
	kube, err := client.New(cluster.Config, client.Options{Scheme: scheme})
	if err != nil {
		cluster.Stop()
		return nil, nil, nil, err
	}
	return cluster, kube, cluster.Stop, nil
}

// BuildTailor builds the tailor binary into a test's temporary directory.
func BuildTailor(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tailor")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/nodetailor/tailor/cmd/tailor").CombinedOutput(); err != nil {
		t.Fatalf("building tailor: %v\n%s", err, out)
	}
	return bin
}

// RunWithAPIServer is a package's TestMain when its tests share one API server (no
// scheduler, controller-manager or kwok): it starts one, sets *kube to a client of
// it, runs the tests and stops it, and returns the exit code.
func RunWithAPIServer(m *testing.M, kube *client.Client) int {
	return RunWithKubeconfig(m, kube, new(string))
}

// RunWithKubeconfig is RunWithAPIServer that also sets *kubeconfig to the path of
// the server's admin kubeconfig, for tests that run tailor's commands against it.
func RunWithKubeconfig(m *testing.M, kube *client.Client, kubeconfig *string) int {
	cluster, k, stop, err := Start(localcluster.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	*kube, *kubeconfig = k, cluster.Kubeconfig
	return m.Run()
}
