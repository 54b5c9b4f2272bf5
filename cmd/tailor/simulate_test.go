package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/simulate"
)

// The input bounds are flags with the defaults Load documents; nonsense values are
// refused before anything is read.
func TestParseSimulateLimits(t *testing.T) {
	opts, err := parseSimulate([]string{"-f", "x.yaml"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.limits != (simulate.Limits{MaxBytes: simulate.DefaultMaxBytes, MaxPods: simulate.DefaultMaxPods}) {
		t.Errorf("default limits %+v", opts.limits)
	}
	opts, err = parseSimulate([]string{"-f", "x.yaml", "--max-input-size", "1Gi", "--max-pods", "500"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.limits != (simulate.Limits{MaxBytes: 1 << 30, MaxPods: 500}) {
		t.Errorf("parsed limits %+v", opts.limits)
	}
	for _, bad := range [][]string{{"--max-input-size", "lots"}, {"--max-input-size", "0"}, {"--max-input-size", "-1Mi"}, {"--max-pods", "0"}, {"--max-pods", "-3"}} {
		if _, err := parseSimulate(append([]string{"-f", "x.yaml"}, bad...), io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// A bound met while loading fails the command with the loader's message.
func TestSimulatePodBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "web.yaml")
	manifest := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 20, template: {spec: {containers: [{name: c, image: x}]}}}\n"
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"simulate", "-f", path, "--max-pods", "10"}, &stdout, &stderr); code != 1 {
		t.Errorf("exit code %d, want 1; stderr %q", code, stderr.String())
	}
	if want := "Deployment web: spec.replicas 20 would make the input hold more than 10 pods"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q does not say %q", stderr.String(), want)
	}
}

func TestParseNodeOverhead(t *testing.T) {
	opts, err := parseSimulate([]string{"-f", "x.yaml"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(allocatable.Model(allocatable.DefaultEKS()), opts.nodeOverhead); diff != "" {
		t.Errorf("default --node-overhead, want the EKS model's defaults (-want +got):\n%s", diff)
	}
	if opts, err = parseSimulate([]string{"-f", "x.yaml", "--node-overhead", "kwok"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, ok := opts.nodeOverhead.(allocatable.Kwok); !ok {
		t.Errorf("--node-overhead kwok gives %#v", opts.nodeOverhead)
	}
	if _, err := parseSimulate([]string{"-f", "x.yaml", "--node-overhead", "gke"}, io.Discard); err == nil || !strings.Contains(err.Error(), `--node-overhead "gke": want eks or kwok`) {
		t.Errorf("--node-overhead gke: %v", err)
	}
}

// A t3a.nano keeps 74Mi for pods as an EKS node, 502Mi under kwok's flat overhead:
// a pod of 256M fits only the latter.
func TestSimulateNodeOverhead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nano.yaml")
	manifest := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: nano}
spec:
  template:
    spec:
      nodeClassRef: {group: tailor.sh, kind: SimNodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [t3a.nano]}
---
apiVersion: v1
kind: Pod
metadata: {name: small, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 100m, memory: 256M}}}]
`
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	for overhead, want := range map[string]string{
		"eks":  `"scheduled":0,"unschedulable":1`,
		"kwok": `"scheduled":1,"unschedulable":0`,
	} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{"simulate", "-f", path, "--output", "json", "--node-overhead", overhead}, &stdout, &stderr); code != 0 {
			t.Fatalf("--node-overhead %s: exit code %d; stderr %q", overhead, code, stderr.String())
		}
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("--node-overhead %s: output %q lacks %s", overhead, stdout.String(), want)
		}
	}
}

func TestParseSchedulingPolicies(t *testing.T) {
	opts, err := parseSimulate([]string{"-f", "x.yaml"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.scheduling.PreferencePolicy != scheduling.PreferencePolicyRespect || opts.scheduling.MinValuesPolicy != scheduling.MinValuesPolicyStrict {
		t.Errorf("defaults %+v, want Respect and Strict", opts.scheduling)
	}
	opts, err = parseSimulate([]string{"-f", "x.yaml", "--preference-policy", "Ignore", "--min-values-policy", "BestEffort"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.scheduling.PreferencePolicy != scheduling.PreferencePolicyIgnore || opts.scheduling.MinValuesPolicy != scheduling.MinValuesPolicyBestEffort {
		t.Errorf("parsed %+v, want Ignore and BestEffort", opts.scheduling)
	}
	for flag, want := range map[string]string{"--preference-policy": "want Respect or Ignore", "--min-values-policy": "want Strict or BestEffort"} {
		if _, err := parseSimulate([]string{"-f", "x.yaml", flag, "sometimes"}, io.Discard); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s sometimes: %v, want an error saying %q", flag, err, want)
		}
	}
}
