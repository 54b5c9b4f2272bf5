package e2e

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := kube.Create(t.Context(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
		t.Cleanup(func() { _ = kube.Delete(context.Background(), o) })
	}
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	eventuallyExplained(t, timeout, what, cond, func() string { return "" })
}

// eventuallyExplained is eventually with more to say when it fails: explain's
// text (the control plane's side of it, say) follows the last state.
func eventuallyExplained(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string), explain func() string) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, state := cond(ctx)
		// A call at the poll's deadline fails on the deadline (client-go's rate
		// limiter refuses to wait past it) and says nothing about the cluster:
		// keep the state seen before it.
		if deadline, has := ctx.Deadline(); !has || time.Until(deadline) > 2*time.Second || last == "" {
			last = state
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within %s; last state: %s\n%s", what, timeout, last, explain())
	}
}

// The seed example end to end: a Deployment of 10 replicas of 1 cpu and 1Gi, from 0
// to all Running on nodes Tailor launched.
func TestDeploymentScalesUp(t *testing.T) {
	create(t, nodeClass("default"), nodePool("default", "default", testobj.TemplateLabels("pool", "default")))
	create(t, testobj.Deployment("inflate", 10, "1", "1Gi", onPool("default")))
	eventually(t, 3*time.Minute, "10 inflate pods running", func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := kube.List(ctx, pods, client.MatchingLabels{"app": "inflate"}); err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 10, fmt.Sprintf("%d of %d pods running", running, len(pods.Items))
	})
	claims := &v1.NodeClaimList{}
	if err := kube.List(t.Context(), claims, client.MatchingLabels{v1.NodePoolLabelKey: "default"}); err != nil {
		t.Fatal(err)
	}
	if len(claims.Items) == 0 {
		t.Fatal("no NodeClaims")
	}
	for _, nc := range claims.Items {
		for _, cond := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized, v1.ConditionTypeReady} {
			if !meta.IsStatusConditionTrue(nc.Status.Conditions, cond) {
				t.Errorf("NodeClaim %s is not %s: %v", nc.Name, cond, nc.Status.Conditions)
			}
		}
		node := &corev1.Node{}
		if err := kube.Get(t.Context(), client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
			t.Errorf("NodeClaim %s: node %q: %v", nc.Name, nc.Status.NodeName, err)
			continue
		}
		if node.Labels[v1.NodePoolLabelKey] != "default" || node.Labels[v1.NodeInitializedLabelKey] != "true" || node.Labels[v1.NodeRegisteredLabelKey] != "true" {
			t.Errorf("node %s labels %v", node.Name, node.Labels)
		}
		for _, taint := range node.Spec.Taints {
			if taint.Key == v1.UnregisteredNoExecuteTaint.Key {
				t.Errorf("node %s still has %s", node.Name, taint.Key)
			}
		}
	}
	// The metrics tell the same story.
	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`karpenter_nodeclaims_created_total{min_values_relaxed="false",nodepool="default",reason="provisioned"}`,
		"karpenter_scheduler_scheduling_duration_seconds_count", "karpenter_cloudprovider_duration_seconds_count",
		`karpenter_nodepools_usage{nodepool="default",resource_type="cpu"}`, "tailor_cluster_price_per_hour "} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// Tailor provisions once: the pods fit the nodes of the first plan.
	time.Sleep(3 * time.Second)
	again := &v1.NodeClaimList{}
	if err := kube.List(t.Context(), again, client.MatchingLabels{v1.NodePoolLabelKey: "default"}); err != nil {
		t.Fatal(err)
	}
	if len(again.Items) != len(claims.Items) {
		t.Errorf("%d NodeClaims after the pods ran, %d before: provisioned twice", len(again.Items), len(claims.Items))
	}
}

