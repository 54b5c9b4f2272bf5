package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/inspect"
)

// The live cluster of the tailor cost and explain tests, priced from
// testdata/inspect/types.json (small.x: 2 cpu, 8Gi, $0.10 on-demand, $0.04 spot;
// big.x: 8 cpu, 32Gi, $0.40 and $0.16), a SimNodeClass with perNodeCost 0.01 and
// NodePool general annotated tailor.sh/per-node-cost 0.005:
//
//	inspect-a  small.x on-demand  0.10 + 0.015 = 0.115  cost-a/web-1 (500m, 1Gi, do-not-disrupt), cost-b/agent-a (DaemonSet, 100m, 128Mi)
//	inspect-b  big.x spot         0.16 + 0.015 = 0.175  cost-a/web-2 (500m, 1Gi), cost-b/db-0 (2, 8Gi)
//	inspect-c  small.x, no NodePool, on-demand: 0.10, no pods
//
// and cost-a/gpu-job pending, selecting accelerator=nvidia, which only NodePool
// gpu's nodes carry, under a taint it does not tolerate.
func inspectCluster(t *testing.T) {
	t.Helper()
	now := time.Now()
	var objs []client.Object
	for _, ns := range []string{"cost-a", "cost-b"} {
		// Kept: with no namespace controller, a deleted namespace never goes.
		if err := kube.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	class := &v1alpha1.SimNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "inspect"}}
	class.Spec.PerNodeCost = "0.01"
	ref := &v1.NodeClassReference{Group: v1alpha1.Group, Kind: "SimNodeClass", Name: "inspect"}
	general := testobj.NodePool("general", testobj.NodeClassRef(ref), testobj.PoolAnnotations(v1alpha1.PerNodeCostAnnotationKey, "0.005"),
		testobj.ConsolidationPolicy(v1.ConsolidationPolicyWhenEmptyOrUnderutilized), testobj.ConsolidateAfter("0s"))
	gpu := testobj.NodePool("gpu", testobj.NodeClassRef(ref), testobj.TemplateLabels("accelerator", "nvidia"),
		testobj.TemplateTaint("nvidia.com/gpu", "true", corev1.TaintEffectNoSchedule))
	for _, np := range []*v1.NodePool{general, gpu} {
		np.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
	}
	objs = append(objs, class, general, gpu)
	since := now.Add(-time.Hour)
	node := func(name, typ, captype, pool, cpu, memory string) *corev1.Node {
		kv := []string{v1.LabelInstanceType, typ, v1.LabelZone, "us-east-1a"}
		if pool != "" {
			kv = append(kv, v1.NodePoolLabelKey, pool, v1.CapacityTypeLabelKey, captype)
		}
		return testobj.Node(name, cpu, memory, testobj.NodeLabels(kv...), testobj.ProviderID("sim://"+name), testobj.NodeReady(corev1.ConditionTrue, since))
	}
	objs = append(objs, node("inspect-a", "small.x", "on-demand", "general", "2", "8Gi"), node("inspect-b", "big.x", "spot", "general", "8", "32Gi"),
		node("inspect-c", "small.x", "", "", "2", "8Gi"))
	for _, n := range []string{"inspect-a", "inspect-b"} {
		objs = append(objs, testobj.NodeClaim("claim-"+n, testobj.ClaimLabels(v1.NodePoolLabelKey, "general"), testobj.ClaimNodeClassRef(ref),
			testobj.ClaimRequirement(v1.LabelInstanceType, v1.NodeSelectorOpIn, "small.x", "big.x"), testobj.ClaimNode("sim://"+n, n), testobj.Initialized(since)))
	}
	objs = append(objs,
		testobj.Pod("web-1", "500m", "1Gi", testobj.Namespace("cost-a"), testobj.NodeName("inspect-a"), testobj.OwnedBy("ReplicaSet", "web-5f7", "rs-uid"),
			testobj.Annotations(v1.DoNotDisruptAnnotationKey, "true"), testobj.Phase(corev1.PodRunning)),
		testobj.Pod("web-2", "500m", "1Gi", testobj.Namespace("cost-a"), testobj.NodeName("inspect-b"), testobj.OwnedBy("ReplicaSet", "web-5f7", "rs-uid"),
			testobj.Phase(corev1.PodRunning)),
		testobj.Pod("db-0", "2", "8Gi", testobj.Namespace("cost-b"), testobj.NodeName("inspect-b"), testobj.Phase(corev1.PodRunning)),
		testobj.Pod("agent-a", "100m", "128Mi", testobj.Namespace("cost-b"), testobj.NodeName("inspect-a"), testobj.OwnedBy("DaemonSet", "agent", "ds-uid"),
			testobj.Phase(corev1.PodRunning)),
		testobj.Pod("gpu-job", "100m", "128Mi", testobj.Namespace("cost-a"), testobj.NodeSelector("accelerator", "nvidia"), testobj.Unschedulable()),
	)
	controller := true
	labels := map[string]string{"app": "web"}
	objs = append(objs, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-5f7", Namespace: "cost-a",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "deploy-uid", Controller: &controller}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}}}}})
	objs = append(objs, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "gpu-job.1", Namespace: "cost-a"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "cost-a", Name: "gpu-job"}, Type: corev1.EventTypeWarning,
		Reason: "FailedScheduling", Message: "No NodePool can provision a node for this pod: NodePool general: …", Source: corev1.EventSource{Component: "tailor"},
		LastTimestamp: metav1.NewTime(now), Count: 1})
	for _, o := range objs {
		createWithStatus(t, o)
	}
}

