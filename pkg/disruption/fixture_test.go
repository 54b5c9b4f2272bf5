package disruption

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// cluster builds disruption inputs: nodes of the synthetic catalog (type i has i+1
// cpu), each with its claim, in one NodePool "default".
type cluster struct {
	t     testing.TB
	types []*scheduling.InstanceType
	pool  *v1.NodePool
	in    *Input
	n     int
}

func newCluster(t testing.TB) *cluster {
	np := testobj.NodePool("default",
		testobj.PoolAnnotations(v1.NodePoolHashAnnotationKey, "h1", v1.NodePoolHashVersionAnnotationKey, "v1"),
		testobj.ConsolidationPolicy(v1.ConsolidationPolicyWhenEmptyOrUnderutilized), testobj.ConsolidateAfter("30s"), testobj.Budgets("100%"),
		testobj.Requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeOnDemand))
	types := schedtest.SyntheticTypes(32)
	c := &cluster{t: t, types: types, pool: np, in: &Input{Now: now, Cluster: &scheduling.Input{
		NodePools: []*scheduling.NodePool{{NodePool: np, InstanceTypes: types}}}}}
	return c
}

// node adds a registered, initialized node of type index typ an hour old.
func (c *cluster) node(typ int, captype string, pods ...*corev1.Pod) *scheduling.Node {
	c.n++
	name := fmt.Sprintf("node-%d", c.n)
	it := c.types[typ]
	hourAgo := now.Add(-time.Hour)
	n := testobj.Node(name, "", "", testobj.ProviderID("fake:///"+name), testobj.NodeCapacity(it.Capacity, it.Allocatable()),
		testobj.NodeReady(corev1.ConditionTrue, hourAgo), testobj.NodeLabels(
			v1.LabelInstanceType, it.Name, v1.LabelZone, "zone-a", v1.CapacityTypeLabelKey, captype, v1.NodePoolLabelKey, c.pool.Name,
			v1.LabelArch, "amd64", v1.LabelOS, "linux", "example.com/cpu", fmt.Sprint(typ+1)))
	for _, p := range pods {
		p.Spec.NodeName = name
	}
	sn := &scheduling.Node{Node: n, Pods: pods}
	c.in.Cluster.Nodes = append(c.in.Cluster.Nodes, sn)
	nc := testobj.NodeClaim("claim-"+name, testobj.ClaimLabels(v1.NodePoolLabelKey, c.pool.Name),
		testobj.ClaimAnnotations(v1.NodePoolHashAnnotationKey, "h1", v1.NodePoolHashVersionAnnotationKey, "v1"),
		testobj.ClaimNode(n.Spec.ProviderID, name), testobj.Initialized(hourAgo))
	nc.CreationTimestamp = metav1.NewTime(hourAgo)
	c.in.Claims = append(c.in.Claims, nc)
	return sn
}

// setReady sets the node's Ready condition as its kubelet (or the node lifecycle
// controller, for Unknown) would.
func setReady(n *scheduling.Node, status corev1.ConditionStatus) {
	for i := range n.Node.Status.Conditions {
		if n.Node.Status.Conditions[i].Type == corev1.NodeReady {
			n.Node.Status.Conditions[i].Status = status
		}
	}
}

// uninitialize makes the claim registered but not initialized, as a node coming up
// (or stuck coming up) is.
func (c *cluster) uninitialize(n *scheduling.Node) {
	nc := c.claim(n)
	meta.RemoveStatusCondition(&nc.Status.Conditions, v1.ConditionTypeInitialized)
}

func (c *cluster) claim(n *scheduling.Node) *v1.NodeClaim {
	for _, nc := range c.in.Claims {
		if nc.Status.ProviderID == n.Node.Spec.ProviderID {
			return nc
		}
	}
	c.t.Fatalf("no claim for %s", n.Node.Name)
	return nil
}

func (c *cluster) price() float64 {
	total := 0.0
	for _, n := range c.in.Cluster.Nodes {
		p, _ := scheduling.OfferingPrice(c.types, n.Node.Labels)
		total += p
	}
	return total
}

// apply carries a command out as the controller would: the replacements come up,
// the candidates go, and their pods land where the kube-scheduler would put them.
func (c *cluster) apply(cmd *Command) {
	c.t.Helper()
	var moved []*corev1.Pod
	gone := map[string]bool{}
	for _, cand := range cmd.Candidates {
		gone[cand.Node.Node.Name] = true
		moved = append(moved, cand.movedPods()...)
	}
	var nodes []*scheduling.Node
	for _, n := range c.in.Cluster.Nodes {
		if !gone[n.Node.Name] {
			nodes = append(nodes, n)
		}
	}
	var claims []*v1.NodeClaim
	for _, nc := range c.in.Claims {
		if !gone[nc.Status.NodeName] {
			claims = append(claims, nc)
		}
	}
	c.in.Cluster.Nodes, c.in.Claims = nodes, claims
	for _, r := range cmd.Replacements {
		typ := -1
		for i, it := range c.types {
			if it == r.InstanceType {
				typ = i
			}
		}
		c.node(typ, r.Offering.CapacityType)
	}
	in := *c.in.Cluster
	in.Pods = moved
	plan, err := scheduling.Solve(&in, scheduling.Options{})
	if err != nil || len(plan.NewNodes) > 0 || len(plan.Unschedulable) > 0 {
		c.t.Fatalf("applying %s: pods did not land on the cluster as planned (err %v, %d new nodes, %d unschedulable)",
			cmd, err, len(plan.NewNodes), len(plan.Unschedulable))
	}
	byName := map[string]*scheduling.Node{}
	for _, n := range c.in.Cluster.Nodes {
		byName[n.Node.Name] = n
	}
	for _, b := range plan.Bindings {
		b.Pod.Spec.NodeName = b.Node
		byName[b.Node].Pods = append(byName[b.Node].Pods, b.Pod)
	}
}

// freshPlan is the engine's plan of the cluster's running pods on no nodes.
func (c *cluster) freshPlan() *scheduling.Plan {
	c.t.Helper()
	var left []*corev1.Pod
	for _, n := range c.in.Cluster.Nodes {
		for _, p := range n.Pods {
			cp := *p
			cp.Spec.NodeName = ""
			left = append(left, &cp)
		}
	}
	fresh := *c.in.Cluster
	fresh.Nodes, fresh.Pods = nil, left
	plan, err := scheduling.Solve(&fresh, scheduling.Options{})
	if err != nil {
		c.t.Fatal(err)
	}
	return plan
}

var podSeq int

// pod is a running pod of app web, named and with a UID of its own.
func pod(cpu, mem string, opts ...testobj.PodOption) *corev1.Pod {
	podSeq++
	base := []testobj.PodOption{testobj.UID(types.UID(fmt.Sprint("uid-", podSeq))), testobj.Labels("app", "web"), testobj.Phase(corev1.PodRunning)}
	return testobj.Pod(fmt.Sprintf("pod-%d", podSeq), cpu, mem, append(base, opts...)...)
}

var daemon = testobj.OwnedBy("DaemonSet", "logs", "")

func names(cands []*Candidate) []string {
	out := make([]string, len(cands))
	for i, c := range cands {
		out[i] = c.Node.Node.Name
	}
	return out
}
