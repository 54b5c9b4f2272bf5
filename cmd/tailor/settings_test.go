package main

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodetailor/tailor/pkg/operator"
)

// fakeEnv is an environment of the given variables and no files.
func fakeEnv(vars map[string]string) environment {
	return environment{
		lookup:   func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		readFile: func(string) ([]byte, error) { return nil, fs.ErrNotExist },
	}
}

// Every setting reads Karpenter's variable for it; the command line wins over the
// variable, the variable over the default.
func TestControllerEnv(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		ok   func(operator.Options) bool
	}{
		{"default", nil, nil, func(o operator.Options) bool { return o.BatchIdle == time.Second }},
		{"variable over default", nil, map[string]string{"BATCH_IDLE_DURATION": "3s"},
			func(o operator.Options) bool { return o.BatchIdle == 3*time.Second }},
		{"flag over variable", []string{"--batch-idle-duration", "2s"}, map[string]string{"BATCH_IDLE_DURATION": "3s"},
			func(o operator.Options) bool { return o.BatchIdle == 2*time.Second }},
		{"an empty variable is unset", nil, map[string]string{"BATCH_MAX_DURATION": ""},
			func(o operator.Options) bool { return o.BatchMax == 10*time.Second }},
		{"BATCH_MAX_DURATION", nil, map[string]string{"BATCH_MAX_DURATION": "30s"},
			func(o operator.Options) bool { return o.BatchMax == 30*time.Second }},
		{"KUBE_CLIENT_QPS and KUBE_CLIENT_BURST", nil, map[string]string{"KUBE_CLIENT_QPS": "50", "KUBE_CLIENT_BURST": "75"},
			func(o operator.Options) bool { return o.KubeClientQPS == 50 && o.KubeClientBurst == 75 }},
		{"LOG_LEVEL", nil, map[string]string{"LOG_LEVEL": "debug"},
			func(o operator.Options) bool { return o.LogLevel == "debug" }},
		{"--log-level over LOG_LEVEL", []string{"--log-level", "error"}, map[string]string{"LOG_LEVEL": "debug"},
			func(o operator.Options) bool { return o.LogLevel == "error" }},
		{"FEATURE_GATES keeps the other defaults", nil, map[string]string{"FEATURE_GATES": "SpotToSpotConsolidation=true"},
			func(o operator.Options) bool {
				g := o.FeatureGates
				return g.SpotToSpotConsolidation && g.ReservedCapacity && !g.NodeRepair
			}},
		{"--feature-gates replaces FEATURE_GATES", []string{"--feature-gates", "NodeRepair=true"}, map[string]string{"FEATURE_GATES": "SpotToSpotConsolidation=true"},
			func(o operator.Options) bool {
				return o.FeatureGates.NodeRepair && !o.FeatureGates.SpotToSpotConsolidation
			}},
		{"the aws settings", nil, map[string]string{"CLOUD_PROVIDER": "aws", "CLUSTER_NAME": "demo", "CLUSTER_ENDPOINT": "https://demo.example",
			"CLUSTER_CA_BUNDLE": "Q0E=", "VM_MEMORY_OVERHEAD_PERCENT": "0.05"},
			func(o operator.Options) bool {
				a := o.AWS
				return o.CloudProvider == "aws" && a.ClusterName == "demo" && a.ClusterEndpoint == "https://demo.example" &&
					a.ClusterCABundle == "Q0E=" && a.VMMemoryOverheadPercent == 0.05
			}},
		{"MEMORY_LIMIT", nil, map[string]string{"MEMORY_LIMIT": "1073741824"},
			func(o operator.Options) bool { return o.MemoryLimit == 1<<30 }},
		{"METRICS_PORT and HEALTH_PROBE_PORT", nil, map[string]string{"METRICS_PORT": "9090", "HEALTH_PROBE_PORT": "0"},
			func(o operator.Options) bool { return o.MetricsAddr == ":9090" && o.HealthAddr == "0" }},
		{"--metrics-bind-address over METRICS_PORT", []string{"--metrics-bind-address", "127.0.0.1:1"}, map[string]string{"METRICS_PORT": "9090"},
			func(o operator.Options) bool { return o.MetricsAddr == "127.0.0.1:1" }},
		{"DISABLE_LEADER_ELECTION", nil, map[string]string{"DISABLE_LEADER_ELECTION": "true"},
			func(o operator.Options) bool { return !o.LeaderElection }},
		{"--leader-elect over DISABLE_LEADER_ELECTION", []string{"--leader-elect"}, map[string]string{"DISABLE_LEADER_ELECTION": "true"},
			func(o operator.Options) bool { return o.LeaderElection }},
		{"--disable-leader-election", []string{"--disable-leader-election"}, nil,
			func(o operator.Options) bool { return !o.LeaderElection }},
		{"LEADER_ELECTION_NAMESPACE and LEADER_ELECTION_NAME", nil,
			map[string]string{"LEADER_ELECTION_NAMESPACE": "ops", "LEADER_ELECTION_NAME": "lease", "SYSTEM_NAMESPACE": "karpenter"},
			func(o operator.Options) bool {
				return o.LeaderElectionNamespace == "ops" && o.LeaderElectionID == "lease"
			}},
		{"the Lease in the controller's own namespace", nil, map[string]string{"SYSTEM_NAMESPACE": "karpenter"},
			func(o operator.Options) bool {
				return o.LeaderElectionNamespace == "karpenter" && o.LeaderElectionID == operator.DefaultLeaderElectionID
			}},
		{"the Lease in kube-system out of a cluster", nil, nil,
			func(o operator.Options) bool { return o.LeaderElectionNamespace == "kube-system" }},
		{"tailor's own settings", nil, map[string]string{"DISRUPTION_INTERVAL": "1m", "CONSOLIDATION_MIN_SAVINGS": "0.2"},
			func(o operator.Options) bool {
				return o.Disruption.Interval == time.Minute && o.Disruption.MinSavings == 0.2
			}},
		{"KUBECONFIG is client-go's", nil, map[string]string{"KUBECONFIG": "/a:/b"},
			func(o operator.Options) bool { return o.Kubeconfig == "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts, err := parseControllerEnv(tt.args, fakeEnv(tt.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.ok(opts) {
				t.Errorf("args %q, environment %v: options %+v", tt.args, tt.env, opts)
			}
		})
	}
}

