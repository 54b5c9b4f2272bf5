package v1_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/config/crd"
	"github.com/nodetailor/tailor/internal/localcluster"
)

// The CRDs are checked against a real kube-apiserver: what it accepts and rejects is
// what a user of `kubectl apply` sees.
var dyn dynamic.Interface

func TestMain(m *testing.M) {
	os.Exit(func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cluster, err := localcluster.Start(ctx, localcluster.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "starting the local control plane:", err)
			return 1
		}
		defer cluster.Stop()
		if err := crd.Install(ctx, cluster.Config); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if dyn, err = dynamic.NewForConfig(cluster.Config); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}())
}

var (
	nodePools  = v1.SchemeGroupVersion.WithResource("nodepools")
	nodeClaims = v1.SchemeGroupVersion.WithResource("nodeclaims")
)

// object parses a YAML manifest; the name is made unique per test.
func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("test manifest: %v", err)
	}
	u.SetName(strings.Trim(invalidNameChars.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-"))
	return u
}

var invalidNameChars = regexp.MustCompile(`[^a-z0-9]+`)

const nodeClassRef = `
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}`

// nodePool wraps a template spec (indented as under template.spec) and an optional
// spec tail (indented as under spec) into a NodePool manifest.
func nodePool(templateSpec, specTail string) string {
	return `
apiVersion: karpenter.sh/v1
kind: NodePool
spec:
  template:
    spec:` + nodeClassRef + templateSpec + specTail
}

func create(t *testing.T, manifest string) (*unstructured.Unstructured, error) {
	t.Helper()
	u := object(t, manifest)
	resource := nodePools
	if u.GetKind() == "NodeClaim" {
		resource = nodeClaims
	}
	got, err := dyn.Resource(resource).Create(t.Context(), u, metav1.CreateOptions{})
	if err == nil {
		t.Cleanup(func() {
			_ = dyn.Resource(resource).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
		})
	}
	return got, err
}

func typed[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		t.Fatalf("converting %s: %v", u.GetName(), err)
	}
	return out
}

func TestNodePoolDefaults(t *testing.T) {
	got, err := create(t, nodePool("", ""))
	if err != nil {
		t.Fatalf("minimal NodePool rejected: %v", err)
	}
	np := typed[v1.NodePool](t, got)
	if d, ok := np.Spec.Template.Spec.ExpireAfter.Get(); !ok || d != 720*time.Hour {
		t.Errorf("expireAfter defaulted to %q, want 720h", np.Spec.Template.Spec.ExpireAfter)
	}
	if d, ok := np.Spec.Disruption.ConsolidateAfter.Get(); !ok || d != 0 {
		t.Errorf("consolidateAfter defaulted to %q, want 0s", np.Spec.Disruption.ConsolidateAfter)
	}
	if got, want := np.Spec.Disruption.ConsolidationPolicy, v1.ConsolidationPolicyWhenEmptyOrUnderutilized; got != want {
		t.Errorf("consolidationPolicy defaulted to %q, want %q", got, want)
	}
	if diff := cmp.Diff([]v1.Budget{{Nodes: "10%"}}, np.Spec.Disruption.Budgets); diff != "" {
		t.Errorf("budgets default (-want +got):\n%s", diff)
	}
}