// Mixed Deployments scaled from 0 at once: every pod runs on a node of the NodePool,
// and the nodes launched for them are the plan the scheduling engine makes for the
// same pods on an empty NodePool: as many nodes, of the same instance types, at the
// same price. (A node made later for a pod the kube-scheduler put somewhere other
// than planned is logged, not counted: where it binds is the kube-scheduler's call.)
func TestMixedDeploymentsMatchThePlan(t *testing.T) {
	taint := corev1.Taint{Key: "dedicated", Value: "mixed", Effect: corev1.TaintEffectNoSchedule}
	create(t, nodeClass("mixed"), nodePool("mixed", "mixed", testobj.TemplateLabels("pool", "mixed"),
		// Its own taint, so no other test's pods join the batch; spot only, so no
		// offering another test made unavailable is in the plan.
		testobj.TemplateTaint(taint.Key, taint.Value, taint.Effect),
		testobj.Requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeSpot)))
	only := testobj.Template(testobj.NodeSelector("pool", "mixed"), testobj.Toleration(taint.Key, taint.Value, taint.Effect))
	shapes := []struct {
		app         string
		replicas    int32
		cpu, memory string
	}{{"mixed-small", 9, "250m", "512Mi"}, {"mixed-medium", 5, "1", "2Gi"}, {"mixed-large", 3, "1500m", "6Gi"}}
	var apps []string
	want := 0
	for _, s := range shapes {
		create(t, testobj.Deployment(s.app, 0, s.cpu, s.memory, only))
		apps = append(apps, s.app)
		want += int(s.replicas)
	}
	for _, s := range shapes {
		scale(t, s.app, s.replicas)
	}
	for _, s := range shapes {
		for _, n := range nodesOf(t, s.app, int(s.replicas)) {
			if n.Labels[v1.NodePoolLabelKey] != "mixed" {
				t.Errorf("a pod of %s runs on node %s of NodePool %q", s.app, n.Name, n.Labels[v1.NodePoolLabelKey])
			}
		}
	}
	plan, its := freshPlan(t, "mixed", apps...)
	claims := &v1.NodeClaimList{}
	if err := kube.List(t.Context(), claims, client.MatchingLabels{v1.NodePoolLabelKey: "mixed"}); err != nil {
		t.Fatal(err)
	}
	// Each planned node is a claim asking for the same resources, launched as the
	// plan's cheapest type at the plan's price.
	unmatched := slices.Clone(claims.Items)
	price := 0.0
	for _, n := range plan.NewNodes {
		i := slices.IndexFunc(unmatched, func(nc v1.NodeClaim) bool {
			return nc.Labels[v1.LabelInstanceType] == n.InstanceType.Name && sameRequests(nc.Spec.Resources.Requests, n.Requests)
		})
		if i < 0 {
			t.Errorf("no NodeClaim for the planned %s node with %d pods (requests %v)", n.InstanceType.Name, len(n.Pods), n.Requests)
			continue
		}
		p, ok := scheduling.OfferingPrice(its, unmatched[i].Labels)
		if !ok {
			t.Errorf("NodeClaim %s launched an offering the catalog does not sell: %v", unmatched[i].Name, unmatched[i].Labels)
		}
		price += p
		unmatched = slices.Delete(unmatched, i, i+1)
	}
	if math.Abs(price-plan.Cost()) > 1e-6 {
		t.Errorf("the planned nodes cost $%.4f/hour as launched, $%.4f/hour in the plan", price, plan.Cost())
	}
	// A pod the kube-scheduler puts on a node other than planned can take another's
	// room; a node made for that one is logged. A handful at most.
	for _, nc := range unmatched {
		t.Logf("NodeClaim %s (%s, requests %v) was made later, for a pod whose room the kube-scheduler gave another", nc.Name,
			nc.Labels[v1.LabelInstanceType], nc.Spec.Resources.Requests)
	}
	if len(unmatched) > 2 {
		t.Errorf("%d NodeClaims beyond the plan's %d", len(unmatched), len(plan.NewNodes))
	}
	t.Logf("%d pods; the plan's %d nodes launched as planned at $%.4f/hour", want, len(plan.NewNodes), price)
}

// sameRequests compares the cpu and memory of two request lists.
func sameRequests(a, b corev1.ResourceList) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		qa, qb := a[name], b[name]
		if qa.Cmp(qb) != 0 {
			return false
		}
	}
	return true
}
