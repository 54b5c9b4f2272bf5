package crd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The referee of Tailor's CRD validation is Karpenter's own: the CRDs its AWS
// provider publishes (hack/tools.sh karpenter-reference puts them in bin/), served by
// the same kube-apiserver under a group of their own. Every object below is sent to
// both with strict field validation, as kubectl sends it, and both must accept it
// or both refuse it: a NodePool or EC2NodeClass a user moves from Karpenter is
// accepted as before, and one Karpenter refuses is not accepted and then ignored.
// The objects are a valid NodePool and EC2NodeClass and, for every field of
// Karpenter's schema, the object with that field removed and set to values that
// probe its type, bounds, patterns, enums and rules.

// referenceDir holds Karpenter's published CRDs.
const referenceDir = "../../bin/karpenter-reference"

// referencePrefix is prepended to the group of Karpenter's CRDs served beside Tailor's.
const referencePrefix = "reference."

// deliberate are the fields, by kind and path, on which Tailor judges objects
// differently from Karpenter on purpose, with why (docs/karpenter-compatibility.md
// says the same). Everything else must agree.
var deliberate = map[string]string{
	"NodePool spec.template.spec.requirements[0].values[0]": "Karpenter's CRD puts its label-value pattern and 63-character limit on the values " +
		"array, where the API server ignores them (they apply to strings), so it accepts any value; Tailor applies them to each value, as " +
		"Karpenter's marker means: a value that can be no label value matches no node",
	"NodeClaim spec.requirements[0].values[0]": "as NodePool spec.template.spec.requirements[0].values[0]",
	"NodePool spec.disruption": "Tailor defaults consolidateAfter to 0s in a disruption block that leaves it out, as it does when the block is " +
		"left out (Karpenter refuses the block without it); the default is honoured",
	"NodePool spec.disruption.consolidateAfter": "as spec.disruption",
	"NodePool spec.template.spec.requirements": "Tailor reads a NodePool without requirements as one with none, every instance type of " +
		"its NodeClass (Karpenter refuses the missing field and means the same by an empty list)",
}

func TestValidationAgreesWithKarpenter(t *testing.T) {
	schemas := installReference(t)
	for _, tc := range []struct {
		kind, apiVersion, base string
	}{
		{"NodePool", "karpenter.sh/v1", referenceNodePool},
		{"EC2NodeClass", "karpenter.k8s.aws/v1", referenceEC2NodeClass},
		{"NodeClaim", "karpenter.sh/v1", referenceNodeClaim},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			base := decode(t, tc.base)
			cases := probes(schemas[tc.kind], base)
			if len(cases) < 100 {
				t.Fatalf("only %d probes of %s: the reference schema was not walked", len(cases), tc.kind)
			}
			group, version, _ := strings.Cut(tc.apiVersion, "/")
			type verdict struct {
				name, path     string
				tailor, karpen error
			}
			verdicts := make([]verdict, len(cases))
			var wg sync.WaitGroup
			work := make(chan int)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range work {
						c := cases[i]
						verdicts[i] = verdict{name: c.name, path: c.path,
							tailor: dryRun(t, c.obj, tc.apiVersion, tc.kind),
							karpen: dryRun(t, c.obj, referencePrefix+group+"/"+version, tc.kind)}
					}
				}()
			}
			for i := range cases {
				work <- i
			}
			close(work)
			wg.Wait()
			differ := map[string]bool{}
			refused := 0
			for _, v := range verdicts {
				if v.karpen != nil {
					refused++
				}
				if (v.tailor == nil) == (v.karpen == nil) {
					continue
				}
				differ[v.path] = true
				if why, ok := deliberate[tc.kind+" "+v.path]; ok {
					t.Logf("%s: differs on purpose (%s)", v.name, why)
					continue
				}
				t.Errorf("%s %s: Karpenter %s, Tailor %s", tc.kind, v.name, judged(v.karpen), judged(v.tailor))
			}
			for key := range deliberate {
				kind, path, _ := strings.Cut(key, " ")
				if kind == tc.kind && !differ[path] {
					t.Errorf("%s %s is listed as a deliberate difference, but Tailor and Karpenter agree on it now", kind, path)
				}
			}
			t.Logf("%s: %d objects, %d refused by Karpenter, fields judged differently: %d", tc.kind, len(cases), refused, len(differ))
			if refused == 0 || refused == len(cases) {
				t.Errorf("Karpenter refused %d of %d objects: the probes do not probe", refused, len(cases))
			}
		})
	}
}

