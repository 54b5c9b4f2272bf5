package inspect

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/disruption"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// PoolReason is why a pending pod does not fit one NodePool, with what would
// make it fit.
type PoolReason struct {
	NodePool string `json:"node_pool,omitempty"`
	Reason   string `json:"reason"`
	Fix      string `json:"fix,omitempty"`
}

// EventLine is an event about the object, as the controllers recorded it.
type EventLine struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	From    string `json:"from,omitempty"`
	Count   int32  `json:"count,omitempty"`
	Last    string `json:"last,omitempty"`
}

// PodShare is what a pod pays of its node's price.
type PodShare struct {
	CPU    float64 `json:"cpu"`
	Memory float64 `json:"memory_gib"`
	// Basis is "requests" or "usage": which set the larger of the two.
	Basis    string  `json:"basis"`
	PerHour  float64 `json:"cost_per_hour"`
	PerMonth float64 `json:"cost_per_month"`
}

// PodExplanation is tailor explain pod's answer.
type PodExplanation struct {
	Pod   string `json:"pod"`
	Phase string `json:"phase"`
	// Pending: not bound to a node. Then Plan says what the engine would do for it
	// now, and Reasons why each NodePool cannot take it.
	Pending bool         `json:"pending"`
	Plan    string       `json:"plan,omitempty"`
	Reasons []PoolReason `json:"reasons,omitempty"`
	// Bound: the node, why it exists, and what the pod pays of it.
	Node      *NodeLine   `json:"node,omitempty"`
	NodeClaim string      `json:"node_claim,omitempty"`
	Why       string      `json:"why_node,omitempty"`
	Cost      *PodShare   `json:"cost,omitempty"`
	Events    []EventLine `json:"events,omitempty"`
}

// ExplainPod says why the pod is pending, or where it runs, why that node exists
// and what the pod costs. events are the pod's events, newest last.
func (c *Cluster) ExplainPod(namespace, name string, events []corev1.Event, opts scheduling.Options) (*PodExplanation, error) {
	var pod *corev1.Pod
	for _, p := range c.Objects.Pods {
		if p.Namespace == namespace && p.Name == name {
			pod = p
		}
	}
	if pod == nil {
		return nil, fmt.Errorf("pod %s/%s not found", namespace, name)
	}
	out := &PodExplanation{Pod: namespace + "/" + name, Phase: string(pod.Status.Phase), Events: eventLines(events)}
	if pod.Spec.NodeName == "" {
		out.Pending = true
		if scheduling.IsDaemonSetPod(pod) {
			out.Plan = "a DaemonSet pod: it follows nodes, and Tailor launches no node for it"
			return out, nil
		}
		c.explainPending(out, pod, opts)
		return out, nil
	}
	prices := c.NodePrices()
	i := slices.IndexFunc(prices, func(p NodePrice) bool { return p.Node == pod.Spec.NodeName })
	if i < 0 {
		out.Why = fmt.Sprintf("node %s is gone", pod.Spec.NodeName)
		return out, nil
	}
	pods, idle := c.Shares(prices)
	line := c.nodeLine(prices[i], pods, idle)
	out.Node = &line
	out.NodeClaim = prices[i].NodeClaim
	out.Why = c.whyNode(prices[i], nil)
	for _, pc := range pods {
		if pc.Namespace == namespace && pc.Name == name {
			basis := "requests"
			if pc.ByUsage {
				basis = "usage"
			}
			out.Cost = &PodShare{CPU: round(pc.CPU), Memory: round(pc.Memory), Basis: basis, PerHour: round(pc.PerHour), PerMonth: round(pc.PerHour * HoursPerMonth)}
		}
	}
	return out, nil
}

