package disruption

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

// RepairPolicy says a node is broken: its condition has held the status for longer
// than the toleration. Each cloud provider has its own (see
// cloudprovider.RepairPolicy).
type RepairPolicy = cloudprovider.RepairPolicy

// KubeletRepairPolicies are Karpenter's policies for the condition every kubelet
// reports: Ready False or Unknown (the kubelet stopped reporting) for 30 minutes.
var KubeletRepairPolicies = cloudprovider.KubeletRepairPolicies

// MaxUnhealthyPercent is Karpenter's safety rule: with more than this share of a
// NodePool's nodes unhealthy (rounded up, as a PDB rounds maxUnavailable), the
// cause is likely not the nodes (a network or control-plane outage, a bad image)
// and replacing them would only add churn, so nothing in the NodePool is repaired.
const MaxUnhealthyPercent = 20

// RepairInput is what a node repair pass sees.
type RepairInput struct {
	Now      time.Time
	Nodes    []*corev1.Node
	Claims   []*v1.NodeClaim
	Policies []RepairPolicy
	// Manages reports whether a claim is the running provider's; nil means all are.
	Manages func(*v1.NodeClaim) bool
}

// Repair is a claim to delete at once, its node broken past its toleration.
type Repair struct {
	Claim     *v1.NodeClaim
	Node      *corev1.Node
	Condition corev1.NodeCondition
	Policy    RepairPolicy
}

// RepairBlocked is a broken node left alone, and why.
type RepairBlocked struct {
	Claim  *v1.NodeClaim
	Node   *corev1.Node
	Reason string
}

// RepairDecision is the outcome of a repair pass.
type RepairDecision struct {
	Repairs []Repair
	Blocked []RepairBlocked
	// Next is when the first node now unhealthy reaches its toleration; zero if none.
	Next time.Time
}

// DecideRepairs picks the claims whose nodes have been unhealthy, as a policy says,
// for longer than its toleration; claims being deleted and other providers' claims
// are left alone. A claim without a NodePool is held to the whole cluster's share
// of unhealthy nodes.
func DecideRepairs(in *RepairInput) *RepairDecision {
	dec := &RepairDecision{}
	byID := make(map[string]*corev1.Node, len(in.Nodes))
	// Counts by NodePool; "" counts the whole cluster, for claims without a pool.
	total, unhealthy := map[string]int{}, map[string]int{}
	for _, n := range in.Nodes {
		if n.Spec.ProviderID != "" {
			byID[n.Spec.ProviderID] = n
		}
		sick := slices.ContainsFunc(in.Policies, func(p RepairPolicy) bool { return matches(n, p) != nil })
		for _, scope := range slices.Compact([]string{"", n.Labels[v1.NodePoolLabelKey]}) {
			total[scope]++
			if sick {
				unhealthy[scope]++
			}
		}
	}
	for _, nc := range in.Claims {
		if nc.DeletionTimestamp != nil || in.Manages != nil && !in.Manages(nc) {
			continue
		}
		node := byID[nc.Status.ProviderID]
		if node == nil {
			continue
		}
		cond, policy, due, ok := firstDue(node, in.Policies)
		if !ok {
			continue
		}
		if in.Now.Before(due) {
			if dec.Next.IsZero() || due.Before(dec.Next) {
				dec.Next = due
			}
			continue
		}
		pool := nc.Labels[v1.NodePoolLabelKey]
		if allowed := maxUnhealthy(total[pool]); unhealthy[pool] > allowed {
			scope := "the cluster"
			if pool != "" {
				scope = "NodePool " + pool
			}
			dec.Blocked = append(dec.Blocked, RepairBlocked{Claim: nc, Node: node, Reason: fmt.Sprintf(
				"%d of the %d nodes of %s are unhealthy, more than %d%%: nothing there is repaired until fewer are",
				unhealthy[pool], total[pool], scope, MaxUnhealthyPercent)})
			continue
		}
		dec.Repairs = append(dec.Repairs, Repair{Claim: nc, Node: node, Condition: cond, Policy: policy})
	}
	slices.SortFunc(dec.Repairs, func(a, b Repair) int { return strings.Compare(a.Claim.Name, b.Claim.Name) })
	slices.SortFunc(dec.Blocked, func(a, b RepairBlocked) int { return strings.Compare(a.Claim.Name, b.Claim.Name) })
	return dec
}

// maxUnhealthy is how many of total nodes may be unhealthy and still be repaired.
func maxUnhealthy(total int) int {
	return int(math.Ceil(float64(total) * MaxUnhealthyPercent / 100))
}

// firstDue finds the node's unhealthy condition whose toleration runs out first.
func firstDue(n *corev1.Node, policies []RepairPolicy) (corev1.NodeCondition, RepairPolicy, time.Time, bool) {
	var (
		cond   corev1.NodeCondition
		policy RepairPolicy
		due    time.Time
		found  bool
	)
	for _, p := range policies {
		c := matches(n, p)
		if c == nil {
			continue
		}
		if at := c.LastTransitionTime.Add(p.Toleration); !found || at.Before(due) {
			cond, policy, due, found = *c, p, at, true
		}
	}
	return cond, policy, due, found
}

// matches returns the node's condition of the policy's type if it has the policy's
// status.
func matches(n *corev1.Node, p RepairPolicy) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if c := &n.Status.Conditions[i]; c.Type == p.ConditionType {
			if c.Status == p.ConditionStatus {
				return c
			}
			return nil
		}
	}
	return nil
}