func judged(err error) string {
	if err == nil {
		return "accepts it"
	}
	return "refuses it: " + err.Error()
}

// dryRun sends obj as apiVersion and kind, validated and not stored.
func dryRun(t *testing.T, obj map[string]any, apiVersion, kind string) error {
	u := &unstructured.Unstructured{Object: runtime.DeepCopyJSON(obj)}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetName("probe")
	var err error
	for range 50 {
		err = kube.Create(context.Background(), u.DeepCopy(), client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
		if !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
			break
		}
		time.Sleep(100 * time.Millisecond) // the reference kinds were just installed
	}
	if err != nil && !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
		t.Errorf("sending %s %s: %v", apiVersion, kind, err)
	}
	return err
}

// installReference serves Karpenter's CRDs under referencePrefix and returns the
// spec schema of each kind's served version.
func installReference(t *testing.T) map[string]*apiextensionsv1.JSONSchemaProps {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(referenceDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Karpenter CRDs in %s (hack/tools.sh karpenter-reference puts them there): %v", referenceDir, err)
	}
	schemas := map[string]*apiextensionsv1.JSONSchemaProps{}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		crd.Spec.Group = referencePrefix + crd.Spec.Group
		crd.Name = crd.Spec.Names.Plural + "." + crd.Spec.Group
		crd.ResourceVersion = ""
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		if err := kube.Create(t.Context(), u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("installing Karpenter's %s: %v", crd.Name, err)
		}
		for _, v := range crd.Spec.Versions {
			if v.Name == "v1" && v.Served {
				schemas[crd.Spec.Names.Kind] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	for _, kind := range []string{"NodePool", "EC2NodeClass", "NodeClaim"} {
		if schemas[kind] == nil {
			t.Fatalf("Karpenter's CRDs in %s serve no v1 %s", referenceDir, kind)
		}
	}
	return schemas
}

// probe is one object to judge, named by the field it changes (path) and how.
type probe struct {
	name, path string
	obj        map[string]any
}

// probes are base and, for each field of schema below spec that base has or whose
// parent object base has, base with the field removed and set to each value of
// samples. Array fields are walked through their first item.
func probes(schema *apiextensionsv1.JSONSchemaProps, base map[string]any) []probe {
	out := []probe{{name: "the base object", obj: base}}
	spec := schema.Properties["spec"]
	var walk func(path []any, s *apiextensionsv1.JSONSchemaProps, parentExists bool)
	walk = func(path []any, s *apiextensionsv1.JSONSchemaProps, parentExists bool) {
		_, exists := get(base, path)
		if !parentExists {
			return
		}
		name := pathName(path)
		if exists {
			out = append(out, probe{name: name + " removed", path: name, obj: with(base, path, nil, true)})
		}
		for _, v := range samples(s) {
			out = append(out, probe{name: fmt.Sprintf("%s = %s", name, show(v)), path: name, obj: with(base, path, v, false)})
		}
		switch s.Type {
		case "object":
			for _, key := range sortedKeys(s.Properties) {
				prop := s.Properties[key]
				walk(append(slices.Clone(path), key), &prop, exists)
			}
		case "array":
			if s.Items != nil && s.Items.Schema != nil {
				items, _ := get(base, path)
				list, _ := items.([]any)
				walk(append(slices.Clone(path), 0), s.Items.Schema, len(list) > 0)
			}
		}
	}
	for _, key := range sortedKeys(spec.Properties) {
		prop := spec.Properties[key]
		walk([]any{"spec", key}, &prop, true)
	}
	return out
}

// samples are values that probe a field of schema s: its type's edges, its bounds
// just inside and outside, strings that test patterns and the rules on label keys,
// durations, percentages and schedules, and a value of the wrong type.
func samples(s *apiextensionsv1.JSONSchemaProps) []any {
	var out []any
	switch s.Type {
	case "string":
		for _, e := range s.Enum {
			var v any
			_ = yaml.Unmarshal(e.Raw, &v)
			out = append(out, v)
		}
		out = append(out, "", "x", "Not-An-Enum_Value", "karpenter.sh/nodepool", "karpenter.sh/custom",
			"karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/custom", "topology.kubernetes.io/zone", "kubernetes.io/os",
			"kubernetes.io/hostname", "node.kubernetes.io/instance-type", "example.com/team", "a/b/c",
			"Example.com/team", "1h", "-1h", "720h", "Never", "0s", "10%", "101%", "5", "-5", "* * * * *", "@daily", "not a cron",
			"1Gi", "-1Gi", "100m", "ami-0123456789abcdef0", "sg-0123456789abcdef0", "subnet-0123456789abcdef0",
			"arn:aws:iam::123456789012:instance-profile/x", "al2023@latest", "al2023@v20240807", "bottlerocket@latest",
			"windows2022@latest", "unknown@latest", "/dev/xvda", "gp3", "io2", "Delete", "RAID0")
		if s.MaxLength != nil {
			out = append(out, strings.Repeat("a", int(*s.MaxLength)), strings.Repeat("a", int(*s.MaxLength)+1))
		}
		out = append(out, strings.Repeat("b", 64), strings.Repeat("c", 256), 5)
	case "integer":
		out = append(out, -1, 0, 1, 100, 101, 1<<31, "1")
		if s.Minimum != nil {
			out = append(out, int64(*s.Minimum), int64(*s.Minimum)-1)
		}
		if s.Maximum != nil {
			out = append(out, int64(*s.Maximum), int64(*s.Maximum)+1)
		}
	case "boolean":
		out = append(out, true, false, "true")
	case "array":
		out = append(out, []any{}, "x")
		if s.MaxItems != nil && *s.MaxItems < 200 && s.Items != nil && s.Items.Schema != nil && s.Items.Schema.Type == "string" {
			many := make([]any, *s.MaxItems+1)
			for i := range many {
				many[i] = fmt.Sprintf("v%d", i)
			}
			out = append(out, many)
		}
	case "object":
		out = append(out, map[string]any{}, "x")
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			out = append(out, map[string]any{"cpu": "1"}, map[string]any{"memory": "-1Gi"}, map[string]any{"nvidia.com/gpu": "1"},
				map[string]any{"karpenter.sh/nodepool": "x"}, map[string]any{"example.com/team": "a"},
				map[string]any{"karpenter.k8s.aws/instance-family": "m5"}, map[string]any{"karpenter.k8s.aws/custom": "x"},
				map[string]any{"karpenter.sh/capacity-type": "spot"}, map[string]any{"kubernetes.io/hostname": "x"}, map[string]any{"team": "a b"}, map[string]any{"memory.available": "5%"},
				map[string]any{"nodefs.available": "101%"}, map[string]any{"imagefs.available": "1m30s"})
		}
	default: // int-or-string and other untyped fields
		out = append(out, "", "x", "10%", "1", 1, -1, "-1")
	}
	return out
}

func get(obj any, path []any) (any, bool) {
	cur := obj
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, false
			}
			if cur, ok = m[k]; !ok {
				return nil, false
			}
		case int:
			l, ok := cur.([]any)
			if !ok || k >= len(l) {
				return nil, false
			}
			cur = l[k]
		}
	}
	return cur, true
}

