package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// runIn runs the command line with stdin as standard input.
func runIn(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = runStreams(args, streams{in: strings.NewReader(stdin), out: &out, err: &errOut})
	return code, out.String(), errOut.String()
}

// commandPaths lists every command a user can run, as argument lists.
func commandPaths() [][]string {
	root := newRootCommand(streams{in: strings.NewReader(""), out: io.Discard, err: io.Discard})
	root.InitDefaultCompletionCmd()
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			if !sub.Hidden && sub.Name() != "help" {
				walk(sub, append(slices.Clone(path), sub.Name()))
			}
		}
	}
	walk(root, nil)
	return paths
}

// Every command prints its help on stdout and exits 0, as --help and as
// `tailor help X`; nothing goes to stderr.
func TestHelpOnStdout(t *testing.T) {
	paths := commandPaths()
	for _, want := range []string{"controller", "convert", "simulate", "sandbox up", "sandbox demo", "version", "completion bash"} {
		if !slices.ContainsFunc(paths, func(p []string) bool { return strings.Join(p, " ") == want }) {
			t.Errorf("no command %q among %q", want, paths)
		}
	}
	for _, path := range paths {
		name := strings.Join(append([]string{"tailor"}, path...), " ")
		for _, args := range [][]string{append(slices.Clone(path), "--help"), append([]string{"help"}, path...)} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, stdout, stderr := runIn(t, "", args...)
				if code != 0 || stderr != "" {
					t.Errorf("exit code %d, stderr %q; want 0 and nothing", code, stderr)
				}
				if !strings.Contains(stdout, "Usage:\n  "+name) {
					t.Errorf("stdout does not show the usage of %s:\n%s", name, stdout)
				}
			})
		}
	}
}

// Usage errors exit 2 with the error on stderr and nothing on stdout.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"simulate", "-f", "x.yaml", "extra"}, `tailor simulate: unexpected argument "extra"; pass manifests with -f`},
		{[]string{"convert", "-f", "x.yaml", "extra"}, `tailor convert: unexpected argument "extra"`},
		{[]string{"controller", "extra"}, `tailor controller: unexpected argument "extra"`},
		{[]string{"version", "extra"}, `tailor version: unexpected argument "extra"`},
		{[]string{"sandbox", "up", "extra"}, `tailor sandbox up: unexpected argument "extra"`},
		{[]string{"sandbox", "frobnicate"}, `unknown command "frobnicate" for "tailor sandbox"`},
		{[]string{"frobnicate"}, `unknown command "frobnicate" for "tailor"`},
		{[]string{"simulate"}, "at least one -f is required"},
		{[]string{"simulate", "-f", "x.yaml", "--output", "xml"}, `invalid argument "xml" for "-o, --output" flag: want table, json or yaml`},
		{[]string{"simulate", "-f", "-", "-f", "-"}, "standard input can be read once"},
		{[]string{"simulate", "-f", "x.yaml", "--consolidate", "--fail-on-unschedulable"}, "give one"},
		{[]string{"controller", "-kubeconfig", "k"}, "long flags take two dashes: --kubeconfig"},
		{[]string{"controller", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"completion", "tcsh"}, `tailor completion: unknown shell "tcsh": want bash, fish, powershell or zsh`},
		{[]string{"completion", "bash", "extra"}, `unknown command "extra" for "tailor completion bash"`},
		{[]string{"convert", "-f", "x.yaml", "--output", "xml"}, `invalid argument "xml" for "-o, --output" flag: want yaml or json`},
		// -o was convert's output file; now it is the format, as in simulate.
		{[]string{"convert", "-f", "x.yaml", "-o", "v1.yaml"}, "write to a file with --output-file v1.yaml"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, stderr := runIn(t, "", tc.args...)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d", code, exitUsage)
			}
			if !strings.Contains(stderr, tc.err) || !strings.Contains(stderr, "--help' for usage") {
				t.Errorf("stderr %q does not say %q and where usage is", stderr, tc.err)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing", stdout)
			}
		})
	}
}

func TestVersionFlag(t *testing.T) {
	_, want, _ := runIn(t, "", "version")
	code, got, stderr := runIn(t, "", "--version")
	if code != 0 || got != want || stderr != "" {
		t.Errorf("--version: exit code %d, stdout %q, stderr %q; want 0 and %q", code, got, stderr, want)
	}
}

