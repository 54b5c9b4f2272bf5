package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodetailor/tailor/pkg/scheduling"
)

// The flags parse once into Options, with the defaults the README lists.
func TestParseController(t *testing.T) {
	opts, err := parseController(nil, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.CloudProvider != "sim" || opts.BatchIdle != time.Second || opts.BatchMax != 10*time.Second || !opts.LeaderElection ||
		opts.MetricsAddr != ":8080" || opts.HealthAddr != ":8081" || opts.KubeClientQPS != 200 || opts.KubeClientBurst != 400 {
		t.Errorf("defaults %+v", opts)
	}
	opts, err = parseController([]string{"--kubeconfig", "/k", "--batch-idle-duration", "2s", "--batch-max-duration", "20s",
		"--leader-elect=false", "--metrics-bind-address", "0", "--kube-client-qps", "50"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Kubeconfig != "/k" || opts.BatchIdle != 2*time.Second || opts.BatchMax != 20*time.Second || opts.LeaderElection ||
		opts.MetricsAddr != "0" || opts.KubeClientQPS != 50 {
		t.Errorf("parsed %+v", opts)
	}
	for _, bad := range [][]string{{"--kube-client-qps", "0"}, {"--batch-idle-duration", "soon"}, {"--no-such-flag"}} {
		if _, err := parseController(bad, io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// The aws provider's flags, with the region from AWS_REGION unless given.
func TestParseControllerAWS(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-west-1")
	opts, err := parseController([]string{"--cloud-provider", "aws", "--cluster-name", "demo",
		"--cluster-endpoint", "https://demo.example", "--cluster-ca-bundle", "Q0E="}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	a := opts.AWS
	if opts.CloudProvider != "aws" || a.ClusterName != "demo" || a.ClusterEndpoint != "https://demo.example" ||
		a.ClusterCABundle != "Q0E=" || a.Region != "eu-west-1" || a.VMMemoryOverheadPercent != 0.075 {
		t.Errorf("parsed %+v", opts)
	}
	opts, err = parseController([]string{"--aws-region", "us-west-2", "--vm-memory-overhead-percent", "0.05"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.AWS.Region != "us-west-2" || opts.AWS.VMMemoryOverheadPercent != 0.05 {
		t.Errorf("parsed %+v", opts.AWS)
	}
}

// The engine's policies come from flags or from Karpenter's variables.
func TestControllerSchedulingPolicies(t *testing.T) {
	noFile := func(string) ([]byte, error) { return nil, os.ErrNotExist }
	opts, err := parseControllerEnv([]string{"--preference-policy", "Ignore"}, environment{lookup: func(name string) (string, bool) {
		v, ok := map[string]string{"MIN_VALUES_POLICY": "BestEffort"}[name]
		return v, ok
	}, readFile: noFile}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Scheduling.PreferencePolicy != scheduling.PreferencePolicyIgnore || opts.Scheduling.MinValuesPolicy != scheduling.MinValuesPolicyBestEffort {
		t.Errorf("scheduling options %+v, want Ignore (flag) and BestEffort (MIN_VALUES_POLICY)", opts.Scheduling)
	}
	if _, err := parseControllerEnv([]string{"--min-values-policy", "Loose"}, environment{lookup: func(string) (string, bool) { return "", false }, readFile: noFile}, io.Discard); err == nil {
		t.Error("--min-values-policy Loose was accepted")
	}
}

// With no cluster anywhere, `tailor controller` says where it looked, not
// client-go's hint to set KUBERNETES_MASTER.
func TestControllerWithoutAKubeconfig(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("GOGC", "100") // runController tunes the collector unless GOGC is set
	code, stdout, stderr := runIn(t, "", "controller")
	want := []string{"tailor controller: no cluster to connect to. Looked at --kubeconfig: not given; $KUBECONFIG: not set; in-cluster: not in a pod",
		"~/.kube/config: " + filepath.Join(home, ".kube", "config") + " does not exist", "Pass --kubeconfig FILE or set KUBECONFIG"}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q does not say %q", stderr, w)
		}
	}
	if code != exitFailed || stdout != "" || strings.Contains(stderr, "KUBERNETES_MASTER") {
		t.Errorf("exit code %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, _, stderr = runIn(t, "", "controller", "--kubeconfig", filepath.Join(home, "nope"))
	if code != exitFailed || !strings.Contains(stderr, "--kubeconfig "+filepath.Join(home, "nope")+": no such file") {
		t.Errorf("a missing --kubeconfig: exit code %d, stderr %q", code, stderr)
	}
}
