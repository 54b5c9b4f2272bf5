// Package e2e runs Tailor against the real local control plane: kube-apiserver,
// etcd, kube-scheduler, kube-controller-manager and kwok, with the cloud
// TAILOR_E2E_CLOUD names: sim (the default) or aws (the fake AWS of
// internal/fakeaws, served in this process).
package e2e

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/localcluster"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/operator"
)

var kube client.Client

// controlPlane is the local control plane, for the logs a failing test shows.
var controlPlane *localcluster.Cluster

// metricsURL is where the controller under test serves Prometheus metrics.
var metricsURL string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cluster, k, stop, err := testenv.Start(localcluster.Options{Scheduler: true, ControllerManager: true, Kwok: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	kube, controlPlane = k, cluster
	for _, ds := range testenv.SystemDaemonSets() {
		if err := kube.Create(ctx, ds); err != nil {
			fmt.Fprintln(os.Stderr, "creating DaemonSet", ds.Name, err)
			return 1
		}
	}
	// TAILOR_E2E_LOG keeps the whole controller log; a failing run prints its end.
	logPath := os.Getenv("TAILOR_E2E_LOG")
	if logPath == "" {
		logPath = cluster.Dir + "/tailor.log"
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer logFile.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))
	opts := operator.DefaultOptions()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	metricsAddr := l.Addr().String()
	l.Close()
	metricsURL = "http://" + metricsAddr + "/metrics"
	opts.LeaderElection, opts.MetricsAddr, opts.HealthAddr = false, metricsAddr, "0"
	opts.BatchIdle, opts.BatchMax = time.Second, 10*time.Second
	opts.Disruption.Interval, opts.Disruption.ValidationDelay, opts.Disruption.ReplacementTimeout = time.Second, 2*time.Second, 2*time.Minute
	switch name := cmp.Or(os.Getenv("TAILOR_E2E_CLOUD"), "sim"); name {
	case "sim":
		provider = simCloud{}
	case "aws":
		a, stopAWS, err := startAWS(ctx, cluster.Config, &opts)
		if err != nil {
			fmt.Fprintln(os.Stderr, "starting the fake AWS:", err)
			return 1
		}
		defer stopAWS()
		provider = a
	default:
		fmt.Fprintf(os.Stderr, "TAILOR_E2E_CLOUD=%s: want sim or aws\n", name)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- operator.Run(ctx, cluster.Config, opts) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintln(os.Stderr, "set TAILOR_E2E_LOG=file to keep the whole controller log")
		if data, err := os.ReadFile(logFile.Name()); err == nil {
			tail := data
			if len(tail) > 8000 {
				tail = tail[len(tail)-8000:]
			}
			fmt.Fprintf(os.Stderr, "--- end of the controller log ---\n%s\n", tail)
		}
	}
	return code
}

func metaName(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

// nodePool is a NodePool of the cloud's NodeClass nodeClass. Tests of provisioning
// keep their nodes; the disruption tests say otherwise.
func nodePool(name, nodeClass string, opts ...testobj.NodePoolOption) *v1.NodePool {
	base := []testobj.NodePoolOption{testobj.NodeClassRef(nodeClassRef(nodeClass)), testobj.ConsolidateAfter("Never")}
	return testobj.NodePool(name, append(base, opts...)...)
}

// onPool runs a Deployment's pods only on nodes labelled pool=name.
func onPool(name string) testobj.DeploymentOption {
	return testobj.Template(testobj.NodeSelector("pool", name))
}