// Each shell gets a completion script on stdout.
func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "# bash completion V2 for tailor",
		"zsh":  "#compdef tailor",
		"fish": "# fish completion for tailor",
	} {
		code, stdout, stderr := runIn(t, "", "completion", shell)
		if code != 0 || stderr != "" {
			t.Errorf("%s: exit code %d, stderr %q", shell, code, stderr)
		}
		if !strings.HasPrefix(stdout, want) || len(stdout) < 1000 {
			t.Errorf("%s: the script does not start with %q:\n%.200s", shell, want, stdout)
		}
	}
	// The script completes subcommands and flags through the binary.
	code, stdout, _ := runIn(t, "", "__complete", "simulate", "--out")
	if code != 0 || !strings.Contains(stdout, "--output") {
		t.Errorf("completing --out: exit code %d, %q", code, stdout)
	}
}

// Enumerated flags complete to their values, and nothing else (no file names);
// --dir completes directories.
func TestFlagValueCompletion(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
		// directive is cobra's: 4 no files, 6 no files and no space, 16 directories.
		directive string
	}{
		{[]string{"simulate", "-o", ""}, []string{"table", "json", "yaml"}, ":4"},
		{[]string{"simulate", "--output", ""}, []string{"table", "json", "yaml"}, ":4"},
		{[]string{"convert", "-o", ""}, []string{"yaml", "json"}, ":4"},
		{[]string{"sandbox", "up", "--cloud", ""}, []string{"sim", "aws"}, ":4"},
		{[]string{"sandbox", "status", "--dir", ""}, nil, ":16"},
		{[]string{"controller", "--cloud-provider", ""}, []string{"sim", "aws"}, ":4"},
		{[]string{"controller", "--log-level", ""}, []string{"debug", "info", "error"}, ":4"},
		{[]string{"controller", "--preference-policy", ""}, []string{"Respect", "Ignore"}, ":4"},
		{[]string{"controller", "--min-values-policy", ""}, []string{"Strict", "BestEffort"}, ":4"},
		{[]string{"simulate", "--min-values-policy", ""}, []string{"Strict", "BestEffort"}, ":4"},
		{[]string{"simulate", "--node-overhead", ""}, []string{"eks", "kwok"}, ":4"},
		{[]string{"controller", "--feature-gates", "NodeRepair=true,Sta"}, []string{"NodeRepair=true,StaticCapacity=true", "NodeRepair=true,StaticCapacity=false"}, ":6"},
		// A gate Tailor does not implement is offered only off, as it only accepts that.
		{[]string{"controller", "--feature-gates", "NodeO"}, []string{"NodeOverlay=false"}, ":6"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, _ := runIn(t, "", append([]string{"__complete"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit code %d", code)
			}
			lines := strings.Split(strings.TrimSpace(stdout), "\n")
			got, directive := lines[:len(lines)-1], lines[len(lines)-1]
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" || directive != tc.directive {
				t.Errorf("completions (-want +got):\n%s\ndirective %s, want %s", diff, directive, tc.directive)
			}
		})
	}
}

// `sandbox status --dir` on a directory that is not a sandbox fails, saying so.
func TestSandboxStatusOfADirectoryThatIsNotASandbox(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := runIn(t, "", "sandbox", "status", "--dir", dir)
	if code != exitFailed || stdout != "" || !strings.Contains(stderr, "tailor sandbox status: "+dir+" is not a sandbox") {
		t.Errorf("exit code %d, stdout %q, stderr %q; want %d and an error saying it is not a sandbox", code, stdout, stderr, exitFailed)
	}
}

// planManifest has a NodePool of two types, a pod one of them fits and a pod none
// does.
const planManifest = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: small}
spec:
  template:
    spec:
      nodeClassRef: {group: tailor.sh, kind: SimNodeClass, name: default}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [t3a.nano, m5.large]}
