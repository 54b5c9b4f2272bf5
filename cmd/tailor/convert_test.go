package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testenv"
)

// kube reaches the API server the convert tests apply their output to, and
// kubeconfig is its admin kubeconfig, for commands that read a live cluster.
var (
	kube       client.Client
	kubeconfig string
)

func TestMain(m *testing.M) { os.Exit(testenv.RunWithKubeconfig(m, &kube, &kubeconfig)) }

var update = flag.Bool("update", false, "rewrite the convert golden files from the current output")

// convertDir holds the manifests of the project's seeds (restored where scraping
// mangled them; each file says how) and fixtures covering every converted field.
// The seeds 000, 003 and 004 hold no manifests. For NAME.yaml, NAME.golden is the
// expected stdout and NAME.stderr the expected warnings.
const convertDir = "testdata/convert"

// Every fixture converts; the output is what the golden files hold, decodes
// strictly into Tailor's types, and is accepted by a real API server with the CRDs
// installed, with strict field validation as kubectl applies it.
func TestConvertFixtures(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join(convertDir, "*.yaml"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no fixtures in %s: %v", convertDir, err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run([]string{"convert", "-f", in, "--role", "KarpenterNodeRole-demo"}, &stdout, &stderr); code != 0 {
				t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
			}
			golden(t, filepath.Join(convertDir, name+".golden"), stdout.String())
			golden(t, filepath.Join(convertDir, name+".stderr"), stderr.String())
			for i, doc := range splitDocuments(t, stdout.Bytes()) {
				applyConverted(t, i, doc)
			}
		})
	}
}

func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func splitDocuments(t *testing.T, data []byte) [][]byte {
	t.Helper()
	var docs [][]byte
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, doc)
	}
}

// applyConverted checks one output document of a Tailor kind: it decodes strictly
// into the Go type and the API server accepts it (a dry run, so fixtures may reuse
// names). Documents of other kinds passed through and are not checked here.
func applyConverted(t *testing.T, i int, doc []byte) {
	t.Helper()
	var into any
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		t.Fatalf("document %d: %v", i, err)
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "karpenter.sh/v1 NodePool":
		into = &v1.NodePool{}
	case "karpenter.sh/v1 NodeClaim":
		into = &v1.NodeClaim{}
	case "karpenter.k8s.aws/v1 EC2NodeClass":
		into = &awsv1.EC2NodeClass{}
	default:
		if strings.HasPrefix(tm.APIVersion, "karpenter.") {
			t.Errorf("document %d: %s %s is not a v1 kind", i, tm.APIVersion, tm.Kind)
		}
		return
	}
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Errorf("document %d (%s): strict decoding: %v", i, tm.Kind, err)
	}
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(js, &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := kube.Create(t.Context(), u, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict)); err != nil {
		t.Errorf("document %d (%s %s): the API server refuses it: %v", i, tm.Kind, u.GetName(), err)
	}
}

