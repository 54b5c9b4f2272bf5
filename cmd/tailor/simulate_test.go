package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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

// scaledExample writes Karpenter's example workload name (examples/aws-karpenter/
// workloads, as published) into dir with its replicas: 0 raised to replicas, as a
// user scales it, and returns the copy's path.
func scaledExample(t *testing.T, dir, name string, replicas int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "aws-karpenter", "workloads", name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte("replicas: 0\n")) {
		t.Fatalf("%s no longer has replicas: 0", name)
	}
	data = bytes.Replace(data, []byte("replicas: 0\n"), fmt.Appendf(nil, "replicas: %d\n", replicas), 1)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// planLines splits -o json output into its objects by key ("new_node", …).
func planLines(t *testing.T, out string) map[string][]json.RawMessage {
	t.Helper()
	lines := map[string][]json.RawMessage{}
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &obj); err != nil {
			t.Fatalf("line %q is not JSON: %v", line, err)
		}
		if i == 0 {
			lines["summary"] = append(lines["summary"], json.RawMessage(line))
			continue
		}
		for k, v := range obj {
			lines[k] = append(lines[k], v)
		}
	}
	return lines
}

// Karpenter's accelerator examples get nodes with their devices, once scaled up
// from the replicas: 0 they ship with: gpu-amd on g4ad (amd.com/gpu), neuron on
// Inferentia or Trainium (aws.amazon.com/neuron), gpu-nvidia on NVIDIA types. The
// NodePool is Karpenter's general purpose one opened to those families.
// gpu-amd.yaml and gpu-nvidia.yaml misspell allowPrivilegeEscalation, which kubectl
// apply refuses by default, so they are read with --validate=warn.
func TestSimulateKarpenterAcceleratorExamples(t *testing.T) {
	dir := t.TempDir()
	pool := filepath.Join("testdata", "simulate", "accelerators-nodepool.yaml")
	for _, tc := range []struct {
		file     string
		resource string
		families []string
	}{
		{"gpu-amd.yaml", "amd.com/gpu", []string{"g4ad"}},
		{"neuron.yaml", "aws.amazon.com/neuron", []string{"inf1", "inf2", "trn1", "trn1n"}},
		{"gpu-nvidia.yaml", "nvidia.com/gpu", []string{"g3", "g3s", "g4dn", "g5", "g6", "g6e", "g7", "g7e", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			workload := scaledExample(t, dir, tc.file, 3)
			var stdout, stderr bytes.Buffer
			if code := run([]string{"simulate", "-f", pool, "-f", workload, "--validate", "warn", "-o", "json"}, &stdout, &stderr); code != 0 {
				t.Fatalf("exit code %d; stderr %q", code, stderr.String())
			}
			lines := planLines(t, stdout.String())
			if len(lines["unschedulable"]) != 0 || len(lines["refused"]) != 0 {
				t.Errorf("unschedulable %s, refused %s", lines["unschedulable"], lines["refused"])
			}
			placed := 0
			for _, raw := range lines["new_node"] {
				var n simulate.NodeView
				if err := json.Unmarshal(raw, &n); err != nil {
					t.Fatal(err)
				}
				family, _, _ := strings.Cut(n.InstanceType, ".")
				if !slices.Contains(tc.families, family) {
					t.Errorf("node %s is %s; want one of the families %v", n.Name, n.InstanceType, tc.families)
				}
				if got, want := n.Requests[tc.resource], strconv.Itoa(len(n.Pods)); got != want {
					t.Errorf("node %s (%s) requests %q %s for %d pods", n.Name, n.InstanceType, got, tc.resource, len(n.Pods))
				}
				placed += len(n.Pods)
			}
			if placed != 3 {
				t.Errorf("%d of 3 pods on new nodes:\n%s", placed, stdout.String())
			}

			stdout.Reset()
			stderr.Reset()
			if code := run([]string{"simulate", "-f", pool, "-f", workload, "--validate", "warn"}, &stdout, &stderr); code != 0 {
				t.Fatalf("exit code %d; stderr %q", code, stderr.String())
			}
			name := strings.TrimSuffix(tc.file, ".yaml")
			if !strings.Contains(stdout.String(), "  "+name+" ×3\n") && !strings.Contains(stdout.String(), "  "+name+"\n") {
				t.Errorf("the table does not name the workload %s by its pods:\n%s", name, stdout.String())
			}
			t.Logf("tailor simulate -f %s -f %s (replicas: 3) --validate warn\n%s%s", pool, tc.file, stderr.String(), stdout.String())
		})
	}
}

