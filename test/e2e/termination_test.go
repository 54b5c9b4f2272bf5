package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
)

// runningOn waits for n pods of app to run and returns the nodes they run on.
func runningOn(t *testing.T, app string, n int) map[string]int {
	t.Helper()
	nodes := map[string]int{}
	eventually(t, 3*time.Minute, fmt.Sprintf("%d %s pods running", n, app), func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := kube.List(ctx, pods, client.MatchingLabels{"app": app}); err != nil {
			return false, err.Error()
		}
		clear(nodes)
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running++
				nodes[p.Spec.NodeName]++
			}
		}
		return running == n, fmt.Sprintf("%d of %d running", running, len(pods.Items))
	})
	return nodes
}

func claimOfNode(t *testing.T, node string) *v1.NodeClaim {
	t.Helper()
	claims := &v1.NodeClaimList{}
	if err := kube.List(t.Context(), claims); err != nil {
		t.Fatal(err)
	}
	for i := range claims.Items {
		if claims.Items[i].Status.NodeName == node {
			return &claims.Items[i]
		}
	}
	t.Fatalf("no NodeClaim for node %s", node)
	return nil
}

func gone(ctx context.Context, o client.Object) bool {
	err := kube.Get(ctx, client.ObjectKeyFromObject(o), o)
	return apierrors.IsNotFound(err)
}

// Deleting a NodeClaim drains its node through the Eviction API, holds while a
// PodDisruptionBudget says no, then removes the node and terminates the instance.
func TestDeleteNodeClaimDrainsHonouringPDB(t *testing.T) {
	create(t, nodeClass("drain"), nodePool("drain", "drain", testobj.TemplateLabels("pool", "drain")))
	create(t, testobj.Deployment("guarded", 2, "500m", "512Mi", onPool("drain")))
	nodes := runningOn(t, "guarded", 2)
	minAvailable := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &minAvailable, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "guarded"}}}}
	create(t, pdb)
	var node string
	for n := range nodes {
		node = n
	}
	claim := claimOfNode(t, node)
	if err := kube.Delete(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	// The PDB holds the drain: the node is tainted, the pods stay.
	eventually(t, time.Minute, "node tainted karpenter.sh/disrupted", func(ctx context.Context) (bool, string) {
		n := &corev1.Node{}
		if err := kube.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err.Error()
		}
		for _, taint := range n.Spec.Taints {
			if taint.Key == v1.DisruptedNoScheduleTaint.Key {
				return true, ""
			}
		}
		return false, fmt.Sprintf("taints %v", n.Spec.Taints)
	})
	time.Sleep(5 * time.Second)
	if gone(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}) {
		t.Fatal("the node went although the PodDisruptionBudget allowed no eviction")
	}
	if running := runningOn(t, "guarded", 2); running[node] == 0 {
		t.Fatalf("pods left %s despite the PodDisruptionBudget: %v", node, running)
	}
	// Relax the budget: the drain completes, the pods move, the node and instance go.
	if err := kube.Get(t.Context(), client.ObjectKeyFromObject(pdb), pdb); err != nil {
		t.Fatal(err)
	}
	one := intstr.FromInt32(1)
	pdb.Spec.MinAvailable = &one
	if err := kube.Update(t.Context(), pdb); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "node and NodeClaim gone", func(ctx context.Context) (bool, string) {
		nodeGone := gone(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
		claimGone := gone(ctx, &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim.Name}})
		return nodeGone && claimGone, fmt.Sprintf("node gone %v, claim gone %v", nodeGone, claimGone)
	})
	if exists, err := provider.hasInstance(t.Context(), claim); err != nil || exists {
		t.Errorf("the instance of the deleted claim %s still exists (%v)", claim.Name, err)
	}
	after := runningOn(t, "guarded", 2)
	if after[node] != 0 {
		t.Errorf("pods still on the removed node: %v", after)
	}
}