// What cannot be converted fails the command with the object and the field, and
// prints nothing on stdout.
func TestConvertErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Seed 001's AWSNodeTemplate as the post printed it, with its header restored:
	// the selectors lost their tag keys.
	printed := write("printed.yaml", `apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  subnetSelector: karpenter
  securityGroupSelector: karpenter
  tags: karpenter
`)
	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"as printed", []string{"-f", printed}, 1, "AWSNodeTemplate default: spec.securityGroupSelector: got a string, want a map of string values"},
		{"two seeds make NodePool default", []string{"--role", "r", "-f", filepath.Join(convertDir, "seed-001-provisioners.yaml"), "-f", filepath.Join(convertDir, "seed-002-provisioner.yaml")},
			1, "Provisioner default: makes NodePool default, as Provisioner default does"},
		{"no input", nil, 2, "at least one -f is required"},
		{"missing file", []string{"-f", filepath.Join(dir, "nope.yaml")}, 1, "no such file"},
		{"role and instance profile", []string{"-f", printed, "--role", "r", "--instance-profile", "p"}, 2, "give one"},
		// The AWSNodeTemplate used the install's default instance profile: v1 needs a
		// role or instance profile, and only the user knows which.
		{"no role", []string{"-f", filepath.Join(convertDir, "seed-001-provisioners.yaml")},
			1, "AWSNodeTemplate default: spec.instanceProfile: unset, so the install's default instance profile was used, which v1 does not have: pass --role"},
		// Output the v1 CRD refuses is an error at the field it came from, not a
		// manifest that fails on apply.
		{"AMI id typo", []string{"--role", "r", "-f", write("typo.yaml", `apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: typo
spec:
  subnetSelector: {karpenter.sh/discovery: demo}
  securityGroupSelector: {karpenter.sh/discovery: demo}
  amiSelector: {aws-ids: ami456}
`)}, 1, `tailor convert: AWSNodeTemplate typo: spec.amiSelector: becomes EC2NodeClass typo, which karpenter.k8s.aws/v1 does not accept: spec.amiSelectorTerms[0].id: Invalid value: "ami456"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"convert"}, tc.args...), &stdout, &stderr); code != tc.code {
				t.Errorf("exit code %d, want %d; stderr %q", code, tc.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.err) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.err)
			}
			if stdout.Len() > 0 {
				t.Errorf("stdout %q, want nothing", stdout.String())
			}
		})
	}
}

// --output-file writes the manifests to a file; the warnings still go to stderr.
func TestConvertOutputFile(t *testing.T) {
	out := filepath.Join(t.TempDir(), "v1.yaml")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"convert", "-f", filepath.Join(convertDir, "seed-001-provisioners.yaml"), "--role", "r", "--output-file", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d; stderr %q", code, stderr.String())
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if stdout.Len() > 0 || !bytes.Contains(data, []byte("kind: NodePool")) {
		t.Errorf("stdout %q; file %q", stdout.String(), data)
	}
	if !strings.Contains(stderr.String(), "httpPutResponseHopLimit") {
		t.Errorf("stderr %q: the warnings are missing", stderr.String())
	}
	// A failed conversion leaves no file behind.
	failed := filepath.Join(t.TempDir(), "failed.yaml")
	if code := run([]string{"convert", "-f", filepath.Join(convertDir, "seed-001-provisioners.yaml"), "--output-file", failed}, &stdout, &stderr); code != exitFailed {
		t.Errorf("without --role: exit code %d, want %d", code, exitFailed)
	}
	if _, err := os.Stat(failed); err == nil {
		t.Error("a failed conversion wrote its output file")
	}
}

// -o json writes the same objects as the YAML, in the same order, as one v1 List;
// with --output-file it goes to the file.
func TestConvertJSON(t *testing.T) {
	in := filepath.Join(convertDir, "seed-001-provisioners.yaml")
	var yamlOut, stderr bytes.Buffer
	if code := run([]string{"convert", "-f", in, "--role", "r"}, &yamlOut, &stderr); code != 0 {
		t.Fatalf("exit code %d; stderr %q", code, stderr.String())
	}
	var want []map[string]any
	for _, doc := range splitDocuments(t, yamlOut.Bytes()) {
		var obj map[string]any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		want = append(want, obj)
	}
	file := filepath.Join(t.TempDir(), "v1.json")
	for _, tc := range []struct {
		name string
		args []string
		read func(stdout []byte) []byte
	}{
		{"stdout", []string{"-o", "json"}, func(stdout []byte) []byte { return stdout }},
		{"file", []string{"--output=json", "--output-file", file}, func(stdout []byte) []byte {
			if len(stdout) > 0 {
				t.Errorf("stdout %q, want nothing", stdout)
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"convert", "-f", in, "--role", "r"}, tc.args...), &stdout, &stderr); code != 0 {
				t.Fatalf("exit code %d; stderr %q", code, stderr.String())
			}
			var list struct {
				APIVersion string           `json:"apiVersion"`
				Kind       string           `json:"kind"`
				Items      []map[string]any `json:"items"`
			}
			data := tc.read(stdout.Bytes())
			// encoding/json, as sigs.k8s.io/yaml reads numbers: float64.
			if err := json.Unmarshal(data, &list); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, data)
			}
			if list.APIVersion != "v1" || list.Kind != "List" {
				t.Errorf("apiVersion %q, kind %q; want a v1 List", list.APIVersion, list.Kind)
			}
			if diff := cmp.Diff(want, list.Items); diff != "" {
				t.Errorf("items (-yaml +json):\n%s", diff)
			}
			if !strings.Contains(stderr.String(), "httpPutResponseHopLimit") {
				t.Errorf("stderr %q: the warnings are missing", stderr.String())
			}
		})
	}
}