// The NodePools people run: each must be accepted as written, and read back intact.
func TestValidNodePools(t *testing.T) {
	for name, spec := range map[string]struct{ template, tail, labels string }{
		"spot and on-demand": {template: `
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
      - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["2"]}`},
		"arm64": {template: `
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [arm64]}
      - {key: kubernetes.io/os, operator: In, values: [linux]}`},
		"gpu with taints": {template: `
      taints:
      - {key: nvidia.com/gpu, value: "true", effect: NoSchedule}
      requirements:
      - {key: karpenter.k8s.aws/instance-gpu-count, operator: Gte, values: ["1"]}
      - {key: karpenter.k8s.aws/instance-gpu-name, operator: In, values: [t4, a10g, l4]}`, tail: `
  limits:
    nvidia.com/gpu: 8`},
		"minValues": {template: `
      requirements:
      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, m6i, m7i, c5, c6i], minValues: 3}
      - {key: node.kubernetes.io/instance-type, operator: Exists, minValues: 10}`},
		"balanced": {tail: `
  disruption:
    consolidationPolicy: Balanced
    consolidationThreshold: 3
    consolidateAfter: 30s`},
		"budgets with a schedule": {tail: `
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 5m
    budgets:
    - {nodes: "0", schedule: "0 9 * * mon-fri", duration: 8h, reasons: [Drifted, Underutilized]}
    - {nodes: "20%", reasons: [Empty]}
    - {nodes: "5"}
    - {nodes: "100%", schedule: "@daily", duration: 1h30m}`},
		"limits": {tail: `
  limits:
    cpu: "1000"
    memory: 1000Gi
    nodes: "50"`},
		"expireAfter Never": {template: `
      expireAfter: Never
      terminationGracePeriod: 48h
      requirements:
      - {key: karpenter.k8s.aws/instance-cpu, operator: Lte, values: ["16"]}
      - {key: karpenter.k8s.aws/instance-memory, operator: Lt, values: ["65536"]}`, tail: `
  disruption:
    consolidateAfter: Never`},
		"static": {tail: `
  replicas: 3
  limits:
    nodes: "5"`},
		"static of zero nodes": {tail: `
  replicas: 0`},
		"weight, labels and startup taints": {template: `
      startupTaints:
      - {key: node.cilium.io/agent-not-ready, value: "true", effect: NoExecute}
      requirements:
      - {key: topology.kubernetes.io/zone, operator: NotIn, values: [us-east-1d]}
      - {key: example.com/team, operator: DoesNotExist}`, tail: `
  weight: 100`, labels: `{team: payments, node-restriction.kubernetes.io/pool: batch, karpenter.sh/capacity-type: spot}`},
		// Karpenter v1.10 dropped the kubernetes.io and k8s.io restrictions: the
		// NodeRestriction admission plugin guards what a kubelet sets on itself.
		"kubernetes.io and k8s.io keys": {template: `
      requirements:
      - {key: node-role.kubernetes.io/worker, operator: Exists}
      - {key: example.kubernetes.io/thing, operator: In, values: [a]}
      - {key: kubernetes.io/role, operator: In, values: [worker]}
      - {key: thing.k8s.io/x, operator: Exists}
      - {key: kops.k8s.io/instancegroup, operator: In, values: [nodes]}`,
			labels: `{node-role.kubernetes.io/worker: "", kubernetes.io/custom: x, example.k8s.io/x: z, node.kubernetes.io/pool: a}`},
	} {
		t.Run(name, func(t *testing.T) {
			manifest := nodePool(spec.template, spec.tail)
			if spec.labels != "" {
				manifest = strings.Replace(manifest, "  template:\n", "  template:\n    metadata:\n      labels: "+spec.labels+
					"\n      annotations: {example.com/owner: platform}\n", 1)
			}
			got, err := create(t, manifest)
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if err := admitOffline(t, manifest); err != nil {
				t.Errorf("the server accepts it but offline validation rejects it: %v", err)
			}
			// What went in comes back: the typed round trip loses no field.
			sent := typed[v1.NodePool](t, object(t, manifest))
			back := typed[v1.NodePool](t, got)
			if diff := cmp.Diff(sent.Spec.Template.Spec.Requirements, back.Spec.Template.Spec.Requirements); diff != "" {
				t.Errorf("requirements changed (-sent +stored):\n%s", diff)
			}
			if diff := cmp.Diff(sent.Spec.Limits, back.Spec.Limits); diff != "" {
				t.Errorf("limits changed (-sent +stored):\n%s", diff)
			}
			if sent.Spec.Template.Spec.ExpireAfter.Never != back.Spec.Template.Spec.ExpireAfter.Never {
				t.Errorf("expireAfter: sent %q, stored %q", sent.Spec.Template.Spec.ExpireAfter, back.Spec.Template.Spec.ExpireAfter)
			}
		})
	}
}

