package convert_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/config/crd"
	"github.com/nodetailor/tailor/pkg/convert"
)

const template = `apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: default}
spec:
  subnetSelector: {karpenter.sh/discovery: demo}
  securityGroupSelector: {karpenter.sh/discovery: demo}
`

// provisioner is a v1alpha5 Provisioner named name on the AWSNodeTemplate default,
// with spec lines added (indented by two spaces).
func provisioner(name string, spec ...string) string {
	return "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: " + name + "}\nspec:\n  providerRef: {name: default}\n" +
		indent(spec) + "---\n"
}

func indent(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// run converts the documents with a role, checks that every converted object is
// valid (strictly decoded and admitted by the CRD as the API server would), and
// returns the objects and the warnings as strings.
func run(t *testing.T, opts convert.Options, docs ...string) ([]map[string]any, []string) {
	t.Helper()
	res, err := convert.Convert([]convert.Input{{Name: "in.yaml", Data: []byte(strings.Join(docs, "---\n"))}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	var objs []map[string]any
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(res.YAML())))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatal(err)
		}
		obj := map[string]any{}
		if err := utiljson.Unmarshal(js, &obj); err != nil {
			t.Fatal(err)
		}
		admit(t, doc, obj)
		objs = append(objs, obj)
	}
	var warnings []string
	for _, w := range res.Warnings {
		warnings = append(warnings, w.String())
	}
	return objs, warnings
}

func admit(t *testing.T, doc []byte, obj map[string]any) {
	t.Helper()
	var into any
	kind, _ := obj["kind"].(string)
	switch kind {
	case "NodePool":
		into = &v1.NodePool{}
	case "NodeClaim":
		into = &v1.NodeClaim{}
	case "EC2NodeClass":
		into = &awsv1.EC2NodeClass{}
	default:
		return
	}
	if err := yaml.UnmarshalStrict(doc, into); err != nil {
		t.Errorf("%s: strict decoding: %v", kind, err)
	}
	if into.(metav1.Object).GetName() == "" {
		t.Errorf("%s without a name", kind)
	}
	v, err := crd.NewValidator(kind)
	if err != nil {
		t.Fatal(err)
	}
	copied := map[string]any{}
	if err := utiljson.Unmarshal(mustJSON(t, obj), &copied); err != nil {
		t.Fatal(err)
	}
	if err := v.Admit(t.Context(), copied); err != nil {
		t.Errorf("the CRD refuses the %s:\n%s\n%v", kind, doc, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	js, err := utiljson.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// get walks a decoded object by keys (strings) and indexes (ints).
func get(obj any, path ...any) any {
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, _ := obj.(map[string]any)
			obj = m[p]
		case int:
			l, _ := obj.([]any)
			if p >= len(l) {
				return nil
			}
			obj = l[p]
		}
	}
	return obj
}

func find(objs []map[string]any, kind, name string) map[string]any {
	for _, o := range objs {
		if o["kind"] == kind && get(o, "metadata", "name") == name {
			return o
		}
	}
	return nil
}

var role = convert.Options{Role: "KarpenterNodeRole-demo"}

// TTLs and consolidation become the disruption block and expireAfter, keeping what
// an unset field meant: never.
func TestProvisionerDisruption(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		spec                          []string
		policy, consolidateAfter, exp string
	}{
		{"emptiness", []string{"ttlSecondsAfterEmpty: 30"}, "WhenEmpty", "30s", "Never"},
		{"consolidation", []string{"consolidation: {enabled: true}"}, "WhenEmptyOrUnderutilized", "0s", "Never"},
		{"consolidation off", []string{"consolidation: {enabled: false}"}, "WhenEmpty", "Never", "Never"},
		{"neither", nil, "WhenEmpty", "Never", "Never"},
		{"expiry", []string{"ttlSecondsUntilExpired: 2592000", "ttlSecondsAfterEmpty: 90"}, "WhenEmpty", "1m30s", "720h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, _ := run(t, role, template, provisioner("p", tc.spec...))
			np := find(objs, "NodePool", "p")
			got := []any{get(np, "spec", "disruption", "consolidationPolicy"), get(np, "spec", "disruption", "consolidateAfter"),
				get(np, "spec", "template", "spec", "expireAfter")}
			if diff := cmp.Diff([]any{tc.policy, tc.consolidateAfter, tc.exp}, got); diff != "" {
				t.Errorf("policy, consolidateAfter, expireAfter (-want +got):\n%s", diff)
			}
		})
	}
}

