package simulate

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/disruption"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

func TestMixedManifests(t *testing.T) {
	w, err := Load(t.Context(), []string{"testdata/mixed.yaml"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Skipped) != 1 || !strings.Contains(w.Skipped[0], "ConfigMap ignored") {
		t.Errorf("skipped %v, want the ConfigMap", w.Skipped)
	}
	// 2 StatefulSet pods, min(parallelism 5, completions 3) Job pods, 1 bare pod.
	if len(w.Pods) != 6 {
		t.Fatalf("%d pending pods, want 6", len(w.Pods))
	}
	np := w.NodePools[0]
	if np.Spec.Disruption.ConsolidationPolicy != v1.ConsolidationPolicyWhenEmptyOrUnderutilized || len(np.Spec.Disruption.Budgets) != 1 {
		t.Errorf("NodePool defaults not applied: %+v", np.Spec.Disruption)
	}
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(w, types, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plan := res.Plan
	bound := map[string]string{}
	for _, b := range plan.Bindings {
		bound[b.Pod.Name] = b.Node
	}
	// existing-1 has 1 cpu free: two Job pods of 500m fit there, not a database.
	onExisting := 0
	for pod, node := range bound {
		if strings.HasPrefix(pod, "batch-") && node == "existing-1" {
			onExisting++
		}
	}
	if len(plan.Bindings) != 2 || onExisting != 2 {
		t.Errorf("bindings %v, want two Job pods on existing-1", bound)
	}
	for _, n := range plan.NewNodes {
		for _, p := range n.Pods {
			if strings.HasPrefix(p.Name, "db-") && n.Offering.Zone != "us-east-1c" {
				t.Errorf("%s in %s; its volume's storage class allows only us-east-1c", p.Name, n.Offering.Zone)
			}
		}
		if r, _ := n.InstanceType.Requirements.Get("karpenter.k8s.aws/instance-category"); !r.Has("c") && !r.Has("m") && !r.Has("r") {
			t.Errorf("node %s is %s, outside the NodePool's categories", n.Name, n.InstanceType.Name)
		}
		// The DaemonSet's pod is counted on every new node.
		if cpu := n.Requests["cpu"]; cpu.MilliValue()%1000 != 200 && cpu.MilliValue()%500 != 200 {
			t.Errorf("node %s requests %s cpu; the agent's 200m is missing", n.Name, cpu.String())
		}
	}
	if len(plan.Unschedulable) != 1 || plan.Unschedulable[0].Pod.Name != "huge" ||
		!strings.Contains(plan.Unschedulable[0].Reason, "NodePool default: no instance type offers 500 cpu") {
		t.Errorf("unschedulable %v", plan.Unschedulable)
	}

	var out bytes.Buffer
	if err := WriteJSON(&out, NewReport(res, "v0.0.0-test").Objects()); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	var summary map[string]any
	if err := json.Unmarshal([]byte(first), &summary); err != nil {
		t.Fatalf("first line is not JSON: %q", first)
	}
	for _, key := range []string{"impl", "version", "pods", "scheduled", "unschedulable", "nodes", "cost_per_hour", "solve_seconds", "alloc_bytes"} {
		if _, ok := summary[key]; !ok {
			t.Errorf("summary lacks %q: %s", key, first)
		}
	}
	if summary["impl"] != "tailor" || summary["pods"] != float64(6) || summary["scheduled"] != float64(5) || summary["unschedulable"] != float64(1) {
		t.Errorf("summary %s", first)
	}
	if len(summary) != 9 {
		t.Errorf("summary has %d keys, want exactly 9: %s", len(summary), first)
	}
}

// An invalid NodePool is refused with the API server's message, naming the file,
// the NodePool and the field, and left out; the rest is read and planned.
func TestInvalidNodePoolIsRefusedAlone(t *testing.T) {
	w, err := Load(t.Context(), []string{"testdata/bad-nodepool.yaml", "../../examples/seed"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Refused) != 1 {
		t.Fatalf("refused %v, want the one invalid NodePool", w.Refused)
	}
	r := w.Refused[0]
	for _, want := range []string{"testdata/bad-nodepool.yaml: document 1", `NodePool.karpenter.sh "broken" is invalid`,
		"spec.template.spec.requirements", "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value"} {
		if !strings.Contains(r.Error(), want) {
			t.Errorf("refusal %q lacks %q", r.Error(), want)
		}
	}
	if r.File != "testdata/bad-nodepool.yaml" || r.Document != 1 || r.Object != "NodePool broken" || r.UnknownFields {
		t.Errorf("refusal %+v", r)
	}
	if len(w.NodePools) != 1 || w.NodePools[0].Name != "default" || len(w.Pods) != 10 {
		t.Fatalf("read NodePools %v and %d pods; want the seed's default NodePool and its 10 pods", w.NodePools, len(w.Pods))
	}
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(w, types, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.Unschedulable) != 0 || len(res.Plan.NewNodes) == 0 {
		t.Errorf("plan of the rest: %d new nodes, %d unschedulable pods", len(res.Plan.NewNodes), len(res.Plan.Unschedulable))
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, NewReport(res, "test").Objects()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	var last map[string]RefusedView
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if got := last["refused"]; got.File != r.File || got.Document != 1 || got.Object != "NodePool broken" || got.Error != r.Error() {
		t.Errorf("the last JSON line is %s, want the refused NodePool", lines[len(lines)-1])
	}
}

// Fields a schema does not declare are refused as kubectl apply refuses them by
// default (its --validate=strict), naming the file, the object and each field; warn
// drops them with a warning each and reads the object; ignore drops them silently.
func TestUnknownFields(t *testing.T) {
	const manifests = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: typo, lables: {team: a}}
spec:
  template:
    spec:
      nodeClassRef: {group: tailor.sh, kind: SimNodeClass, name: default}
      terminationGracePeirod: 1h
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: team}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: c
        image: x
        resources: {requests: {cpu: "1"}}
        securityContext: {allowPrivilegedEscalation: false}
---
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: bare}
  spec: {containers: [{name: c, image: x}], nodeSelectr: {disk: ssd}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: unused}
data: {a: b}
extra: not read, as simulate does not use ConfigMaps
`
	path := filepath.Join(t.TempDir(), "typos.yaml")
	if err := os.WriteFile(path, []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := Load(t.Context(), []string{path}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range w.Refused {
		if !r.UnknownFields {
			t.Errorf("%v: not marked as refused for unknown fields", r)
		}
		got = append(got, r.Error())
	}
	want := []string{
		path + `: document 1: NodePool typo: strict decoding error: unknown field "metadata.lables", unknown field "spec.template.spec.terminationGracePeirod"`,
		path + `: document 2: Deployment team/web: strict decoding error: unknown field "spec.template.spec.containers[0].securityContext.allowPrivilegedEscalation"`,
		path + `: document 3: item 0: Pod bare: strict decoding error: unknown field "spec.nodeSelectr"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refusals (-want +got):\n%s", diff)
	}
	if len(w.NodePools) != 0 || len(w.Pods) != 0 || !slices.Equal(w.Skipped, []string{"ConfigMap unused"}) {
		t.Errorf("read %d NodePools, %d pods, skipped %v; want nothing read but the ConfigMap skipped", len(w.NodePools), len(w.Pods), w.Skipped)
	}

	w, err = Load(t.Context(), []string{path}, Options{FieldValidation: FieldValidationWarn})
	if err != nil {
		t.Fatal(err)
	}
	wantWarnings := []string{
		path + `: document 1: NodePool typo: unknown field "metadata.lables"; dropped`,
		path + `: document 1: NodePool typo: unknown field "spec.template.spec.terminationGracePeirod"; dropped`,
		path + `: document 2: Deployment team/web: unknown field "spec.template.spec.containers[0].securityContext.allowPrivilegedEscalation"; dropped`,
		path + `: document 3: item 0: Pod bare: unknown field "spec.nodeSelectr"; dropped`,
	}
	if diff := cmp.Diff(wantWarnings, w.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if len(w.Refused) != 0 || len(w.NodePools) != 1 || len(w.Pods) != 3 {
		t.Errorf("refused %v, read %d NodePools and %d pods; want the NodePool and 3 pods", w.Refused, len(w.NodePools), len(w.Pods))
	}
	if tgp := w.NodePools[0].Spec.Template.Spec.TerminationGracePeriod; tgp != nil {
		t.Errorf("the misspelt field set terminationGracePeriod %v", tgp)
	}

	w, err = Load(t.Context(), []string{path}, Options{FieldValidation: FieldValidationIgnore})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Refused) != 0 || len(w.Warnings) != 0 || len(w.NodePools) != 1 || len(w.Pods) != 3 {
		t.Errorf("ignore: refused %v, warnings %v, %d NodePools, %d pods", w.Refused, w.Warnings, len(w.NodePools), len(w.Pods))
	}
}