// One invalid NodePool per validation rule, each rejected with the field and the
// message a person can act on.
func TestInvalidNodePools(t *testing.T) {
	req := func(r string) string { return "\n      requirements:\n      - " + r }
	label := func(k string) string { return "    metadata:\n      labels: {" + k + "}\n" }
	for name, tc := range map[string]struct {
		template, tail, metadata string
		field, message           string
	}{
		"Gt with a non-integer": {template: req(`{key: example.com/size, operator: Gt, values: ["large"]}`),
			field: "spec.template.spec.requirements", message: "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value"},
		"Lt with two values": {template: req(`{key: example.com/size, operator: Lt, values: ["1", "2"]}`),
			field: "spec.template.spec.requirements", message: "must have a single non-negative integer value"},
		"Gte without a value": {template: req(`{key: example.com/size, operator: Gte}`),
			field: "spec.template.spec.requirements", message: "must have a single non-negative integer value"},
		"In without values": {template: req(`{key: example.com/team, operator: In, values: []}`),
			field: "spec.template.spec.requirements", message: "requirements with operator 'In' must have a value defined"},
		"minValues above the In values": {template: req(`{key: karpenter.k8s.aws/instance-family, operator: In, values: [m5, c5], minValues: 3}`),
			field: "spec.template.spec.requirements", message: "requirements with 'minValues' must have at least that many values specified in the 'values' field"},
		"minValues zero": {template: req(`{key: node.kubernetes.io/instance-type, operator: Exists, minValues: 0}`),
			field: "spec.template.spec.requirements[0].minValues", message: "should be greater than or equal to 1"},
		"minValues above 50": {template: req(`{key: node.kubernetes.io/instance-type, operator: Exists, minValues: 51}`),
			field: "spec.template.spec.requirements[0].minValues", message: "should be less than or equal to 50"},
		"unknown operator": {template: req(`{key: example.com/team, operator: Equals, values: [a]}`),
			field: "spec.template.spec.requirements[0].operator", message: `Unsupported value: "Equals"`},
		"requirement on hostname": {template: req(`{key: kubernetes.io/hostname, operator: In, values: [node-1]}`),
			field: "spec.template.spec.requirements[0].key", message: `label "kubernetes.io/hostname" is restricted`},
		"requirement on the nodepool label": {template: req(`{key: karpenter.sh/nodepool, operator: In, values: [other]}`),
			field: "spec.template.spec.requirements", message: `label "karpenter.sh/nodepool" is restricted`},
		"requirement in karpenter.sh": {template: req(`{key: karpenter.sh/custom, operator: Exists}`),
			field: "spec.template.spec.requirements[0].key", message: `label domain "karpenter.sh" is restricted`},
		"requirement in a karpenter.sh subdomain": {template: req(`{key: team.karpenter.sh/x, operator: Exists}`),
			field: "spec.template.spec.requirements[0].key", message: `label domain "karpenter.sh" is restricted`},
		"malformed requirement key": {template: req(`{key: "bad key!", operator: Exists}`),
			field: "spec.template.spec.requirements[0].key", message: "should match"},
		"label hostname": {metadata: label("kubernetes.io/hostname: n1"),
			field: "spec.template.metadata.labels", message: `label "kubernetes.io/hostname" is restricted`},
		"label nodepool": {metadata: label("karpenter.sh/nodepool: other"),
			field: "spec.template.metadata.labels", message: `label "karpenter.sh/nodepool" is restricted`},
		"label in karpenter.sh": {metadata: label("karpenter.sh/initialized: \"true\""),
			field: "spec.template.metadata.labels", message: `label domain "karpenter.sh" is restricted`},
		"label value too long": {metadata: label("team: " + strings.Repeat("x", 64)),
			field: "spec.template.metadata.labels.team", message: "Too long: may not be more than 63 bytes"},
		"label value not a label value": {metadata: label("team: a b"),
			field: "spec.template.metadata.labels.team", message: "should match"},
		"label in the karpenter.k8s.aws domain": {metadata: label("karpenter.k8s.aws/team: a"),
			field: "spec.template.metadata.labels", message: `label domain "karpenter.k8s.aws" is restricted`},
		"taint key not a qualified name": {template: "\n      taints:\n      - {key: a/b/c, effect: NoSchedule}",
			field: "spec.template.spec.taints[0].key", message: "should match"},
		"startup taint value not a qualified name": {template: "\n      startupTaints:\n      - {key: init, value: \"a b\", effect: NoSchedule}",
			field: "spec.template.spec.startupTaints[0].value", message: "should match"},
		"taint effect": {template: "\n      taints:\n      - {key: dedicated, value: gpu, effect: Sometimes}",
			field: "spec.template.spec.taints", message: "taint effect must be one of NoSchedule, PreferNoSchedule or NoExecute"},
		"startup taint effect": {template: "\n      startupTaints:\n      - {key: agent-not-ready, effect: Later}",
			field: "spec.template.spec.startupTaints", message: "taint effect must be one of NoSchedule, PreferNoSchedule or NoExecute"},
		"schedule without duration": {tail: "\n  disruption:\n    budgets:\n    - {nodes: \"1\", schedule: \"0 0 * * *\"}",
			field: "spec.disruption.budgets", message: "'schedule' must be set with 'duration'"},
		"duration without schedule": {tail: "\n  disruption:\n    budgets:\n    - {nodes: \"1\", duration: 1h}",
			field: "spec.disruption.budgets", message: "'schedule' must be set with 'duration'"},
		"malformed budget duration": {tail: "\n  disruption:\n    budgets:\n    - {nodes: \"1\", schedule: \"@daily\", duration: 1d}",
			field: "spec.disruption.budgets[0].duration", message: "should match"},
		"budget duration in seconds": {tail: "\n  disruption:\n    budgets:\n    - {nodes: \"1\", schedule: \"@daily\", duration: 90s}",
			field: "spec.disruption.budgets[0].duration", message: "should match"},
		"malformed budget schedule": {tail: "\n  disruption:\n    budgets:\n    - {nodes: \"1\", schedule: \"every day\", duration: 1h}",
			field: "spec.disruption.budgets[0].schedule", message: "should match"},
		"budget nodes above 100%": {tail: "\n  disruption:\n    budgets:\n    - {nodes: \"110%\"}",
			field: "spec.disruption.budgets[0].nodes", message: "should match"},
		"budget nodes not a number": {tail: "\n  disruption:\n    budgets:\n    - {nodes: \"few\"}",
			field: "spec.disruption.budgets[0].nodes", message: "should match"},
		"budget reason": {tail: "\n  disruption:\n    budgets:\n    - {nodes: \"1\", reasons: [Expired]}",
			field: "spec.disruption.budgets[0].reasons[0]", message: `Unsupported value: "Expired"`},
		"consolidation policy": {tail: "\n  disruption:\n    consolidationPolicy: Always",
			field: "spec.disruption.consolidationPolicy", message: `Unsupported value: "Always"`},
		"consolidation threshold without Balanced": {tail: "\n  disruption:\n    consolidationThreshold: 2",
			field: "spec.disruption", message: "consolidationThreshold may only be set with consolidationPolicy Balanced"},
		"consolidation threshold above 3": {tail: "\n  disruption:\n    consolidationPolicy: Balanced\n    consolidationThreshold: 4",
			field: "spec.disruption.consolidationThreshold", message: "should be less than or equal to 3"},
		"malformed consolidateAfter": {tail: "\n  disruption:\n    consolidateAfter: 5 minutes",
			field: "spec.disruption.consolidateAfter", message: "should match"},
		"malformed expireAfter": {template: "\n      expireAfter: 30d",
			field: "spec.template.spec.expireAfter", message: "should match"},
		"terminationGracePeriod Never": {template: "\n      terminationGracePeriod: Never",
			field: "spec.template.spec.terminationGracePeriod", message: "should match"},
		"weight zero": {tail: "\n  weight: 0",
			field: "spec.weight", message: "should be greater than or equal to 1"},
		"weight above 100": {tail: "\n  weight: 101",
			field: "spec.weight", message: "should be less than or equal to 100"},
		"negative replicas": {tail: "\n  replicas: -1",
			field: "spec.replicas", message: "should be greater than or equal to 0"},
		"static with a cpu limit": {tail: "\n  replicas: 2\n  limits:\n    nodes: \"4\"\n    cpu: \"100\"",
			field: "spec", message: "only 'limits.nodes' is supported on static NodePools"},
		"static with weight": {tail: "\n  replicas: 2\n  weight: 10",
			field: "spec", message: "spec.weight is not supported on static NodePools"},
		"empty nodeClassRef kind": {template: "\n      nodeClassRef: {group: karpenter.k8s.aws, kind: \"\", name: default}",
			field: "spec.template.spec.nodeClassRef.kind", message: "kind may not be empty"},
		"nodeClassRef group with a slash": {template: "\n      nodeClassRef: {group: karpenter.k8s.aws/v1, kind: EC2NodeClass, name: default}",
			field: "spec.template.spec.nodeClassRef.group", message: "should match"},
	} {
		t.Run(name, func(t *testing.T) {
			manifest := nodePool(tc.template, tc.tail)
			if strings.Contains(tc.template, "nodeClassRef:") {
				manifest = strings.Replace(manifest, nodeClassRef, "", 1)
			}
			if tc.metadata != "" {
				manifest = strings.Replace(manifest, "  template:\n", "  template:\n"+tc.metadata, 1)
			}
			_, err := create(t, manifest)
			assertRejected(t, err, tc.field, tc.message)
			// tailor simulate validates offline; it must say what the server says.
			assertRejected(t, admitOffline(t, manifest), tc.field, tc.message)
		})
	}
}

