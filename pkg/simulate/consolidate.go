package simulate

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/disruption"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// Step is one disruption command of a consolidation run.
type Step struct {
	Decision     string   `json:"decision"`
	Reason       string   `json:"reason"`
	Kind         string   `json:"kind"`
	Nodes        []string `json:"nodes"`
	Replacements []string `json:"replacements"`
	Savings      float64  `json:"savings_per_hour"`
}

// Consolidation is what disruption would do to the existing nodes, pass after pass,
// until nothing is left to do.
type Consolidation struct {
	Steps   []Step    `json:"steps"`
	Blocked []Blocked `json:"blocked"`
	Before  float64   `json:"price_per_hour_before"`
	After   float64   `json:"price_per_hour_after"`
	Nodes   [2]int    `json:"-"`
	Seconds float64   `json:"decision_seconds"`
}

// consolidationView is a Consolidation as printed: its node counts by name, and
// empty lists as [].
type consolidationView struct {
	Consolidation
	NodesBefore int `json:"nodes_before"`
	NodesAfter  int `json:"nodes_after"`
}

// Object is the run as printed by WriteJSON and WriteYAML.
func (c *Consolidation) Object() any {
	v := consolidationView{Consolidation: *c, NodesBefore: c.Nodes[0], NodesAfter: c.Nodes[1]}
	v.Steps = make([]Step, len(c.Steps))
	for i, s := range c.Steps {
		s.Nodes, s.Replacements = nonNil(s.Nodes), nonNil(s.Replacements)
		v.Steps[i] = s
	}
	if v.Blocked == nil {
		v.Blocked = []Blocked{}
	}
	return v
}

// nonNil makes an empty list print as [] rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Blocked is a node left alone, and why.
type Blocked struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// MaxPasses bounds a consolidation run.
const MaxPasses = 200

// Consolidate runs the controller's disruption decisions on the workload's existing
// nodes (those labelled with a NodePool of the input) as if the budgets allowed one
// command after another, and applies each: candidates go, replacements come, their
// pods land where the scheduling engine puts them. Pending pods are left out. PDBs
// count their pods as healthy.
func Consolidate(w *Workload, types []*scheduling.InstanceType, opts disruption.Options) (*Consolidation, error) {
	in := Input(w, types)
	in.Pods = nil
	now := time.Now()
	var claims []*v1.NodeClaim
	for _, n := range in.Nodes {
		if pool := n.Node.Labels[v1.NodePoolLabelKey]; pool != "" {
			claims = append(claims, claimFor(n.Node, now))
		}
	}
	pdbs := healthyPDBs(w)
	buffers := Buffers(w)
	out := &Consolidation{}
	out.Before, out.Nodes[0] = price(in), len(in.Nodes)
	seq := 0
	for pass := 0; ; pass++ {
		if pass == MaxPasses {
			return nil, fmt.Errorf("consolidation did not settle in %d passes", MaxPasses)
		}
		start := time.Now()
		dec := disruption.Decide(&disruption.Input{Now: now, Cluster: in, Claims: claims, PDBs: pdbs, Buffers: buffers, Options: opts})
		out.Seconds += time.Since(start).Seconds()
		cmd := dec.Command
		if cmd == nil {
			for _, b := range dec.Blocked {
				out.Blocked = append(out.Blocked, Blocked{b.Node, b.Reason})
			}
			break
		}
		step := Step{Decision: cmd.Decision(), Reason: string(cmd.Reason), Kind: string(cmd.Kind), Savings: round(cmd.Savings)}
		gone := map[string]bool{}
		var moved []*corev1.Pod
		for _, c := range cmd.Candidates {
			step.Nodes = append(step.Nodes, c.Node.Node.Name)
			gone[c.Node.Node.Name] = true
			for _, p := range c.Pods {
				if state.IsBufferPod(p) {
					continue // placed afresh in every pass
				}
				cp := *p
				cp.Spec.NodeName = ""
				moved = append(moved, &cp)
			}
		}
		kept := in.Nodes[:0:0]
		for _, n := range in.Nodes {
			if !gone[n.Node.Name] {
				kept = append(kept, n)
			}
		}
		keptClaims := claims[:0:0]
		for _, nc := range claims {
			if !gone[nc.Status.NodeName] {
				keptClaims = append(keptClaims, nc)
			}
		}
		in.Nodes, claims = kept, keptClaims
		for _, r := range cmd.Replacements {
			seq++
			node := replacementNode(fmt.Sprintf("replacement-%d", seq), r)
			step.Replacements = append(step.Replacements, fmt.Sprintf("%s (%s, %s, %s)", node.Name, r.InstanceType.Name, r.Offering.Zone, r.Offering.CapacityType))
			in.Nodes = append(in.Nodes, &scheduling.Node{Node: node})
			claims = append(claims, claimFor(node, now))
		}
		if err := land(in, moved); err != nil {
			return nil, fmt.Errorf("applying %s: %w", cmd, err)
		}
		out.Steps = append(out.Steps, step)
	}
	out.After, out.Nodes[1] = price(in), len(in.Nodes)
	out.Before, out.After, out.Seconds = round(out.Before), round(out.After), round(out.Seconds)
	return out, nil
}