// explainPending plans the pending pods as the provisioner would now, read-only,
// and says what becomes of this one.
func (c *Cluster) explainPending(out *PodExplanation, pod *corev1.Pod, opts scheduling.Options) {
	in := *c.Snapshot.Input
	if !slices.Contains(in.Pods, pod) {
		// Not marked unschedulable by the kube-scheduler (yet): plan it all the same.
		in.Pods = append(slices.Clone(in.Pods), pod)
	}
	plan, err := scheduling.Solve(&in, opts)
	if err != nil {
		out.Plan = "the scheduling engine could not plan: " + err.Error()
		return
	}
	for _, b := range plan.Bindings {
		if b.Pod == pod {
			out.Plan = fmt.Sprintf("fits on node %s (existing or launching): the kube-scheduler should place it there", b.Node)
			if nc := c.claimNamed(b.Node); nc != "" {
				out.Plan = fmt.Sprintf("fits on NodeClaim %s, which is being launched: it waits for that node", nc)
			}
			return
		}
	}
	for _, n := range plan.NewNodes {
		if slices.Contains(n.Pods, pod) {
			out.Plan = fmt.Sprintf("Tailor would launch a new node of NodePool %s for it: %s in %s (%s) at $%.4f/hour; the controller creates it on its next batch",
				n.NodePool, n.InstanceType.Name, n.Offering.Zone, n.Offering.CapacityType, n.Price())
			return
		}
	}
	for _, f := range plan.Unschedulable {
		if f.Pod == pod {
			out.Plan = "no NodePool can launch a node for it"
			out.Reasons = poolReasons(f.Reason)
			return
		}
	}
	out.Plan = "the scheduling engine left it out of the plan"
}

// claimNamed is the NodeClaim whose launching stand-in node is named name.
func (c *Cluster) claimNamed(name string) string {
	for _, nc := range c.Objects.NodeClaims {
		if nc.Name == name || (nc.Status.NodeName == name && !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized)) {
			return nc.Name
		}
	}
	return ""
}

var poolPrefix = regexp.MustCompile(`(?:^|; )NodePool (\S+): `)

// poolReasons splits the engine's reason ("NodePool a: …; NodePool b: …") by
// NodePool, each with what would make the pod fit.
func poolReasons(reason string) []PoolReason {
	idx := poolPrefix.FindAllStringSubmatchIndex(reason, -1)
	if len(idx) == 0 {
		return []PoolReason{{Reason: reason, Fix: fix(reason)}}
	}
	var out []PoolReason
	for i, m := range idx {
		end := len(reason)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		}
		r := reason[m[1]:end]
		out = append(out, PoolReason{NodePool: reason[m[2]:m[3]], Reason: r, Fix: fix(r)})
	}
	return out
}

// fix says, for a reason of the engine's, what would make the pod fit.
func fix(reason string) string {
	switch {
	case strings.Contains(reason, "not tolerated"):
		return "the NodePool taints its nodes and the pod does not tolerate the taint: add a matching toleration to the pod (spec.tolerations), or let a NodePool without the taint take it"
	case strings.Contains(reason, "a label no instance type or template defines"):
		return "the pod selects a node label this NodePool never sets: add the label to the NodePool's template (spec.template.metadata.labels), or drop it from the pod's nodeSelector or node affinity"
	case strings.Contains(reason, "pod requires") && strings.Contains(reason, "but nodes offer"):
		return "the pod's nodeSelector or node affinity asks for values this NodePool's requirements leave out: change the pod's selector, or allow those values in the NodePool's spec.template.spec.requirements"
	case strings.Contains(reason, "limit ") && (strings.Contains(reason, "reached") || strings.Contains(reason, "leaves")), strings.Contains(reason, "limits reached"):
		return "the NodePool is at its spec.limits: raise the limit, or free room (fewer or smaller nodes in the pool)"
	case strings.Contains(reason, "no instance type offers"), strings.Contains(reason, "more than any node can offer"), strings.Contains(reason, "no single instance type fits"):
		return "the pod asks for more than the largest instance type the NodePool allows: lower the pod's requests, or allow larger instance types in the NodePool's requirements"
	case strings.Contains(reason, "available offering"):
		return "no instance type the NodePool allows is offered where and how the pod must run (zone, capacity type, architecture): widen the NodePool's requirements or the pod's"
	case strings.Contains(reason, "volume"):
		return "the pod's volumes bind it to a zone or attach limit no new node can meet: check the PersistentVolume's node affinity and the StorageClass's allowed topologies"
	case strings.Contains(reason, "spread"), strings.Contains(reason, "affinity"):
		return "its topology spread or pod (anti-)affinity leaves no place with room: allow more zones or nodes, or relax the constraint (a larger maxSkew, whenUnsatisfiable: ScheduleAnyway, a preferred rule)"
	case strings.Contains(reason, "no NodePool"):
		return "create a NodePool that allows the pod's requirements"
	case strings.Contains(reason, "Ready"), strings.Contains(reason, "NodeClass"), strings.Contains(reason, "static NodePool"):
		return "the NodePool launches nothing now: see its status conditions (kubectl describe nodepool)"
	}
	return ""
}