// v1alpha5's webhook constrained what a Provisioner left open; v1 does not, so the
// conversion writes those requirements out.
func TestV1alpha5DefaultRequirements(t *testing.T) {
	objs, _ := run(t, role, template,
		provisioner("open"),
		provisioner("arm", "labels: {kubernetes.io/arch: arm64}",
			"requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m6g.large]}]"))
	keys := func(name string) []string {
		var out []string
		for _, r := range get(find(objs, "NodePool", name), "spec", "template", "spec", "requirements").([]any) {
			out = append(out, r.(map[string]any)["key"].(string)+" "+r.(map[string]any)["operator"].(string))
		}
		return out
	}
	if diff := cmp.Diff([]string{"karpenter.k8s.aws/instance-category In", "karpenter.k8s.aws/instance-generation Gt",
		"karpenter.sh/capacity-type In", "kubernetes.io/os In", "kubernetes.io/arch In"}, keys("open")); diff != "" {
		t.Errorf("open (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"node.kubernetes.io/instance-type In", "karpenter.sh/capacity-type In", "kubernetes.io/os In"}, keys("arm")); diff != "" {
		t.Errorf("arm (-want +got):\n%s", diff)
	}
}

func TestSelectors(t *testing.T) {
	objs, warnings := run(t, role, `apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: default}
spec:
  subnetSelector: {aws-ids: "subnet-1, subnet-2", Name: private}
  securityGroupSelector: {aws::ids: sg-1}
  amiFamily: AL2023
  amiSelector: {aws::name: "a-*,b-*", aws::owners: "self", team: x}
`)
	spec := get(objs[0], "spec")
	want := map[string]any{
		"subnetSelectorTerms":        []any{map[string]any{"id": "subnet-1"}, map[string]any{"id": "subnet-2"}},
		"securityGroupSelectorTerms": []any{map[string]any{"id": "sg-1"}},
		"amiSelectorTerms": []any{
			map[string]any{"name": "a-*", "owner": "self", "tags": map[string]any{"team": "x"}},
			map[string]any{"name": "b-*", "owner": "self", "tags": map[string]any{"team": "x"}},
		},
		"amiFamily": "AL2023",
	}
	for k, w := range want {
		if diff := cmp.Diff(w, get(spec, k)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", k, diff)
		}
	}
	if want := "AWSNodeTemplate default: spec.subnetSelector: v1 selects by id alone, so Name, which narrowed the ids, were not carried over"; !contains(warnings, want) {
		t.Errorf("warnings %q lack %q", warnings, want)
	}
}

func contains(lines []string, want string) bool {
	for _, l := range lines {
		if strings.Contains(l, want) {
			return true
		}
	}
	return false
}

// Without AMIs named, the family's alias at latest selects what the old API
// discovered.
func TestAMIAliases(t *testing.T) {
	for family, alias := range map[string]string{"": "al2@latest", "AL2023": "al2023@latest", "Bottlerocket": "bottlerocket@latest", "Windows2022": "windows2022@latest"} {
		line := ""
		if family != "" {
			line = "  amiFamily: " + family + "\n"
		}
		objs, _ := run(t, role, template+line)
		if got := get(objs[0], "spec", "amiSelectorTerms", 0, "alias"); got != alias {
			t.Errorf("amiFamily %q: alias %v, want %s", family, got, alias)
		}
		if got := get(objs[0], "spec", "amiFamily"); got != nil {
			t.Errorf("amiFamily %q: written as %v, want left to the alias", family, got)
		}
	}
	objs, _ := run(t, role, "apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: b}\nspec: {amiFamily: Bottlerocket, role: r, subnetSelectorTerms: [{id: subnet-1}], securityGroupSelectorTerms: [{id: sg-1}]}\n")
	if got := get(objs[0], "spec", "amiSelectorTerms", 0, "alias"); got != "bottlerocket@latest" {
		t.Errorf("v1beta1: alias %v", got)
	}
}

// NodePools sharing a class keep sharing it when their kubelet settings agree; when
// they differ, those with settings get copies, since v1 keeps them in the class.
func TestKubeletPlacement(t *testing.T) {
	objs, warnings := run(t, role, template,
		provisioner("a", "kubeletConfiguration: {maxPods: 20}"),
		provisioner("b", "kubeletConfiguration: {maxPods: 20}"))
	if got := get(find(objs, "EC2NodeClass", "default"), "spec", "kubelet", "maxPods"); got != int64(20) {
		t.Errorf("shared settings: class kubelet maxPods %v", got)
	}
	if len(objs) != 3 || len(warnings) != 1 { // the hop limit
		t.Errorf("shared settings: %d objects, warnings %q", len(objs), warnings)
	}

	objs, warnings = run(t, role, template, provisioner("bare"), provisioner("tuned", "kubeletConfiguration: {maxPods: 20, systemReserved: {cpu: 1}}"))
	if got := get(find(objs, "EC2NodeClass", "default"), "spec", "kubelet"); got != nil {
		t.Errorf("the class of the NodePool without settings got %v", got)
	}
	copied := find(objs, "EC2NodeClass", "default-tuned")
	if got := get(copied, "spec", "kubelet", "systemReserved", "cpu"); got != "1" {
		t.Errorf("copy's kubelet %v", get(copied, "spec", "kubelet"))
	}
	if got := get(find(objs, "NodePool", "tuned"), "spec", "template", "spec", "nodeClassRef", "name"); got != "default-tuned" {
		t.Errorf("tuned names %v", got)
	}
	if !contains(warnings, "Provisioner tuned: spec.kubeletConfiguration: EC2NodeClass default is shared with NodePools whose kubelet settings differ") {
		t.Errorf("warnings %q", warnings)
	}

	_, warnings = run(t, role, provisioner("elsewhere", "kubeletConfiguration: {maxPods: 20}"))
	if !contains(warnings, "Provisioner elsewhere: spec.kubeletConfiguration: not carried over: in v1 kubelet settings live in the EC2NodeClass, and EC2NodeClass default is not in the input") {
		t.Errorf("warnings %q", warnings)
	}
}

// An EC2NodeClass that names no role or instance profile is refused by v1: without
// --role (or --instance-profile) the conversion fails, naming each object.
func TestIdentityRequired(t *testing.T) {
	v1beta1 := "apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: b}\nspec: {amiFamily: AL2023, subnetSelectorTerms: [{id: subnet-1}], securityGroupSelectorTerms: [{id: sg-1}]}\n"
	_, err := convert.Convert([]convert.Input{{Name: "in.yaml", Data: []byte(template + "---\n" + v1beta1)}}, convert.Options{})
	for _, want := range []string{
		"AWSNodeTemplate default: spec.instanceProfile: unset, so the install's default instance profile was used, which v1 does not have: pass --role",
		"EC2NodeClass b: spec.role: unset, and so is spec.instanceProfile; v1 needs one of them: pass --role",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want one containing %q", err, want)
		}
	}
	// A template with its own instance profile needs neither.
	if _, err := convert.Convert([]convert.Input{{Name: "in.yaml", Data: []byte(template + "  instanceProfile: own\n")}}, convert.Options{}); err != nil {
		t.Errorf("a template naming its instance profile: %v", err)
	}
}