func TestNodePoolWithoutNodeClassRef(t *testing.T) {
	_, err := create(t, `
apiVersion: karpenter.sh/v1
kind: NodePool
spec:
  template:
    spec: {}`)
	assertRejected(t, err, "spec.template.spec.nodeClassRef", "Required value")
}

func TestNodeClassRefGroupAndKindAreImmutable(t *testing.T) {
	got, err := create(t, nodePool("", ""))
	if err != nil {
		t.Fatal(err)
	}
	for field, value := range map[string]string{"group": "example.com", "kind": "OtherNodeClass"} {
		changed := got.DeepCopy()
		if err := unstructured.SetNestedField(changed.Object, value, "spec", "template", "spec", "nodeClassRef", field); err != nil {
			t.Fatal(err)
		}
		_, err := dyn.Resource(nodePools).Update(t.Context(), changed, metav1.UpdateOptions{})
		assertRejected(t, err, "spec.template.spec.nodeClassRef", "nodeClassRef."+field+" is immutable")
	}
	// The name may change: pointing a NodePool at another NodeClass of the same kind is
	// how people roll out a new node configuration.
	renamed := got.DeepCopy()
	_ = unstructured.SetNestedField(renamed.Object, "other", "spec", "template", "spec", "nodeClassRef", "name")
	if _, err := dyn.Resource(nodePools).Update(t.Context(), renamed, metav1.UpdateOptions{}); err != nil {
		t.Errorf("renaming nodeClassRef rejected: %v", err)
	}
}