// whyNode says who launched a node and why.
func (c *Cluster) whyNode(p NodePrice, events []corev1.Event) string {
	if p.NodeClaim == "" {
		if p.NodePool != "" {
			return fmt.Sprintf("labelled with NodePool %s but has no NodeClaim", p.NodePool)
		}
		return "not launched by Tailor (no NodeClaim, no NodePool label): another autoscaler or a node group made it"
	}
	for _, nc := range c.Objects.NodeClaims {
		if nc.Name != p.NodeClaim {
			continue
		}
		why := fmt.Sprintf("Tailor launched it as NodeClaim %s of NodePool %s at %s, for pods no existing node had room for",
			nc.Name, cmp.Or(nc.Labels[v1.NodePoolLabelKey], p.NodePool), nc.CreationTimestamp.UTC().Format(time.RFC3339))
		for _, e := range events {
			// The disruption controller's event on the replacements it launches.
			if e.InvolvedObject.Kind == "NodeClaim" && e.InvolvedObject.Name == nc.Name && e.Reason == "DisruptionLaunching" {
				why = fmt.Sprintf("Tailor launched it as NodeClaim %s of NodePool %s at %s, to replace nodes being disrupted (%s)",
					nc.Name, cmp.Or(nc.Labels[v1.NodePoolLabelKey], p.NodePool), nc.CreationTimestamp.UTC().Format(time.RFC3339), e.Message)
			}
		}
		if pool := c.pools[p.NodePool]; pool != nil && pool.NodePool.IsStatic() {
			why = fmt.Sprintf("NodePool %s is static (spec.replicas): it keeps its nodes by count; NodeClaim %s is one of them", p.NodePool, nc.Name)
		}
		return why
	}
	return ""
}

func (c *Cluster) nodeLine(np NodePrice, pods []PodCost, idle map[string]float64) NodeLine {
	line := NodeLine{Node: np.Node, NodePool: np.NodePool, NodeClaim: np.NodeClaim, InstanceType: np.InstanceType, Zone: np.Zone, CapacityType: np.CapacityType}
	for _, pc := range pods {
		if pc.Node == np.Node {
			line.Pods++
		}
	}
	if !np.Known {
		line.Unpriced = np.Why
		return line
	}
	line.Instance, line.Volumes, line.Addresses, line.PerNode = round(np.Instance), round(np.Volumes), round(np.Addresses), round(np.PerNode)
	line.PerHour, line.PerMonth, line.Idle = round(np.Total()), round(np.Total()*HoursPerMonth), round(idle[np.Node])
	return line
}

func eventLines(events []corev1.Event) []EventLine {
	var out []EventLine
	for _, e := range events {
		last := e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		l := EventLine{Type: e.Type, Reason: e.Reason, Message: e.Message, From: cmp.Or(e.ReportingController, e.Source.Component), Count: e.Count}
		if !last.IsZero() {
			l.Last = last.UTC().Format(time.RFC3339)
		}
		out = append(out, l)
	}
	return out
}