// land binds pods onto the cluster as the scheduling engine places them; a
// consolidation only stands if they all fit without new nodes.
func land(in *scheduling.Input, pods []*corev1.Pod) error {
	sim := *in
	sim.Pods = pods
	plan, err := scheduling.Solve(&sim, scheduling.Options{})
	if err != nil {
		return err
	}
	if len(plan.NewNodes) > 0 || len(plan.Unschedulable) > 0 {
		return fmt.Errorf("%d pods did not fit the remaining nodes", len(plan.Unschedulable)+len(plan.NewNodes))
	}
	byName := map[string]*scheduling.Node{}
	for _, n := range in.Nodes {
		byName[n.Node.Name] = n
	}
	for _, b := range plan.Bindings {
		n := byName[b.Node]
		if n == nil {
			return fmt.Errorf("pod %s/%s was placed on unknown node %s", b.Pod.Namespace, b.Pod.Name, b.Node)
		}
		b.Pod.Spec.NodeName = b.Node
		n.Pods = append(slices.Clip(n.Pods), b.Pod)
	}
	return nil
}

// claimFor makes the NodeClaim a node of a NodePool would have: launched long ago,
// registered and initialized.
func claimFor(n *corev1.Node, now time.Time) *v1.NodeClaim {
	long := metav1.NewTime(now.Add(-24 * time.Hour))
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: n.Name, CreationTimestamp: long,
		Labels: map[string]string{v1.NodePoolLabelKey: n.Labels[v1.NodePoolLabelKey]}},
		Status: v1.NodeClaimStatus{NodeName: n.Name, ProviderID: n.Spec.ProviderID}}
	if nc.Status.ProviderID == "" {
		nc.Status.ProviderID = "simulate:///" + n.Name
		n.Spec.ProviderID = nc.Status.ProviderID
	}
	for _, t := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized} {
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: t, LastTransitionTime: long})
	}
	return nc
}

// replacementNode is the node a planned replacement becomes at its cheapest option.
func replacementNode(name string, r *scheduling.NewNode) *corev1.Node {
	lbls := map[string]string{}
	for k, v := range r.InstanceType.Requirements.Labels() {
		lbls[k] = v
	}
	for k, v := range r.Requirements.Labels() {
		lbls[k] = v
	}
	lbls[v1.LabelInstanceType], lbls[v1.LabelZone], lbls[v1.CapacityTypeLabelKey] = r.InstanceType.Name, r.Offering.Zone, r.Offering.CapacityType
	lbls[v1.NodePoolLabelKey], lbls[v1.LabelHostname] = r.NodePool, name
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec:   corev1.NodeSpec{Taints: r.Taints},
		Status: corev1.NodeStatus{Allocatable: r.InstanceType.Allocatable(), Capacity: r.InstanceType.Capacity}}
	return node
}

// price is what the NodePool nodes of the cluster cost at their offerings' prices.
func price(in *scheduling.Input) float64 {
	total := 0.0
	for _, n := range in.Nodes {
		for _, pool := range in.NodePools {
			if pool.NodePool.Name == n.Node.Labels[v1.NodePoolLabelKey] {
				p, _ := scheduling.OfferingPrice(pool.InstanceTypes, n.Node.Labels)
				total += p
			}
		}
	}
	return total
}

// healthyPDBs fills in each PDB's disruptionsAllowed as the disruption controller of
// kube-controller-manager would, counting every bound pod it selects as healthy.
func healthyPDBs(w *Workload) []*policyv1.PodDisruptionBudget {
	var out []*policyv1.PodDisruptionBudget
	for _, p := range w.PodDisruptionBudgets {
		p = p.DeepCopy()
		healthy := 0
		if p.Spec.Selector != nil {
			if sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector); err == nil {
				for _, pods := range w.Bound {
					for _, pod := range pods {
						if pod.Namespace == p.Namespace && sel.Matches(labels.Set(pod.Labels)) {
							healthy++
						}
					}
				}
			}
		}
		allowed := 0
		switch {
		case p.Spec.MaxUnavailable != nil:
			n, err := intstr.GetScaledValueFromIntOrPercent(p.Spec.MaxUnavailable, healthy, true)
			if err == nil {
				allowed = n
			}
		case p.Spec.MinAvailable != nil:
			n, err := intstr.GetScaledValueFromIntOrPercent(p.Spec.MinAvailable, healthy, true)
			if err == nil {
				allowed = healthy - n
			}
		}
		p.Status.DisruptionsAllowed = int32(max(0, allowed))
		out = append(out, p)
	}
	return out
}

// WriteConsolidation prints a consolidation run for people.
func WriteConsolidation(w io.Writer, c *Consolidation) {
	if len(c.Steps) == 0 {
		fmt.Fprintln(w, "nothing to consolidate")
	}
	for i, s := range c.Steps {
		fmt.Fprintf(w, "%d. %s %s (%s, %s): saves $%.4f/hour", i+1, s.Decision, strings.Join(s.Nodes, ", "), s.Reason, s.Kind, s.Savings)
		if len(s.Replacements) > 0 {
			fmt.Fprintf(w, "; replaced by %s", strings.Join(s.Replacements, ", "))
		}
		fmt.Fprintln(w)
	}
	for _, b := range c.Blocked {
		fmt.Fprintf(w, "left alone: %s: %s\n", b.Node, b.Reason)
	}
	saved := 0.0
	if c.Before > 0 {
		saved = 100 * (c.Before - c.After) / c.Before
	}
	fmt.Fprintf(w, "price: $%.4f/hour on %d nodes → $%.4f/hour on %d nodes (%.1f%% less); deciding took %.3fs\n",
		c.Before, c.Nodes[0], c.After, c.Nodes[1], saved, c.Seconds)
}