// spec.replicas can change but not come or go: a pool is static or dynamic for life.
func TestReplicasCannotBeAddedOrRemoved(t *testing.T) {
	const message = "spec.replicas cannot be added or removed"
	dynamicPool, err := create(t, nodePool("", ""))
	if err != nil {
		t.Fatal(err)
	}
	added := dynamicPool.DeepCopy()
	_ = unstructured.SetNestedField(added.Object, int64(2), "spec", "replicas")
	_, err = dyn.Resource(nodePools).Update(t.Context(), added, metav1.UpdateOptions{})
	assertRejected(t, err, "spec", message)

	static := object(t, nodePool("", "\n  replicas: 3"))
	static.SetName(static.GetName() + "-static")
	staticPool, err := dyn.Resource(nodePools).Create(t.Context(), static, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(nodePools).Delete(context.Background(), static.GetName(), metav1.DeleteOptions{})
	})
	removed := staticPool.DeepCopy()
	unstructured.RemoveNestedField(removed.Object, "spec", "replicas")
	_, err = dyn.Resource(nodePools).Update(t.Context(), removed, metav1.UpdateOptions{})
	assertRejected(t, err, "spec", message)

	scaled := staticPool.DeepCopy()
	_ = unstructured.SetNestedField(scaled.Object, int64(1), "spec", "replicas")
	got, err := dyn.Resource(nodePools).Update(t.Context(), scaled, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("scaling a static NodePool from 3 to 1 rejected: %v", err)
	}
	if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 1 {
		t.Errorf("spec.replicas stored as %d, want 1", r)
	}
}