---
apiVersion: v1
kind: Pod
metadata: {name: fits, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: 100m, memory: 256M}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "64"}}}]
`

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// jsonLines decodes each line of out.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	return lines
}

// yamlDocuments decodes each document of out, as JSON would have it.
func yamlDocuments(t *testing.T, out string) []map[string]any {
	t.Helper()
	var docs []map[string]any
	for _, doc := range strings.Split(out, "---\n") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("document %q: %v", doc, err)
		}
		docs = append(docs, m)
	}
	return docs
}

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// checkSnakeCase reports every key below v that is not snake_case; the keys of
// requests are resource names.
func checkSnakeCase(t *testing.T, path string, v any) {
	t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			if !snakeCase.MatchString(k) {
				t.Errorf("%s: field %q is not snake_case", path, k)
			}
			if k != "requests" {
				checkSnakeCase(t, path+"."+k, sub)
			}
		}
	case []any:
		for _, sub := range v {
			checkSnakeCase(t, path+"[]", sub)
		}
	}
}

// --output json: the summary line keeps exactly its fields, every other line is
// one object keyed by its kind, every field is snake_case; --output yaml prints
// the same objects.
func TestSimulateOutputSchema(t *testing.T) {
	path := writeFile(t, "plan.yaml", planManifest)
	code, js, stderr := runIn(t, "", "simulate", "-f", path, "-o", "json")
	if code != 0 {
		t.Fatalf("json: exit code %d, stderr %q", code, stderr)
	}
	lines := jsonLines(t, js)
	if len(lines) < 4 {
		t.Fatalf("want a summary, lower bound, node and unschedulable line, got:\n%s", js)
	}
	var summary []string
	for k := range lines[0] {
		summary = append(summary, k)
	}
	slices.Sort(summary)
	if diff := cmp.Diff([]string{"alloc_bytes", "cost_per_hour", "impl", "nodes", "pods", "scheduled", "solve_seconds", "unschedulable", "version"}, summary); diff != "" {
		t.Errorf("summary fields (-want +got):\n%s", diff)
	}
	var kinds []string
	for i, l := range lines[1:] {
		if len(l) != 1 {
			t.Errorf("line %d has %d keys, want one: %v", i+2, len(l), l)
		}
		for k := range l {
			kinds = append(kinds, k)
		}
		checkSnakeCase(t, "line", l)
	}
	if diff := cmp.Diff([]string{"lower_bound", "costs", "new_node", "unschedulable"}, kinds); diff != "" {
		t.Errorf("line kinds (-want +got):\n%s", diff)
	}
	costs := lines[2]["costs"].(map[string]any)
	for _, field := range []string{"instances", "volumes", "addresses", "per_node"} {
		if _, ok := costs[field]; !ok {
			t.Errorf("costs has no %s: %v", field, costs)
		}
	}
	node := lines[3]["new_node"].(map[string]any)
	for _, field := range []string{"name", "node_pool", "instance_type", "zone", "capacity_type", "price_per_hour", "node_cost_per_hour", "instance_type_options", "requests", "pods"} {
		if _, ok := node[field]; !ok {
			t.Errorf("new_node has no %s: %v", field, node)
		}
	}
	if u := lines[4]["unschedulable"].(map[string]any); u["pod"] != "default/huge" || u["reason"] == "" {
		t.Errorf("unschedulable line %v", u)
	}

	code, yml, stderr := runIn(t, "", "simulate", "-f", path, "--output", "yaml")
	if code != 0 {
		t.Fatalf("yaml: exit code %d, stderr %q", code, stderr)
	}
	docs := yamlDocuments(t, yml)
	// The timing and allocation of two solves differ.
	for _, set := range [][]map[string]any{lines, docs} {
		delete(set[0], "solve_seconds")
		delete(set[0], "alloc_bytes")
	}
	if diff := cmp.Diff(lines, docs); diff != "" {
		t.Errorf("yaml documents differ from json lines (-json +yaml):\n%s", diff)
	}
}

// --consolidate's output is snake_case too, the same in json and yaml.
func TestConsolidateOutputSchema(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "consolidate")
	code, js, stderr := runIn(t, "", "simulate", "--consolidate", "-f", dir, "-o", "json")
	if code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, stderr)
	}
	lines := jsonLines(t, js)
	if len(lines) != 1 {
		t.Fatalf("want one line, got:\n%s", js)
	}
	checkSnakeCase(t, "consolidation", lines[0])
	for _, field := range []string{"steps", "blocked", "price_per_hour_before", "price_per_hour_after", "nodes_before", "nodes_after", "decision_seconds"} {
		if _, ok := lines[0][field]; !ok {
			t.Errorf("no %s in %v", field, lines[0])
		}
	}
	_, yml, _ := runIn(t, "", "simulate", "--consolidate", "-f", dir, "-o", "yaml")
	docs := yamlDocuments(t, yml)
	for _, set := range [][]map[string]any{lines, docs} {
		delete(set[0], "decision_seconds")
	}
	if diff := cmp.Diff(lines, docs); diff != "" {
		t.Errorf("yaml differs from json (-json +yaml):\n%s", diff)
	}
}

// --fail-on-unschedulable exits 3 after printing the plan, only when a pod fits
// nowhere.
func TestFailOnUnschedulable(t *testing.T) {
	path := writeFile(t, "plan.yaml", planManifest)
	code, stdout, stderr := runIn(t, "", "simulate", "-f", path, "-o", "json", "--fail-on-unschedulable")
	if code != exitUnschedulable {
		t.Errorf("exit code %d, want %d; stderr %q", code, exitUnschedulable, stderr)
	}
	if !strings.Contains(stderr, "unschedulable pods: 1") {
		t.Errorf("stderr %q does not say how many pods are unschedulable", stderr)
	}
	if lines := jsonLines(t, stdout); len(lines) == 0 || lines[0]["unschedulable"] != 1.0 {
		t.Errorf("the plan was not printed: %q", stdout)
	}
	if code, _, stderr := runIn(t, "", "simulate", "-f", path, "-o", "json"); code != 0 {
		t.Errorf("without the flag: exit code %d, stderr %q", code, stderr)
	}
	fits := writeFile(t, "fits.yaml", strings.Split(planManifest, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: huge")[0])
	if code, _, stderr := runIn(t, "", "simulate", "-f", fits, "--fail-on-unschedulable"); code != 0 {
		t.Errorf("every pod scheduled: exit code %d, stderr %q", code, stderr)
	}
}

// -f - reads standard input, alone or with files; errors name it.
func TestSimulateStdin(t *testing.T) {
	code, stdout, stderr := runIn(t, planManifest, "simulate", "-f", "-", "-o", "json")
	if code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, stderr)
	}
	if lines := jsonLines(t, stdout); len(lines) == 0 || lines[0]["pods"] != 2.0 {
		t.Errorf("the pods on stdin were not planned for: %q", stdout)
	}
	code, _, stderr = runIn(t, "kind: [", "simulate", "-f", "-")
	if code != exitFailed || !strings.Contains(stderr, stdinName) || strings.Contains(stderr, "tailor-stdin") {
		t.Errorf("bad input on stdin: exit code %d, stderr %q; want 1 and an error naming %s", code, stderr, stdinName)
	}
	code, _, stderr = runIn(t, strings.Repeat("# padding\n", 200), "simulate", "-f", "-", "--max-input-size", "1Ki")
	if code != exitFailed || !strings.Contains(stderr, "exceeds 1Ki") {
		t.Errorf("stdin over --max-input-size: exit code %d, stderr %q", code, stderr)
	}
}

// -f - reads standard input as convert does a file.
func TestConvertStdin(t *testing.T) {
	path := filepath.Join(convertDir, "seed-001-provisioners.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, fromFile, _ := runIn(t, "", "convert", "-f", path, "--role", "r")
	code, fromStdin, stderr := runIn(t, string(data), "convert", "-f", "-", "--role", "r")
	if code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, stderr)
	}
	if fromStdin == "" || fromStdin != fromFile {
		t.Errorf("stdin gave %q, the file %q", fromStdin, fromFile)
	}
}

// A long solve says so on stderr, and stdout stays the plan alone.
func TestSimulateProgress(t *testing.T) {
	opts, err := parseSimulate([]string{"-f", writeFile(t, "plan.yaml", planManifest), "-o", "json"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.progressAfter != slowSolve {
		t.Errorf("progress after %v off a terminal, want %v", opts.progressAfter, slowSolve)
	}
	opts.progressAfter = 0
	var stdout, stderr bytes.Buffer
	if err := runSimulate(t.Context(), opts, streams{in: strings.NewReader(""), out: &stdout, err: &stderr}); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^planning 2 pods\.\.\.\nplanning 2 pods: done in \d+\.\ds$`).MatchString(stderr.String()) {
		t.Errorf("stderr %q lacks the progress lines", stderr.String())
	}
	jsonLines(t, stdout.String())
}

func TestStartProgress(t *testing.T) {
	var out bytes.Buffer
	startProgress(&out, "planning 3 pods", time.Hour)()
	if out.Len() != 0 {
		t.Errorf("a quick solve printed %q", out.String())
	}
	done := startProgress(&out, "planning 3 pods", time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	done()
	if !strings.HasPrefix(out.String(), "planning 3 pods...\nplanning 3 pods: done in ") {
		t.Errorf("a slow solve printed %q", out.String())
	}
}