// A workload of no pods (replicas: 0, as most of Karpenter's example workloads
// ship) gets a note, so an empty plan is explained; its pods, when it has some, are
// named for it.
func TestEmptyWorkloadsAreNoted(t *testing.T) {
	w, err := Load(t.Context(), []string{"../../examples/aws-karpenter/workloads"}, Options{FieldValidation: FieldValidationWarn})
	if err != nil {
		t.Fatal(err)
	}
	var empty []string
	for _, note := range w.Notes {
		file, rest, _ := strings.Cut(note, ": ")
		if !strings.HasSuffix(rest, ": spec.replicas is 0, so it has no pods to plan; set it above 0 to plan for them") {
			t.Errorf("note %q", note)
		}
		empty = append(empty, filepath.Base(file))
	}
	want := []string{"gpu-amd.yaml", "gpu-nvidia.yaml", "neuron.yaml", "prefer-arm.yaml", "spot.yaml", "spread-zone.yaml"}
	if !slices.Equal(empty, want) {
		t.Errorf("noted %v, want %v", empty, want)
	}
	// inflate (replicas unset: 1), arm64 1, pdb 10, host-spread 10, host-zone-spread 50.
	if len(w.Pods) != 72 {
		t.Errorf("%d pods, want 72", len(w.Pods))
	}
	if got := w.Owners["default/host-zone-spread-49"]; got != "host-zone-spread" {
		t.Errorf("host-zone-spread-49 is owned by %q", got)
	}
}