const nodeClaim = `
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  labels: {karpenter.sh/nodepool: default}
spec:
  requirements:
  - {key: karpenter.sh/nodepool, operator: In, values: [default]}
  - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge], minValues: 2}
  resources:
    requests: {cpu: 1500m, memory: 3Gi, pods: "3"}
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}`

func TestNodeClaim(t *testing.T) {
	got, err := create(t, nodeClaim)
	if err != nil {
		t.Fatalf("NodeClaim rejected: %v", err)
	}
	nc := typed[v1.NodeClaim](t, got)
	if d, ok := nc.Spec.ExpireAfter.Get(); !ok || d != 720*time.Hour {
		t.Errorf("expireAfter defaulted to %q, want 720h", nc.Spec.ExpireAfter)
	}

	// Status is a subresource: Tailor writes it separately from the spec.
	_ = unstructured.SetNestedField(got.Object, "sim:///us-east-1a/i-0123", "status", "providerID")
	_ = unstructured.SetNestedField(got.Object, "node-1", "status", "nodeName")
	got, err = dyn.Resource(nodeClaims).UpdateStatus(t.Context(), got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("status update rejected: %v", err)
	}
	if id, _, _ := unstructured.NestedString(got.Object, "status", "providerID"); id != "sim:///us-east-1a/i-0123" {
		t.Errorf("status.providerID = %q after the status update", id)
	}

	// The spec is immutable: a NodeClaim stands for one instance that cannot change.
	_ = unstructured.SetNestedField(got.Object, "1h", "spec", "expireAfter")
	_, err = dyn.Resource(nodeClaims).Update(t.Context(), got, metav1.UpdateOptions{})
	assertRejected(t, err, "spec", "spec is immutable")
}

// A NodeClaim's requirement keys follow the NodePool's rules: kubernetes.io and k8s.io
// keys are taken (Karpenter v1.10+), kubernetes.io/hostname and karpenter.sh are not.
func TestNodeClaimRequirementKeys(t *testing.T) {
	withKey := func(key string) string {
		return strings.Replace(nodeClaim, "  - {key: karpenter.sh/nodepool, operator: In, values: [default]}\n",
			"  - {key: karpenter.sh/nodepool, operator: In, values: [default]}\n  - {key: "+key+", operator: Exists}\n", 1)
	}
	for _, key := range []string{"node-role.kubernetes.io/worker", "example.k8s.io/x"} {
		t.Run(key, func(t *testing.T) {
			if _, err := create(t, withKey(key)); err != nil {
				t.Errorf("rejected: %v", err)
			}
		})
	}
	for key, message := range map[string]string{
		"kubernetes.io/hostname": `label "kubernetes.io/hostname" is restricted`,
		"team.karpenter.sh/x":    `label domain "karpenter.sh" is restricted`,
	} {
		t.Run(key, func(t *testing.T) {
			_, err := create(t, withKey(key))
			assertRejected(t, err, "spec.requirements[1].key", message)
		})
	}
}

func TestInvalidNodeClaim(t *testing.T) {
	_, err := create(t, strings.Replace(nodeClaim, "operator: In, values: [m5.large, m5.xlarge]", "operator: Gt, values: [m5.large]", 1))
	assertRejected(t, err, "spec.requirements", "must have a single non-negative integer value")
}