// Under kubectl's default field validation, gpu-amd.yaml is refused for its
// misspelt field, named with the file; the rest of the input is planned, and the
// command exits 1 afterwards, as kubectl apply does.
func TestSimulateRefusesUnknownFieldsAndPlansTheRest(t *testing.T) {
	dir := t.TempDir()
	amd := scaledExample(t, dir, "gpu-amd.yaml", 2)
	neuron := scaledExample(t, dir, "neuron.yaml", 2)
	pool := filepath.Join("testdata", "simulate", "accelerators-nodepool.yaml")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"simulate", "-f", pool, "-f", amd, "-f", neuron, "-o", "json"}, &stdout, &stderr); code != 1 {
		t.Errorf("exit code %d, want 1; stderr %q", code, stderr.String())
	}
	wantErr := "error: " + amd + `: document 1: Deployment gpu-amd: strict decoding error: unknown field "spec.template.spec.containers[0].securityContext.allowPrivilegedEscalation"` + "\n"
	if !strings.Contains(stderr.String(), wantErr) {
		t.Errorf("stderr %q lacks %q", stderr.String(), wantErr)
	}
	if want := "tailor simulate: 1 object refused, as the API server would, and left out of the plan (listed above); --validate=warn drops unknown fields instead\n"; !strings.HasSuffix(stderr.String(), want) {
		t.Errorf("stderr %q does not end %q", stderr.String(), want)
	}
	lines := planLines(t, stdout.String())
	var summary simulate.Summary
	if err := json.Unmarshal(lines["summary"][0], &summary); err != nil {
		t.Fatal(err)
	}
	if summary.Pods != 2 || summary.Scheduled != 2 {
		t.Errorf("summary %+v, want neuron's 2 pods planned", summary)
	}
	var refused simulate.RefusedView
	if len(lines["refused"]) != 1 || json.Unmarshal(lines["refused"][0], &refused) != nil ||
		refused != (simulate.RefusedView{File: amd, Document: 1, Object: "Deployment gpu-amd", Error: strings.TrimSuffix(strings.TrimPrefix(wantErr, "error: "), "\n")}) {
		t.Errorf("refused lines %s", lines["refused"])
	}
}

// Most of Karpenter's example workloads ship with replicas: 0; simulate says so
// rather than print an empty plan unexplained. An invalid NodePool is refused with
// its file, name and field, and the other NodePools still plan.
func TestSimulateExplainsWhatItLeavesOut(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "pools.yaml")
	pools := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: broken}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.k8s.aws/instance-cpu, operator: Gt, values: ["many"]}
`
	if err := os.WriteFile(bad, []byte(pools), 0o644); err != nil {
		t.Fatal(err)
	}
	examples := filepath.Join("..", "..", "examples", "aws-karpenter")
	var stdout, stderr bytes.Buffer
	code := run([]string{"simulate", "-f", filepath.Join(examples, "general-purpose.yaml"), "-f", bad,
		"-f", filepath.Join(examples, "workloads", "neuron.yaml"), "-f", filepath.Join(examples, "workloads", "inflate.yaml")}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	for _, want := range []string{
		"note: " + filepath.Join(examples, "workloads", "neuron.yaml") + ": Deployment neuron: spec.replicas is 0, so it has no pods to plan; set it above 0 to plan for them\n",
		"error: " + bad + `: document 1: NodePool.karpenter.sh "broken" is invalid: spec.template.spec.requirements: Invalid value: "array": requirements operator 'Gt'`,
		"tailor simulate: 1 object refused, as the API server would, and left out of the plan (listed above)\n",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	// inflate's one pod is planned on the general-purpose NodePool.
	if !strings.Contains(stdout.String(), "general-purpose") || !strings.Contains(stdout.String(), "1 pod: 1 scheduled") {
		t.Errorf("stdout:\n%s", stdout.String())
	}
}