// NodeExplanation is tailor explain node's answer.
type NodeExplanation struct {
	Node NodeLine `json:"node"`
	Why  string   `json:"why"`
	// Disruption is what the disruption loop decides about the node now (the same
	// decision, made read-only): whether it would go, or why it stays.
	Disruption string `json:"disruption"`
	// Blocked is the kind of what holds it back (DoNotDisrupt, Pods, Needed,
	// Budget, EmptyFirst, NoBetterPlace), when a check does.
	Blocked string `json:"blocked,omitempty"`
	// Consolidatable: its NodePool's consolidateAfter has passed since its pods
	// last changed.
	Consolidatable bool   `json:"consolidatable"`
	Drifted        string `json:"drifted,omitempty"`
	// Replacement is what would take its pods were it gone: other nodes with room,
	// and the cheapest new nodes for the rest.
	Replacement *Replacement `json:"replacement,omitempty"`
	Events      []EventLine  `json:"events,omitempty"`
}

// Replacement is where a node's pods would go without it.
type Replacement struct {
	// Moved counts the pods that would move (not DaemonSet, mirror or finished).
	Moved int `json:"moved"`
	// OntoExisting counts those that fit on other nodes.
	OntoExisting int `json:"onto_existing"`
	// NewNodes are the nodes that would be launched for the rest.
	NewNodes []string `json:"new_nodes"`
	// PerHour is what the new nodes cost; Saving the node's price less that.
	PerHour     float64 `json:"new_nodes_per_hour"`
	Saving      float64 `json:"saving_per_hour"`
	Unplaceable int     `json:"unplaceable,omitempty"`
}

// ExplainNode says why a node exists, what it costs, what disruption decides
// about it now and what would replace it. events are the node's and its
// NodeClaim's events.
func (c *Cluster) ExplainNode(name string, events []corev1.Event, opts disruption.Options) (*NodeExplanation, error) {
	var node *corev1.Node
	for _, n := range c.Objects.Nodes {
		if n.Name == name {
			node = n
		}
	}
	if node == nil {
		return nil, fmt.Errorf("node %s not found", name)
	}
	prices := c.NodePrices()
	i := slices.IndexFunc(prices, func(p NodePrice) bool { return p.Node == name })
	pods, idle := c.Shares(prices)
	out := &NodeExplanation{Node: c.nodeLine(prices[i], pods, idle), Why: c.whyNode(prices[i], events), Events: eventLines(events)}
	claim := c.claimOf(node)
	snap := c.Snapshot
	dec := disruption.Decide(&disruption.Input{Now: c.Now, Cluster: snap.Input, Claims: snap.Claims, PDBs: snap.PDBs, Options: opts})
	if claim != nil {
		st := dec.States[claim.Name]
		out.Consolidatable, out.Drifted = st.Consolidatable, st.Drifted
	}
	out.Disruption = c.disruptionOf(node, claim, dec)
	for _, b := range dec.Blocked {
		if b.Node == name {
			out.Blocked = string(b.Kind)
		}
	}
	if cmd := dec.Command; cmd != nil && slices.ContainsFunc(cmd.Candidates, func(cand *disruption.Candidate) bool { return cand.Node.Node.Name == name }) {
		r := &Replacement{Saving: round(cmd.Savings)}
		for _, cand := range cmd.Candidates {
			r.Moved += len(cand.Pods)
		}
		r.OntoExisting = r.Moved
		for _, n := range cmd.Replacements {
			r.OntoExisting -= len(n.Pods)
			r.NewNodes = append(r.NewNodes, fmt.Sprintf("%s (%s, %s, NodePool %s)", n.InstanceType.Name, n.Offering.Zone, n.Offering.CapacityType, n.NodePool))
			r.PerHour += n.Price()
		}
		r.PerHour = round(r.PerHour)
		out.Replacement = r
	} else if claim != nil {
		out.Replacement = c.replacement(node, prices[i], opts.Scheduling)
	}
	return out, nil
}

