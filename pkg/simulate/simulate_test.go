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

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/disruption"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

func TestMixedManifests(t *testing.T) {
	w, err := Load(t.Context(), []string{"testdata/mixed.yaml"}, Limits{})
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

func TestInvalidNodePoolGetsTheCRDMessage(t *testing.T) {
	_, err := Load(t.Context(), []string{"testdata/bad-nodepool.yaml"}, Limits{})
	if err == nil {
		t.Fatal("accepted an invalid NodePool")
	}
	for _, want := range []string{"testdata/bad-nodepool.yaml: document 1", `NodePool.karpenter.sh "broken" is invalid`,
		"spec.template.spec.requirements", "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
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
	w, err := Load(t.Context(), []string{dir}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Pods) != 6 || len(w.NodePools) != 1 {
		t.Errorf("read %d pods and %d NodePools from the gzipped file, want 6 and 1", len(w.Pods), len(w.NodePools))
	}
}

func TestBadInput(t *testing.T) {
	for name, tc := range map[string]struct{ yaml, want string }{
		"no kind":        {"apiVersion: v1\nmetadata: {name: x}\n", "document 1: apiVersion and kind are required"},
		"bad field":      {"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: many}\n", "document 1: Deployment web"},
		"not yaml":       {"apiVersion: v1\nkind: Pod\n  bad: [indent\n", "document 1"},
		"unknown node":   {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: ghost, containers: [{name: c, image: x}]}\n", "pods are bound to nodes not in the input: ghost"},
		"NodePool twice": {"apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec: {template: {spec: {nodeClassRef: {group: g, kind: K, name: default}}}}\n---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: a}\nspec: {template: {spec: {nodeClassRef: {group: g, kind: K, name: default}}}}\n", "NodePool a is defined twice"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(t.Context(), []string{path}, Limits{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
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
	w, err := Load(t.Context(), []string{"../../examples/seed"}, Limits{})
	if err != nil {
		t.Fatal(err)
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

	w, err = Load(t.Context(), []string{"../../examples/aws"}, Limits{})
	if err != nil {
		t.Fatal(err)
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
	w, err := Load(t.Context(), []string{"../../examples/consolidate/cluster.yaml"}, Limits{})
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
	w, err := Load(t.Context(), []string{"../../examples/consolidate/cluster.yaml"}, Limits{})
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
	w, err := Load(t.Context(), []string{path}, Limits{})
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