// with is a copy of base with the field at path set to v, or removed.
func with(base map[string]any, path []any, v any, remove bool) map[string]any {
	out := runtime.DeepCopyJSON(base)
	parent, _ := get(out, path[:len(path)-1])
	switch k := path[len(path)-1].(type) {
	case string:
		m := parent.(map[string]any)
		if remove {
			delete(m, k)
		} else {
			m[k] = runtime.DeepCopyJSONValue(normalize(v))
		}
	case int:
		l := parent.([]any)
		if remove {
			l = slices.Delete(l, k, k+1)
			grand, _ := get(out, path[:len(path)-2])
			grand.(map[string]any)[path[len(path)-2].(string)] = l
		} else {
			l[k] = runtime.DeepCopyJSONValue(normalize(v))
		}
	}
	return out
}

// normalize turns ints into the int64 JSON values DeepCopyJSONValue takes.
func normalize(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	}
	return v
}

func pathName(path []any) string {
	var b strings.Builder
	for i, p := range path {
		switch k := p.(type) {
		case string:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(k)
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		}
	}
	return b.String()
}

func show(v any) string {
	s := fmt.Sprintf("%#v", v)
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// referenceNodePool is a NodePool with every field Karpenter v1.14 serves set to a
// value Karpenter accepts.
const referenceNodePool = `
spec:
  weight: 10
  limits: {cpu: "1000", memory: 1000Gi}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 1m
    budgets:
    - nodes: "10%"
      reasons: [Empty, Drifted]
    - nodes: "0"
      schedule: "0 9 * * mon-fri"
      duration: 8h
  template:
    metadata:
      labels: {team: a}
      annotations: {example.com/owner: a}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      expireAfter: 720h
      terminationGracePeriod: 48h
      taints: [{key: example.com/dedicated, value: a, effect: NoSchedule}]
      startupTaints: [{key: example.com/init, effect: NoExecute}]
      requirements:
      - key: karpenter.k8s.aws/instance-category
        operator: In
        values: [c, m, r]
        minValues: 2
      - key: karpenter.sh/capacity-type
        operator: In
        values: [spot, on-demand]
`

// referenceEC2NodeClass is an EC2NodeClass with most fields Karpenter v1.14 serves
// set to values Karpenter accepts.
const referenceEC2NodeClass = `
spec:
  role: KarpenterNodeRole-test
  amiFamily: AL2023
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test}}, {id: subnet-0123456789abcdef0}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test}}, {name: default}]
  capacityReservationSelectorTerms: [{id: cr-0123456789abcdef0}]
  associatePublicIPAddress: false
  detailedMonitoring: true
  instanceStorePolicy: RAID0
  userData: |
    echo hello
  tags: {team: a}
  metadataOptions: {httpEndpoint: enabled, httpProtocolIPv6: disabled, httpPutResponseHopLimit: 2, httpTokens: required}
  blockDeviceMappings:
  - deviceName: /dev/xvda
    rootVolume: true
    ebs: {volumeSize: 40Gi, volumeType: gp3, iops: 3000, throughput: 125, encrypted: true, deleteOnTermination: true}
  kubelet:
    maxPods: 110
    podsPerCore: 4
    systemReserved: {cpu: 100m, memory: 100Mi}
    kubeReserved: {cpu: 100m, memory: 100Mi}
    evictionHard: {memory.available: 5%}
    evictionSoft: {memory.available: 10%}
    evictionSoftGracePeriod: {memory.available: 1m}
    evictionMaxPodGracePeriod: 60
    imageGCHighThresholdPercent: 85
    imageGCLowThresholdPercent: 80
    cpuCFSQuota: true
    clusterDNS: [10.0.0.10]
`

// referenceNodeClaim is a NodeClaim as Karpenter's provisioner writes one.
const referenceNodeClaim = `
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  expireAfter: 720h
  terminationGracePeriod: 48h
  taints: [{key: example.com/dedicated, value: a, effect: NoSchedule}]
  startupTaints: [{key: example.com/init, effect: NoExecute}]
  resources:
    requests: {cpu: 1500m, memory: 3Gi, pods: "5"}
  requirements:
  - key: node.kubernetes.io/instance-type
    operator: In
    values: [m5.large, m5.xlarge]
    minValues: 1
  - key: karpenter.sh/nodepool
    operator: In
    values: [default]
`