// disruptionOf words what the decision means for the node.
func (c *Cluster) disruptionOf(node *corev1.Node, claim *v1.NodeClaim, dec *disruption.Decision) string {
	if cmd := dec.Command; cmd != nil {
		for _, cand := range cmd.Candidates {
			if cand.Node.Node.Name == node.Name {
				return fmt.Sprintf("Tailor's next disruption would %s it now: %s", cmd.Decision(), cmd)
			}
		}
	}
	for _, b := range dec.Blocked {
		if b.Node == node.Name {
			return "a candidate, held back: " + b.Reason
		}
	}
	pool := c.pools[node.Labels[v1.NodePoolLabelKey]]
	switch {
	case claim == nil:
		return "not Tailor's to disrupt: it has no NodeClaim"
	case claim.DeletionTimestamp != nil || node.DeletionTimestamp != nil:
		return "being deleted"
	case hasTaint(node, v1.DisruptedNoScheduleTaint.Key):
		return "being disrupted now (tainted " + v1.DisruptedNoScheduleTaint.Key + ")"
	case !meta.IsStatusConditionTrue(claim.Status.Conditions, v1.ConditionTypeInitialized):
		return "not a candidate yet: it is still coming up (not Initialized)"
	case pool == nil:
		return fmt.Sprintf("not a candidate: its NodePool %q is gone", node.Labels[v1.NodePoolLabelKey])
	case pool.NodePool.Spec.Disruption.ConsolidateAfter.Never:
		return fmt.Sprintf("not consolidated: NodePool %s has consolidateAfter: Never", pool.NodePool.Name)
	}
	if cmd := dec.Command; cmd != nil {
		return fmt.Sprintf("nothing against it, but the disruption loop acts on another node first (%s) and decides again after", cmd)
	}
	if !dec.States[claim.Name].Consolidatable {
		return fmt.Sprintf("not consolidatable yet: its pods changed within NodePool %s's consolidateAfter (%s)", pool.NodePool.Name, consolidateAfter(pool.NodePool))
	}
	if pool.NodePool.Spec.Disruption.ConsolidationPolicy == v1.ConsolidationPolicyWhenEmpty {
		return fmt.Sprintf("kept: NodePool %s consolidates only empty nodes (consolidationPolicy: WhenEmpty), and this one runs pods", pool.NodePool.Name)
	}
	return "kept: no cheaper way to run its pods was found"
}

func consolidateAfter(np *v1.NodePool) string {
	if d := np.Spec.Disruption.ConsolidateAfter.Duration; d != nil {
		return d.String()
	}
	return "0s"
}

func hasTaint(n *corev1.Node, key string) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == key })
}

// replacement plans the node's pods as if it were gone, read-only: onto the other
// nodes where they fit, and onto the cheapest new nodes otherwise.
func (c *Cluster) replacement(node *corev1.Node, price NodePrice, opts scheduling.Options) *Replacement {
	in := *c.Snapshot.Input
	in.Nodes = slices.DeleteFunc(slices.Clone(in.Nodes), func(n *scheduling.Node) bool { return n.Node.Name == node.Name })
	in.Pods = nil
	r := &Replacement{}
	for _, n := range c.Snapshot.Input.Nodes {
		if n.Node.Name != node.Name {
			continue
		}
		for _, p := range n.Pods {
			if scheduling.IsTerminal(p) || scheduling.IsMirrorPod(p) || !scheduling.Reschedulable(p) {
				continue
			}
			cp := *p
			cp.Spec.NodeName = ""
			in.Pods = append(in.Pods, &cp)
		}
	}
	r.Moved = len(in.Pods)
	plan, err := scheduling.Solve(&in, opts)
	if err != nil {
		return nil
	}
	r.OntoExisting = len(plan.Bindings)
	r.Unplaceable = len(plan.Unschedulable)
	for _, n := range plan.NewNodes {
		r.NewNodes = append(r.NewNodes, fmt.Sprintf("%s (%s, %s, NodePool %s)", n.InstanceType.Name, n.Offering.Zone, n.Offering.CapacityType, n.NodePool))
		r.PerHour += n.Price()
	}
	if price.Known {
		r.Saving = round(price.Total() - r.PerHour)
	}
	r.PerHour = round(r.PerHour)
	return r
}