// A bad value is an error naming the variable, and every bad one is reported.
func TestControllerEnvErrors(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want []string
	}{
		{map[string]string{"KUBE_CLIENT_QPS": "lots"}, []string{"KUBE_CLIENT_QPS"}},
		{map[string]string{"KUBE_CLIENT_BURST": "1.5"}, []string{"KUBE_CLIENT_BURST"}},
		{map[string]string{"BATCH_IDLE_DURATION": "soon"}, []string{"BATCH_IDLE_DURATION"}},
		{map[string]string{"LOG_LEVEL": "verbose"}, []string{"LOG_LEVEL", `log level "verbose"`}},
		{map[string]string{"FEATURE_GATES": "Drift=true"}, []string{"FEATURE_GATES", `unknown feature gate "Drift"`}},
		{map[string]string{"METRICS_PORT": "http"}, []string{"METRICS_PORT", "port number"}},
		{map[string]string{"DISABLE_LEADER_ELECTION": "maybe"}, []string{"DISABLE_LEADER_ELECTION"}},
		{map[string]string{"MEMORY_LIMIT": "1Gi", "VM_MEMORY_OVERHEAD_PERCENT": "high"}, []string{"MEMORY_LIMIT", "VM_MEMORY_OVERHEAD_PERCENT"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.want, " "), func(t *testing.T) {
			_, err := parseControllerEnv(nil, fakeEnv(tt.env), io.Discard)
			if err == nil {
				t.Fatalf("environment %v: no error", tt.env)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
	// A flag given on the command line is not read from the environment, bad or not.
	if _, err := parseControllerEnv([]string{"--kube-client-qps", "10"}, fakeEnv(map[string]string{"KUBE_CLIENT_QPS": "lots"}), io.Discard); err != nil {
		t.Errorf("a bad variable of a flag given: %v", err)
	}
	// A bad flag is still a flag error.
	if _, err := parseControllerEnv([]string{"--log-level", "loud"}, fakeEnv(nil), io.Discard); err == nil {
		t.Error("--log-level loud: no error")
	}
}

// The variables of Karpenter's settings reference that Tailor has a flag for.
func TestKarpenterVariables(t *testing.T) {
	fs, help := controllerHelp(t)
	byName := map[string]string{}
	for _, e := range flagEnv(fs) {
		if e.name != "" {
			byName[e.name] = e.flag
		}
	}
	for env, flagName := range map[string]string{
		"BATCH_IDLE_DURATION": "batch-idle-duration", "BATCH_MAX_DURATION": "batch-max-duration",
		"KUBE_CLIENT_QPS": "kube-client-qps", "KUBE_CLIENT_BURST": "kube-client-burst",
		"LOG_LEVEL": "log-level", "FEATURE_GATES": "feature-gates", "MEMORY_LIMIT": "memory-limit",
		"METRICS_PORT": "metrics-bind-address", "HEALTH_PROBE_PORT": "health-probe-bind-address",
		"DISABLE_LEADER_ELECTION": "disable-leader-election", "LEADER_ELECTION_NAMESPACE": "leader-election-namespace",
		"LEADER_ELECTION_NAME": "leader-election-name", "CLUSTER_NAME": "cluster-name", "CLUSTER_ENDPOINT": "cluster-endpoint",
		"CLUSTER_CA_BUNDLE": "cluster-ca-bundle", "VM_MEMORY_OVERHEAD_PERCENT": "vm-memory-overhead-percent",
	} {
		if got := byName[env]; got != flagName {
			t.Errorf("%s sets --%s, want --%s", env, got, flagName)
		}
		if !strings.Contains(help, "[$"+env+"]") {
			t.Errorf("--help does not name %s", env)
		}
	}
	// INTERRUPTION_QUEUE and the like follow the rule once their flags exist.
	if got := envName("interruption-queue"); got != "INTERRUPTION_QUEUE" {
		t.Errorf("envName(interruption-queue) = %s", got)
	}
}

// docs/settings.md lists every flag and its variable.
func TestSettingsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/settings.md")
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := controllerHelp(t)
	for _, e := range flagEnv(fs) {
		if !bytes.Contains(doc, []byte("`--"+e.flag+"`")) {
			t.Errorf("docs/settings.md does not list --%s", e.flag)
		}
		if e.name != "" && !bytes.Contains(doc, []byte("`"+e.name+"`")) {
			t.Errorf("docs/settings.md does not list %s (--%s)", e.name, e.flag)
		}
	}
	for _, gate := range operator.FeatureGateNames() {
		if !bytes.Contains(doc, []byte("`"+gate+"`")) {
			t.Errorf("docs/settings.md does not list the feature gate %s", gate)
		}
	}
}

// controllerHelp is the controller's flag set, as `tailor controller --help` lists
// it on stdout, and the help text.
func controllerHelp(t *testing.T) (*pflag.FlagSet, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run([]string{"controller", "--help"}, &out, &errOut); code != 0 || errOut.Len() > 0 {
		t.Fatalf("--help: exit code %d, stderr %q", code, errOut.String())
	}
	fs := pflag.NewFlagSet("help", pflag.ContinueOnError)
	// pflag's format: "  -h, --help" or "      --batch-idle-duration duration".
	for _, m := range regexp.MustCompile(`(?m)^  (?:-\S, |    )--([a-z0-9-]+)`).FindAllStringSubmatch(out.String(), -1) {
		if m[1] != "help" {
			fs.String(m[1], "", "")
		}
	}
	if fs.NFlag() != 0 || fs.Lookup("batch-idle-duration") == nil || fs.Lookup("disable-leader-election") == nil {
		t.Fatalf("no flags read from --help:\n%s", out.String())
	}
	return fs, out.String()
}

func TestSoftMemoryLimit(t *testing.T) {
	for _, tt := range []struct{ limit, want int64 }{{1000, 900}, {1 << 30, 966367638}} {
		if got := softMemoryLimit(tt.limit); got != tt.want {
			t.Errorf("softMemoryLimit(%d) = %d, want %d", tt.limit, got, tt.want)
		}
	}
}