func TestIdentity(t *testing.T) {
	objs, _ := run(t, convert.Options{InstanceProfile: "KarpenterNodeInstanceProfile-demo"}, template)
	if got := get(objs[0], "spec", "instanceProfile"); got != "KarpenterNodeInstanceProfile-demo" {
		t.Errorf("instanceProfile %v", got)
	}
	objs, _ = run(t, role, template+"  instanceProfile: own\n")
	if get(objs[0], "spec", "instanceProfile") != "own" || get(objs[0], "spec", "role") != nil {
		t.Errorf("the template's own instance profile: %v", get(objs[0], "spec"))
	}
}

// Objects of other kinds pass through byte for byte; Lists are opened.
func TestPassthrough(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep   # as written\ndata: {a: \"1\"}\n"
	res, err := convert.Convert([]convert.Input{{Name: "a.yaml", Data: []byte(cm + "---\napiVersion: v1\nkind: List\nitems:\n- " +
		strings.ReplaceAll(strings.TrimSpace(template), "\n", "\n  ") + "\n")}}, role)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Documents) != 2 || string(res.Documents[0]) != cm || !bytes.Contains(res.Documents[1], []byte("kind: EC2NodeClass")) {
		t.Errorf("documents %q", res.Documents)
	}
}

// Bad input is an error naming the object and the field.
func TestErrors(t *testing.T) {
	for _, tc := range []struct{ name, input, err string }{
		{"selector not a map", strings.Replace(template, "{karpenter.sh/discovery: demo}", "karpenter", 1),
			"AWSNodeTemplate default: spec.subnetSelector: got a string, want a map of string values"},
		{"no subnets", strings.Replace(template, "  subnetSelector: {karpenter.sh/discovery: demo}\n", "", 1),
			"AWSNodeTemplate default: spec.subnetSelector: required"},
		{"unknown family", template + "  amiFamily: eks-worker\n",
			`AWSNodeTemplate default: spec.amiFamily: "eks-worker" is not an AMI family`},
		{"custom without AMIs", template + "  amiFamily: Custom\n", "AWSNodeTemplate default: spec.amiFamily: Custom needs AMIs named in the selector"},
		{"ubuntu without AMIs", template + "  amiFamily: Ubuntu\n", "AWSNodeTemplate default: spec.amiFamily: Ubuntu is not an AMI family in v1 and has no alias"},
		{"provider and providerRef", provisioner("p", "provider: {subnetSelector: {a: b}}"),
			"Provisioner p: spec.provider and spec.providerRef are both set"},
		{"emptiness and consolidation", provisioner("p", "ttlSecondsAfterEmpty: 30", "consolidation: {enabled: true}"),
			"Provisioner p: spec.ttlSecondsAfterEmpty and spec.consolidation.enabled are both set"},
		{"negative ttl", provisioner("p", "ttlSecondsUntilExpired: -1"), "Provisioner p: spec.ttlSecondsUntilExpired: -1 is not a number of seconds"},
		{"ttl not a number", provisioner("p", "ttlSecondsAfterEmpty: soon"), "Provisioner p: spec.ttlSecondsAfterEmpty: got a string, want an integer"},
		{"bad operator", provisioner("p", "requirements: [{key: a, operator: Is, values: [b]}]"), `Provisioner p: spec.requirements[0].operator: "Is"`},
		{"v1beta1 without family", "apiVersion: karpenter.k8s.aws/v1beta1\nkind: EC2NodeClass\nmetadata: {name: x}\nspec: {role: r}\n",
			"EC2NodeClass x: spec.amiFamily: required in v1beta1"},
		{"v1beta1 policy", "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: x}\nspec: {template: {spec: {nodeClassRef: {name: d}}}, disruption: {consolidationPolicy: Sometimes}}\n",
			`NodePool x: spec.disruption.consolidationPolicy: "Sometimes"`},
		{"no name", "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nspec: {}\n", "in.yaml: document 1: Provisioner: metadata.name is required"},
		{"class twice", template + "---\napiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: default}\nspec:\n  provider: {subnetSelector: {a: b}, securityGroupSelector: {a: b}}\n",
			"Provisioner default: makes EC2NodeClass default, as AWSNodeTemplate default does"},
		// What converts but the v1 CRD refuses is an error at the source field.
		{"AMI id typo", template + "  amiSelector: {aws-ids: ami456}\n",
			`AWSNodeTemplate default: spec.amiSelector: becomes EC2NodeClass default, which karpenter.k8s.aws/v1 does not accept: spec.amiSelectorTerms[0].id: Invalid value: "ami456"`},
		{"security group id typo in a provider block", "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p}\nspec:\n  provider: {subnetSelector: {a: b}, securityGroupSelector: {aws-ids: sg123}}\n",
			`Provisioner p: spec.provider.securityGroupSelector: becomes EC2NodeClass p, which karpenter.k8s.aws/v1 does not accept: spec.securityGroupSelectorTerms[0].id: Invalid value: "sg123"`},
		{"weight out of range", provisioner("p", "weight: 1000"),
			"Provisioner p: spec.weight: becomes NodePool p, which karpenter.sh/v1 does not accept: spec.weight: Invalid value: 1000"},
		{"v1beta1 weight out of range", "apiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: x}\nspec: {template: {spec: {nodeClassRef: {name: d}}}, weight: 101}\n",
			"NodePool x: the karpenter.sh/v1 NodePool it becomes is not valid: spec.weight: Invalid value: 101"},
		{"v1 passed through", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\nspec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}, requirements: []}}, weight: 0}\n",
			"NodePool x: not valid karpenter.sh/v1: spec.weight: Invalid value: 0"},
		{"v1 passed through with a misspelt field", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\nspec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}, requirements: [], terminationGracePeirod: 1h}}}\n",
			`NodePool x: unknown field "spec.template.spec.terminationGracePeirod"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := convert.Convert([]convert.Input{{Name: "in.yaml", Data: []byte(tc.input)}}, role)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// Labels and requirements under kubernetes.io and k8s.io carry over, as v1 (since
// Karpenter v1.10) admits them; karpenter.sh's and the hostname do not.
func TestLabelDomains(t *testing.T) {
	objs, warnings := run(t, role, template,
		provisioner("roles", "labels: {node-role.kubernetes.io/worker: \"true\", team.k8s.io/owner: payments, karpenter.sh/other: x}",
			"requirements: [{key: example.kubernetes.io/tier, operator: In, values: [gold]}]"))
	labels := get(find(objs, "NodePool", "roles"), "spec", "template", "metadata", "labels").(map[string]any)
	for _, k := range []string{"node-role.kubernetes.io/worker", "team.k8s.io/owner"} {
		if _, ok := labels[k]; !ok {
			t.Errorf("label %s was not carried over: %v", k, labels)
		}
	}
	if _, ok := labels["karpenter.sh/other"]; ok {
		t.Error("a karpenter.sh label was carried over")
	}
	found := false
	for _, r := range get(find(objs, "NodePool", "roles"), "spec", "template", "spec", "requirements").([]any) {
		found = found || r.(map[string]any)["key"] == "example.kubernetes.io/tier"
	}
	if !found {
		t.Error("the example.kubernetes.io/tier requirement was not carried over")
	}
	if !contains(warnings, `the label domain "karpenter.sh" is restricted`) {
		t.Errorf("no warning for the karpenter.sh label: %v", warnings)
	}
}