// admitOffline runs the CRD's validation without a server, as tailor simulate does.
func admitOffline(t *testing.T, manifest string) error {
	t.Helper()
	v, err := crd.NewValidator("NodePool")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]any{}
	if err := utiljson.Unmarshal(js, &obj); err != nil {
		t.Fatal(err)
	}
	return v.Admit(t.Context(), obj)
}

// assertRejected checks that err is the API server's Invalid error and that one of its
// causes names field with message.
func assertRejected(t *testing.T, err error, field, message string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want rejection of %s with %q", field, message)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("rejected with %v; want an Invalid error on %s", err, field)
	}
	status, _ := err.(apierrors.APIStatus)
	var causes []string
	for _, c := range status.Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, message) {
			return
		}
		causes = append(causes, fmt.Sprintf("%s: %s", c.Field, c.Message))
	}
	t.Errorf("rejected, but no cause is %s with %q; causes:\n  %s", field, message, strings.Join(causes, "\n  "))
}

// The simulated cloud's NodeClass is installed with the same CRDs.
func TestSimNodeClass(t *testing.T) {
	simNodeClasses := schema.GroupVersionResource{Group: "tailor.sh", Version: "v1alpha1", Resource: "simnodeclasses"}
	u := object(t, "apiVersion: tailor.sh/v1alpha1\nkind: SimNodeClass\nspec: {}\n")
	got, err := dyn.Resource(simNodeClasses).Create(t.Context(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(simNodeClasses).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{})
	})
	for field, want := range map[string]string{"catalog": "aws-us-east-1", "imageID": "sim-image-1", "registrationDelay": "0s"} {
		if v, _, _ := unstructured.NestedString(got.Object, "spec", field); v != want {
			t.Errorf("spec.%s defaulted to %q, want %q", field, v, want)
		}
	}
	bad := object(t, "apiVersion: tailor.sh/v1alpha1\nkind: SimNodeClass\nspec: {catalog: gcp-moon-1, registrationDelay: soon}\n")
	bad.SetName("bad-" + bad.GetName())
	_, err = dyn.Resource(simNodeClasses).Create(t.Context(), bad, metav1.CreateOptions{})
	assertRejected(t, err, "spec.catalog", `Unsupported value: "gcp-moon-1"`)
	assertRejected(t, err, "spec.registrationDelay", "should match")
}

// The scale subresource (spec.replicas, status.nodes) is what `kubectl scale
// nodepool NAME --replicas=N` writes: a static pool takes it; a dynamic pool
// stays dynamic (the same rule refuses it).
func TestScaleSubresource(t *testing.T) {
	static, err := create(t, nodePool("", "\n  replicas: 3"))
	if err != nil {
		t.Fatal(err)
	}
	scale := func(name string, replicas int64) error {
		s := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "autoscaling/v1", "kind": "Scale",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"replicas": replicas},
		}}
		_, err := dyn.Resource(nodePools).Update(t.Context(), s, metav1.UpdateOptions{}, "scale")
		return err
	}
	if err := scale(static.GetName(), 5); err != nil {
		t.Fatalf("scaling a static NodePool to 5: %v", err)
	}
	got, err := dyn.Resource(nodePools).Get(t.Context(), static.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(got.Object, "spec", "replicas"); r != 5 {
		t.Errorf("spec.replicas %d after scaling to 5", r)
	}
	s, err := dyn.Resource(nodePools).Get(t.Context(), static.GetName(), metav1.GetOptions{}, "scale")
	if err != nil || s.GetKind() != "Scale" {
		t.Fatalf("reading the scale subresource: %v (%s)", err, s.GetKind())
	}

	dynamicPool := object(t, nodePool("", ""))
	dynamicPool.SetName(dynamicPool.GetName() + "-dynamic")
	if _, err := dyn.Resource(nodePools).Create(t.Context(), dynamicPool, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(nodePools).Delete(context.Background(), dynamicPool.GetName(), metav1.DeleteOptions{})
	})
	if err := scale(dynamicPool.GetName(), 2); err == nil || !strings.Contains(err.Error(), "spec.replicas cannot be added or removed") {
		t.Errorf("scaling a dynamic NodePool: %v, want it refused", err)
	}
}
