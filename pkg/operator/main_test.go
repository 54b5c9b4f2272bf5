package operator

import (
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodetailor/tailor/internal/localcluster"
	"github.com/nodetailor/tailor/internal/testenv"
)

// env is the package's API server (etcd and kube-apiserver, with the CRDs),
// started once in TestMain.
var env struct {
	cluster *localcluster.Cluster
	kube    client.Client
	// logPath is the file the controllers of the tests log to.
	logPath string
}

func TestMain(m *testing.M) {
	cluster, kube, stop, err := testenv.Start(localcluster.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the API server:", err)
		os.Exit(1)
	}
	env.cluster, env.kube = cluster, kube
	// The controllers the tests run log to a file, which a failing AWS test
	// shows the end of (see runAWSController).
	if f, err := os.CreateTemp("", "tailor-operator-test-*.log"); err == nil {
		env.logPath = f.Name()
		logger, _ := NewLogger(f, "debug")
		ctrl.SetLogger(logger)
	}
	code := m.Run()
	if env.logPath != "" {
		_ = os.Remove(env.logPath)
	}
	stop()
	os.Exit(code)
}

// newNamespace gives a test a namespace of its own.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "operator-"}}
	if err := env.kube.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// eventually polls cond until it holds, failing the test with cond's last word
// after timeout.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