func TestGzipAndDirectories(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile("testdata/mixed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(data)
	zw.Close()
	if err := os.WriteFile(filepath.Join(dir, "mixed.yaml.gz"), gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a manifest"), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := Load(t.Context(), []string{dir}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Pods) != 6 || len(w.NodePools) != 1 {
		t.Errorf("read %d pods and %d NodePools from the gzipped file, want 6 and 1", len(w.Pods), len(w.NodePools))
	}
}

func TestBadInput(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"no kind":      {"apiVersion: v1\nmetadata: {name: x}\n", "document 1: apiVersion and kind are required"},
		"not yaml":     {"apiVersion: v1\nkind: Pod\n  bad: [indent\n", "document 1"},
		"unknown node": {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: ghost, containers: [{name: c, image: x}]}\n", "pods are bound to nodes not in the input: ghost"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(t.Context(), []string{path}, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// Objects the API server would refuse are left out, each with a message naming
// the file, the document and the object, and the rest is read.
func TestRefusedObjects(t *testing.T) {
	const pool = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec: {template: {spec: {nodeClassRef: {group: g, kind: K, name: default}}}}\n"
	for name, tc := range map[string]struct{ yaml, want string }{
		"bad field":      {"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: many}\n", "document 1: Deployment web: "},
		"NodePool twice": {pool + "---\n" + pool, "document 2: NodePool a is defined twice; the first, in "},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			w, err := Load(t.Context(), []string{path}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(w.Refused) != 1 || !strings.Contains(w.Refused[0].Error(), path+": "+tc.want) {
				t.Errorf("refused %v, want one refusal saying %q", w.Refused, tc.want)
			}
		})
	}
}

// The examples shipped in the repository plan as their comments say.
func TestExamples(t *testing.T) {
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	w, err := Load(t.Context(), []string{"../../examples/seed"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Refused) != 0 {
		t.Errorf("seed: refused %v", w.Refused)
	}
	res, err := Run(w, types, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	placed := 0
	for _, n := range res.Plan.NewNodes {
		placed += len(n.Pods)
	}
	if placed != 10 || len(res.Plan.Unschedulable) != 0 {
		t.Errorf("seed: %d of 10 pods on new nodes, %d unschedulable", placed, len(res.Plan.Unschedulable))
	}

	w, err = Load(t.Context(), []string{"../../examples/aws"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Refused) != 0 {
		t.Errorf("aws: refused %v", w.Refused)
	}
	res, err = Run(w, types, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Plan.Unschedulable) != 0 {
		t.Errorf("aws: unschedulable %v", res.Plan.Unschedulable)
	}
	for _, n := range res.Plan.NewNodes {
		arch, _ := n.InstanceType.Requirements.Get(v1.LabelArch)
		for _, p := range n.Pods {
			app := p.Labels["app"]
			switch {
			case strings.HasPrefix(p.Name, "train-"):
				if n.NodePool != "gpu" {
					t.Errorf("%s on NodePool %s, want gpu", p.Name, n.NodePool)
				}
			case app == "graviton-svc":
				if n.NodePool != "arm64" || !arch.Has("arm64") {
					t.Errorf("%s on %s/%s, want the arm64 NodePool", p.Name, n.NodePool, n.InstanceType.Name)
				}
			default:
				if n.NodePool == "gpu" {
					t.Errorf("%s on the tainted gpu NodePool without a toleration", p.Name)
				}
			}
		}
		if n.NodePool == "arm64" && n.Offering.CapacityType != v1.CapacityTypeOnDemand {
			t.Errorf("arm64 node %s is %s; the NodePool allows only on-demand", n.Name, n.Offering.CapacityType)
		}
		if n.NodePool == "arm64" {
			families := map[string]bool{}
			for _, it := range n.InstanceTypes {
				r, _ := it.Requirements.Get("karpenter.k8s.aws/instance-family")
				families[r.Values()[0]] = true
			}
			if len(families) < 3 {
				t.Errorf("arm64 node %s keeps %d families, minValues asks for 3", n.Name, len(families))
			}
		}
	}
}

// The consolidation example: the empty node goes first, the idle ones follow, the
// node with a do-not-disrupt pod stays, and the price falls.
func TestConsolidateExample(t *testing.T) {
	w, err := Load(t.Context(), []string{"../../examples/consolidate/cluster.yaml"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	c, err := Consolidate(w, types, disruption.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	WriteConsolidation(&out, c)
	t.Log("\n" + out.String())
	if len(c.Steps) == 0 || c.Steps[0].Reason != "Empty" || !slices.Equal(c.Steps[0].Nodes, []string{"node-c"}) {
		t.Fatalf("the first step should delete the empty node-c, got %+v", c.Steps)
	}
	for _, s := range c.Steps {
		if slices.Contains(s.Nodes, "node-d") {
			t.Errorf("node-d holds a do-not-disrupt pod but was disrupted: %+v", s)
		}
		if s.Savings <= 0 {
			t.Errorf("step %+v saves nothing", s)
		}
	}
	if len(c.Blocked) != 1 || c.Blocked[0].Node != "node-d" || !strings.Contains(c.Blocked[0].Reason, "do-not-disrupt") {
		t.Errorf("blocked %+v, want node-d for do-not-disrupt", c.Blocked)
	}
	if c.After >= c.Before || c.Nodes[1] >= c.Nodes[0] {
		t.Errorf("price $%.4f → $%.4f, nodes %d → %d", c.Before, c.After, c.Nodes[0], c.Nodes[1])
	}
}

// A PDB that allows no disruption keeps its pods' nodes.
func TestConsolidateHonoursPDB(t *testing.T) {
	w, err := Load(t.Context(), []string{"../../examples/consolidate/cluster.yaml"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w.PodDisruptionBudgets = append(w.PodDisruptionBudgets, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}})
	types, _ := catalog.AWSUSEast1()
	c, err := Consolidate(w, types, disruption.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Steps {
		if slices.Contains(s.Nodes, "node-a") || slices.Contains(s.Nodes, "node-b") {
			t.Errorf("the PDB allows no disruption of web pods, yet %+v", s)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// simulate sees manifests as the controller sees the same cluster (state.Build): a
// NodePool's node still coming up (no karpenter.sh/initialized label) takes pods
// despite its startup and cloud-initialization taints; a pod being deleted is not
// planned for; pods on a node being deleted are; a NodePool being deleted is unused.
func TestSimulateSeesWhatTheControllerSees(t *testing.T) {
	const manifests = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: tailor.sh, kind: SimNodeClass, name: default}
      startupTaints: [{key: agent-not-ready, effect: NoSchedule}]
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: going, deletionTimestamp: "2026-01-01T00:00:00Z", finalizers: [x]}
spec:
  weight: 100
  template:
    spec:
      nodeClassRef: {group: tailor.sh, kind: SimNodeClass, name: default}
---
apiVersion: v1
kind: Node
metadata:
  name: coming-up
  labels: {karpenter.sh/nodepool: default, kubernetes.io/hostname: coming-up, kubernetes.io/arch: amd64, kubernetes.io/os: linux,
    node.kubernetes.io/instance-type: m5.xlarge, topology.kubernetes.io/zone: us-east-1a, karpenter.sh/capacity-type: on-demand}
spec:
  taints:
  - {key: agent-not-ready, effect: NoSchedule}
  - {key: node.cloudprovider.kubernetes.io/uninitialized, value: "true", effect: NoSchedule}
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "58"}
  capacity: {cpu: "4", memory: 16Gi, pods: "58"}
---
apiVersion: v1
kind: Node
metadata:
  name: leaving
  deletionTimestamp: "2026-01-01T00:00:00Z"
  finalizers: [karpenter.sh/termination]
  labels: {karpenter.sh/nodepool: default, kubernetes.io/hostname: leaving}
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "58"}
---
apiVersion: v1
kind: Pod
metadata: {name: evicted-soon, namespace: default}
spec:
  nodeName: leaving
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: new, namespace: default}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: deleted, namespace: default, deletionTimestamp: "2026-01-01T00:00:00Z", finalizers: [x]}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]
`
	path := filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := Load(t.Context(), []string{path}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(w, types, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bound := map[string]string{}
	for _, b := range res.Plan.Bindings {
		bound[b.Pod.Name] = b.Node
	}
	if res.Pods != 2 || bound["new"] != "coming-up" || bound["evicted-soon"] != "coming-up" || len(res.Plan.NewNodes) != 0 {
		t.Errorf("planned for %d pods, bindings %v, %d new nodes; want new and evicted-soon on coming-up and no new node",
			res.Pods, bound, len(res.Plan.NewNodes))
	}
	for _, u := range res.Plan.Unschedulable {
		t.Errorf("unschedulable: %s: %s", u.Pod.Name, u.Reason)
	}
}