// A node running DaemonSet pods that tolerate every taint (the harness's kube-proxy
// and log agent) goes once its claim is deleted: those pods are left to go with
// the node, not evicted and waited for while their DaemonSet puts them back.
func TestTerminationAroundTolerateEverythingDaemonSets(t *testing.T) {
	create(t, nodeClass("tolerant"), nodePool("tolerant", "tolerant", testobj.TemplateLabels("pool", "tolerant")))
	create(t, testobj.Deployment("tolerant", 1, "500m", "512Mi", onPool("tolerant")))
	var node string
	for n := range runningOn(t, "tolerant", 1) {
		node = n
	}
	eventuallyExplained(t, 2*time.Minute, "kube-proxy and log-agent running on "+node, func(ctx context.Context) (bool, string) {
		pods := &corev1.PodList{}
		if err := kube.List(ctx, pods, client.InNamespace("kube-system")); err != nil {
			return false, err.Error()
		}
		running := map[string]bool{}
		var seen []string // the node's daemon pods, to tell a missing pod from an unbound or unstarted one
		for _, p := range pods.Items {
			if p.Spec.NodeName != node && daemonTarget(&p) != node {
				continue
			}
			seen = append(seen, fmt.Sprintf("%s node=%q phase=%s deleting=%v scheduled=%s",
				p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil, scheduledCondition(&p)))
			if p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
				running[p.Labels["daemon"]] = true
			}
		}
		return running["kube-proxy"] && running["log-agent"], fmt.Sprintf("running %v; the node's daemon pods: %v", running, seen)
	}, func() string { return daemonSetsExplained(node) })
	claim := claimOfNode(t, node)
	if err := kube.Delete(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "node and NodeClaim gone", func(ctx context.Context) (bool, string) {
		nodeGone := gone(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
		claimGone := gone(ctx, &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim.Name}})
		return nodeGone && claimGone, fmt.Sprintf("node gone %v, claim gone %v", nodeGone, claimGone)
	})
	if exists, err := provider.hasInstance(t.Context(), claim); err != nil || exists {
		t.Errorf("the instance of the deleted claim %s still exists (%v)", claim.Name, err)
	}
	// The application moved to a new node.
	if after := runningOn(t, "tolerant", 1); after[node] != 0 {
		t.Errorf("the pod is still on the removed node: %v", after)
	}
}

// daemonTarget is the node a DaemonSet pod is made for: the DaemonSet controller
// pins it by a required node affinity on the node's name.
func daemonTarget(p *corev1.Pod) string {
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

func scheduledCondition(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return fmt.Sprintf("%s(%s: %s)", c.Status, c.Reason, c.Message)
		}
	}
	return "none"
}

// daemonSetsExplained is what the control plane says of the DaemonSets and node:
// the DaemonSets' status, kube-system's events, the components' log lines naming
// the node.
func daemonSetsExplained(node string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	dss := &appsv1.DaemonSetList{}
	if err := kube.List(ctx, dss, client.InNamespace("kube-system")); err != nil {
		fmt.Fprintf(&b, "listing DaemonSets: %v\n", err)
	}
	for _, ds := range dss.Items {
		st := ds.Status
		fmt.Fprintf(&b, "DaemonSet %s: desired %d, scheduled %d, ready %d, misscheduled %d, generation %d observed %d\n",
			ds.Name, st.DesiredNumberScheduled, st.CurrentNumberScheduled, st.NumberReady, st.NumberMisscheduled, ds.Generation, st.ObservedGeneration)
	}
	events := &corev1.EventList{}
	if err := kube.List(ctx, events, client.InNamespace("kube-system")); err != nil {
		fmt.Fprintf(&b, "listing events: %v\n", err)
	}
	slices.SortFunc(events.Items, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	for _, e := range events.Items[max(0, len(events.Items)-30):] {
		fmt.Fprintf(&b, "event %s %s %s/%s %s: %s\n", eventTime(e).Format(time.StampMilli), e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
	}
	b.WriteString(controlPlane.LogLines(node, 20))
	return b.String()
}

// eventTime is when an event last happened: the scheduler's events carry only an
// EventTime, the controllers' a LastTimestamp.
func eventTime(e corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	return e.EventTime.Time
}