// createWithStatus creates o and then writes its status, as its controller would,
// and deletes it (finalizers first) when the test ends.
func createWithStatus(t *testing.T, o client.Object) {
	t.Helper()
	want := o.DeepCopyObject().(client.Object)
	if err := kube.Create(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = kube.Patch(ctx, o, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
		_ = kube.Delete(ctx, o, client.GracePeriodSeconds(0))
	})
	switch o := o.(type) {
	case *corev1.Node:
		o.Status = want.(*corev1.Node).Status
	case *corev1.Pod:
		o.Status = want.(*corev1.Pod).Status
	case *v1.NodeClaim:
		o.Status = want.(*v1.NodeClaim).Status
	case *v1.NodePool:
		o.Status = want.(*v1.NodePool).Status
		for i := range o.Status.Conditions {
			o.Status.Conditions[i].ObservedGeneration = o.Generation
		}
	default:
		return
	}
	if err := kube.Status().Update(t.Context(), o); err != nil {
		t.Fatal(err)
	}
}

// runInspect runs a tailor command against the test's API server.
func runInspect(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append(args, "--kubeconfig", kubeconfig, "--instance-types", "testdata/inspect/types.json")
	if code := runStreams(args, streams{in: strings.NewReader(""), out: &out, err: &errOut}); code != 0 {
		t.Fatalf("tailor %s: exit %d\n%s", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

// OpenCost's split of a node's price between its cpu and memory, by hand: the
// node's price over its capacity weighted 0.031611 per core, 0.004237 per GiB.
func share(price, nodeCPU, nodeGiB, cpu, gib float64) float64 {
	w := 0.031611*nodeCPU + 0.004237*nodeGiB
	return price*0.031611/w*cpu + price*0.004237/w*gib
}

func near(a, b float64) bool { return math.Abs(a-b) < 2e-6 }

func TestCost(t *testing.T) {
	inspectCluster(t)
	web1, agent := share(0.115, 2, 8, 0.5, 1), share(0.115, 2, 8, 0.1, 0.125)
	web2, db0 := share(0.175, 8, 32, 0.5, 1), share(0.175, 8, 32, 2, 8)
	// db-0 has a quarter of inspect-b's cpu and memory: a quarter of its price.
	if !near(db0, 0.04375) || !near(web1, 0.023733) {
		t.Fatalf("hand computation: db-0 %.6f, web-1 %.6f", db0, web1)
	}
	for _, tc := range []struct {
		by    string
		lines map[string]float64
	}{
		{inspect.ByNamespace, map[string]float64{"cost-a": web1 + web2, "cost-b": db0 + agent}},
		{inspect.ByWorkload, map[string]float64{"cost-a/Deployment/web": web1 + web2, "cost-b/Pod/db-0": db0, "cost-b/DaemonSet/agent": agent}},
		{inspect.ByNodePool, map[string]float64{"general": web1 + web2 + db0 + agent}},
	} {
		t.Run(tc.by, func(t *testing.T) {
			var rep inspect.CostReport
			if err := json.Unmarshal([]byte(runInspect(t, "cost", "--by", tc.by, "-o", "json")), &rep); err != nil {
				t.Fatal(err)
			}
			tot := rep.Total
			if tot.Nodes != 3 || !near(tot.PerHour, 0.39) || !near(tot.Instances, 0.36) || !near(tot.PerNode, 0.03) ||
				tot.Volumes != 0 || tot.Addresses != 0 || !near(tot.PerMonth, 284.7) {
				t.Errorf("total %+v, want 3 nodes at 0.39/h (instances 0.36, per-node 0.03), 284.70/month", tot)
			}
			want := map[string]inspect.NodeLine{
				"inspect-a": {NodePool: "general", NodeClaim: "claim-inspect-a", Instance: 0.10, PerNode: 0.015, PerHour: 0.115, Pods: 2, Idle: 0.115 - web1 - agent},
				"inspect-b": {NodePool: "general", NodeClaim: "claim-inspect-b", Instance: 0.16, PerNode: 0.015, PerHour: 0.175, Pods: 2, Idle: 0.175 - web2 - db0},
				"inspect-c": {Instance: 0.10, PerHour: 0.10, Idle: 0.10},
			}
			if len(rep.Nodes) != len(want) {
				t.Fatalf("nodes %+v", rep.Nodes)
			}
			for _, n := range rep.Nodes {
				w := want[n.Node]
				if n.NodePool != w.NodePool || n.NodeClaim != w.NodeClaim || !near(n.Instance, w.Instance) || !near(n.PerNode, w.PerNode) ||
					!near(n.PerHour, w.PerHour) || n.Pods != w.Pods || !near(n.Idle, w.Idle) || n.Unpriced != "" {
					t.Errorf("node %s: %+v, want %+v", n.Node, n, w)
				}
			}
			got := map[string]float64{}
			sum := rep.Idle.PerHour
			for _, l := range rep.Lines {
				got[l.Name] = l.PerHour
				sum += l.PerHour
			}
			if len(got) != len(tc.lines) {
				t.Errorf("lines %+v, want %v", rep.Lines, tc.lines)
			}
			for name, v := range tc.lines {
				if !near(got[name], v) {
					t.Errorf("%s: $%.6f/hour, want $%.6f", name, got[name], v)
				}
			}
			if idle := 0.39 - (web1 + web2 + db0 + agent); !near(rep.Idle.PerHour, idle) || !near(sum, 0.39) {
				t.Errorf("idle $%.6f/hour, want $%.6f; lines and idle add up to $%.6f, want the total $0.39", rep.Idle.PerHour, idle, sum)
			}
			if rep.Usage != "requests" {
				t.Errorf("usage %q: no metrics.k8s.io is served here", rep.Usage)
			}
		})
	}
	table := runInspect(t, "cost", "--by", "namespace")
	for _, want := range []string{"inspect-b  general", "3 nodes priced at $0.3900/hour ($284.70/month)", "per-node $0.0300",
		"cost-b", "(idle)", "Pods are charged for the larger of their requests and their usage (requests)"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestExplainPod(t *testing.T) {
	inspectCluster(t)
	t.Run("bound", func(t *testing.T) {
		var ex inspect.PodExplanation
		if err := json.Unmarshal([]byte(runInspect(t, "explain", "pod", "cost-b/db-0", "-o", "json")), &ex); err != nil {
			t.Fatal(err)
		}
		if ex.Pending || ex.Node == nil || ex.Node.Node != "inspect-b" || ex.NodeClaim != "claim-inspect-b" || !near(ex.Node.PerHour, 0.175) {
			t.Fatalf("%+v", ex)
		}
		if !strings.Contains(ex.Why, "NodeClaim claim-inspect-b of NodePool general") {
			t.Errorf("why the node exists: %q", ex.Why)
		}
		if c := ex.Cost; c == nil || !near(c.PerHour, 0.04375) || !near(c.PerMonth, 0.04375*730) || c.CPU != 2 || c.Memory != 8 || c.Basis != "requests" {
			t.Errorf("cost %+v, want a quarter of inspect-b: $0.04375/hour", ex.Cost)
		}
	})
	t.Run("pending", func(t *testing.T) {
		var ex inspect.PodExplanation
		if err := json.Unmarshal([]byte(runInspect(t, "explain", "pod", "cost-a/gpu-job", "-o", "json")), &ex); err != nil {
			t.Fatal(err)
		}
		if !ex.Pending || ex.Plan != "no NodePool can launch a node for it" {
			t.Fatalf("%+v", ex)
		}
		fixes := map[string]string{}
		for _, r := range ex.Reasons {
			fixes[r.NodePool] = r.Reason + " → " + r.Fix
		}
		if !strings.Contains(fixes["gpu"], "nvidia.com/gpu=true:NoSchedule not tolerated") || !strings.Contains(fixes["gpu"], "add a matching toleration") {
			t.Errorf("NodePool gpu: %q", fixes["gpu"])
		}
		if !strings.Contains(fixes["general"], "accelerator") || !strings.Contains(fixes["general"], "nodeSelector") {
			t.Errorf("NodePool general: %q", fixes["general"])
		}
		if len(ex.Events) != 1 || ex.Events[0].Reason != "FailedScheduling" {
			t.Errorf("events %+v", ex.Events)
		}
		table := runInspect(t, "explain", "pod", "cost-a/gpu-job")
		if !strings.Contains(table, "NodePool gpu: taint nvidia.com/gpu=true:NoSchedule not tolerated\n    to fit: ") {
			t.Errorf("table:\n%s", table)
		}
	})
}

func TestExplainNode(t *testing.T) {
	inspectCluster(t)
	var ex inspect.NodeExplanation
	if err := json.Unmarshal([]byte(runInspect(t, "explain", "node", "inspect-a", "-o", "json")), &ex); err != nil {
		t.Fatal(err)
	}
	if ex.Node.NodeClaim != "claim-inspect-a" || ex.Node.NodePool != "general" || !near(ex.Node.PerHour, 0.115) {
		t.Errorf("node %+v", ex.Node)
	}
	// web-1's do-not-disrupt holds the node; the disruption loop says so.
	if ex.Blocked != "Pods" || !strings.Contains(ex.Disruption, "pod cost-a/web-1 is annotated karpenter.sh/do-not-disrupt") {
		t.Errorf("disruption %q (blocked %q)", ex.Disruption, ex.Blocked)
	}
	// Without it, web-1 moves onto inspect-b (the DaemonSet pod does not move): the
	// whole $0.115 is saved.
	if r := ex.Replacement; r == nil || r.Moved != 1 || r.OntoExisting != 1 || len(r.NewNodes) != 0 || !near(r.Saving, 0.115) {
		t.Errorf("replacement %+v", ex.Replacement)
	}
	// inspect-b's pods fit on the others (db-0 exactly fills inspect-c), so the
	// next disruption deletes it, saving its whole price.
	var b inspect.NodeExplanation
	if err := json.Unmarshal([]byte(runInspect(t, "explain", "node", "inspect-b", "-o", "json")), &b); err != nil {
		t.Fatal(err)
	}
	if r := b.Replacement; !strings.HasPrefix(b.Disruption, "Tailor's next disruption would delete it now") || r == nil ||
		r.Moved != 2 || r.OntoExisting != 2 || !near(r.Saving, 0.175) {
		t.Errorf("inspect-b: %q, replacement %+v", b.Disruption, b.Replacement)
	}
	var other inspect.NodeExplanation
	if err := json.Unmarshal([]byte(runInspect(t, "explain", "node", "inspect-c", "-o", "json")), &other); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(other.Why, "not launched by Tailor") || other.Disruption != "not Tailor's to disrupt: it has no NodeClaim" || !near(other.Node.PerHour, 0.10) {
		t.Errorf("%+v", other)
	}
}
