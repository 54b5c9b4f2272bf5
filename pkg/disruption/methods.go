package disruption

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// emptiness deletes every node, within budgets, that has run nothing but DaemonSet
// and mirror pods for consolidateAfter; under either consolidation policy.
func (d *decider) emptiness(dec *Decision) *Command {
	cmd := &Command{Reason: v1.DisruptionReasonEmpty, Kind: KindEmpty}
	taken := map[string]int{}
	for _, c := range d.candidates {
		if !c.eligible(v1.DisruptionReasonEmpty) {
			continue
		}
		dec.Eligible[v1.DisruptionReasonEmpty]++
		if b := d.check(c, v1.DisruptionReasonEmpty, taken); !b.ok() {
			dec.blockedBy(c, b)
			continue
		}
		taken[c.Pool.NodePool.Name]++
		cmd.Candidates = append(cmd.Candidates, c)
		cmd.Savings += c.Price
	}
	if len(cmd.Candidates) == 0 {
		return nil
	}
	return cmd
}

// drift replaces drifted nodes: the empty ones are deleted together, the others one
// at a time, each with whatever nodes its pods need (cheaper or not).
func (d *decider) drift(dec *Decision) *Command {
	empty := &Command{Reason: v1.DisruptionReasonDrifted, Kind: KindDrift}
	var busy []*Candidate
	taken := map[string]int{}
	for _, c := range d.candidates {
		if !c.eligible(v1.DisruptionReasonDrifted) {
			continue
		}
		dec.Eligible[v1.DisruptionReasonDrifted]++
		if b := d.check(c, v1.DisruptionReasonDrifted, taken); !b.ok() {
			dec.blockedBy(c, b)
			continue
		}
		if len(c.Pods) == 0 {
			taken[c.Pool.NodePool.Name]++
			empty.Candidates = append(empty.Candidates, c)
			empty.Savings += c.Price
			continue
		}
		busy = append(busy, c)
	}
	if len(empty.Candidates) > 0 {
		return empty
	}
	for _, c := range busy {
		if c.Pool.NodePool.IsStatic() {
			// A static pool's replacement is its own: a node of its template, which
			// the pool's pods were placed for, whatever a plan would choose.
			return &Command{Reason: v1.DisruptionReasonDrifted, Kind: KindDrift, Candidates: []*Candidate{c}, Refill: true}
		}
		plan, err := d.simulate([]*Candidate{c})
		if err != nil || len(plan.Unschedulable) > 0 {
			dec.blockedBy(c, block{BlockNoBetterPlace, unschedulable(plan, err)})
			continue
		}
		return &Command{Reason: v1.DisruptionReasonDrifted, Kind: KindDrift, Candidates: []*Candidate{c},
			Replacements: plan.NewNodes, Savings: c.Price - plan.Cost()}
	}
	return nil
}

// consolidation looks for a cheaper cluster: first several nodes at once into at
// most one, then single nodes, each deleted or replaced by one cheaper node. While
// empty nodes of a NodePool wait to be deleted (see waitingEmpty), its moves keep
// off the budget those need and only go ahead when they save more than deleting
// those does (emptyFirst).
func (d *decider) consolidation(dec *Decision) *Command {
	var cands []*Candidate
	taken := map[string]int{}
	for _, c := range d.candidates {
		if !c.eligible(v1.DisruptionReasonUnderutilized) {
			continue
		}
		dec.Eligible[v1.DisruptionReasonUnderutilized]++
		// Each on its own against the budget: a group takes no more than it allows.
		if b := d.check(c, v1.DisruptionReasonUnderutilized, nil); !b.ok() {
			dec.blockedBy(c, b)
			continue
		}
		cands = append(cands, c)
	}
	if len(cands) == 0 {
		return nil
	}
	// Several nodes at once only as many of each NodePool as its budget allows; a
	// single node needs just one.
	var group []*Candidate
	for _, c := range cands {
		pool := c.Pool.NodePool.Name
		if taken[pool] < d.moveRoom(pool) {
			taken[pool]++
			group = append(group, c)
		}
	}
	multi := d.multiNode(group)
	if multi != nil && d.emptyFirst(multi.Candidates, multi.Savings) != "" {
		multi = nil
	}
	if multi != nil && len(multi.Replacements) == 0 {
		return multi
	}
	// Several nodes into one new node can save no more than one node deleted (prices
	// grow with size): then the single node, which disrupts less, is the better move.
	for _, c := range cands {
		// A single node's move saves at most its price: no need to simulate it when
		// the empty nodes waiting save that much.
		if why := d.emptyFirst([]*Candidate{c}, c.Price); why != "" {
			dec.blockedBy(c, block{BlockEmptyFirst, why})
			continue
		}
		cmd, why := d.consolidate([]*Candidate{c}, KindSingle)
		if cmd != nil {
			if multi != nil && multi.Savings > cmd.Savings+1e-9 {
				return multi
			}
			if why := d.emptyFirst(cmd.Candidates, cmd.Savings); why != "" {
				dec.blockedBy(c, block{BlockEmptyFirst, why})
				continue
			}
			return cmd
		}
		dec.blockedBy(c, block{BlockNoBetterPlace, why})
	}
	return multi
}

// multiNode finds, by binary search over the cheapest-to-disrupt candidates, the
// longest run that consolidates into at most one node.
func (d *decider) multiNode(cands []*Candidate) *Command {
	cands = cands[:min(len(cands), d.opts.MultiNodeLimit)]
	var best *Command
	lo, hi := 2, len(cands)
	for lo <= hi {
		mid := (lo + hi) / 2
		if cmd, _ := d.consolidate(cands[:mid], KindMulti); cmd != nil {
			best, lo = cmd, mid+1
		} else {
			hi = mid - 1
		}
	}
	return best
}

// consolidate checks that the candidates' pods fit on the rest of the cluster plus
// at most one new node that saves enough, and returns the command or why not.
func (d *decider) consolidate(cands []*Candidate, kind Kind) (*Command, string) {
	if kind == KindSingle && !d.quick.mayMove(cands[0], d.ceiling(cands[0].Price)) {
		return nil, "no replacement saves enough: its pods fit on no other node, and no node cheaper by the minimum saving would hold them"
	}
	plan, err := d.simulate(cands)
	if err != nil || len(plan.Unschedulable) > 0 {
		return nil, unschedulable(plan, err)
	}
	current, allSpot := 0.0, true
	for _, c := range cands {
		current += c.Price
		allSpot = allSpot && c.CapacityType == v1.CapacityTypeSpot
	}
	cmd := &Command{Reason: v1.DisruptionReasonUnderutilized, Kind: kind, Candidates: cands, Savings: current}
	ceiling := d.ceiling(current)
	switch {
	case len(plan.NewNodes) == 0:
		if why := d.balanced(cands, cmd.Savings); why != "" {
			return nil, why
		}
		return cmd, ""
	case len(plan.NewNodes) > 1 && kind == KindMulti:
		return d.repack(cmd, plan, current, ceiling, allSpot)
	case len(plan.NewNodes) > 1:
		return nil, fmt.Sprintf("its pods would need %d new nodes", len(plan.NewNodes))
	}
	r := plan.NewNodes[0]
	// The replacement pays its per-node cost whichever type launches.
	options, spot, onDemand := cheaperOptions(r, ceiling-r.NodeCost.Total())
	if len(options) == 0 {
		return nil, fmt.Sprintf("no replacement saves enough: the cheapest costs $%.4f/h against $%.4f/h now", r.Price(), current)
	}
	if allSpot && spot {
		if !d.opts.SpotToSpotConsolidation {
			return nil, "spot-to-spot consolidation is off (feature gate SpotToSpotConsolidation)"
		}
		// Spot to spot only with many cheaper choices, and never several nodes into
		// one: otherwise the cluster chases the spot market.
		if kind == KindMulti {
			return nil, "spot nodes are not consolidated together into spot"
		}
		if len(options) < SpotToSpotMinOptions {
			return nil, fmt.Sprintf("a spot replacement needs %d cheaper instance types, %d are", SpotToSpotMinOptions, len(options))
		}
		options = options[:SpotToSpotMinOptions]
	}
	r = pinReserved(restrict(r, options))
	if spot && !onDemand {
		// Only spot saves enough: were spot short at launch, an on-demand fallback
		// would cost more than the nodes it replaces.
		r = requireCapacityType(r, v1.CapacityTypeSpot)
	}
	cmd.Replacements = []*scheduling.NewNode{r}
	cmd.Savings = current - r.Price()
	if why := d.balanced(cands, cmd.Savings); why != "" {
		return nil, why
	}
	return cmd, ""
}

// repack replaces several nodes by the several new nodes the engine plans for their
// pods, when together those cost less than the ceiling: nodes sized for pods that
// have gone are repacked onto nodes sized for the pods left, which no move into at
// most one node reaches (Karpenter stops there). Each replacement keeps only the
// options that leave the total under the ceiling whichever of them launches.
func (d *decider) repack(cmd *Command, plan *scheduling.Plan, current, ceiling float64, allSpot bool) (*Command, string) {
	total := plan.Cost()
	if total >= ceiling {
		return nil, fmt.Sprintf("no replacements save enough: the %d cheapest cost $%.4f/h against $%.4f/h now", len(plan.NewNodes), total, current)
	}
	slack := (ceiling - total) / float64(len(plan.NewNodes))
	for _, r := range plan.NewNodes {
		options, spot, onDemand := cheaperOptions(r, r.Offering.Price+slack)
		if len(options) == 0 {
			return nil, fmt.Sprintf("no instance type for a replacement costs under $%.4f/h", r.Offering.Price+slack)
		}
		if allSpot && spot {
			return nil, "spot nodes are not consolidated together into spot"
		}
		r = pinReserved(restrict(r, options))
		if spot && !onDemand {
			r = requireCapacityType(r, v1.CapacityTypeSpot)
		}
		cmd.Replacements = append(cmd.Replacements, r)
	}
	cmd.Savings = current - total
	if why := d.balanced(cmd.Candidates, cmd.Savings); why != "" {
		return nil, why
	}
	return cmd, ""
}

// cheaperOptions are a planned node's instance types with an offering within its
// requirements under ceiling (in its price order), and whether spot, and
// on-demand, offerings under ceiling are among them.
func cheaperOptions(r *scheduling.NewNode, ceiling float64) (options []*scheduling.InstanceType, spot, onDemand bool) {
	for _, it := range r.InstanceTypes {
		if o, ok := it.CheapestOffering(r.Requirements); ok && o.Price < ceiling {
			options = append(options, it)
			spot = spot || o.CapacityType == v1.CapacityTypeSpot
			onDemand = onDemand || underCeiling(it, r.Requirements, v1.CapacityTypeOnDemand, ceiling)
		}
	}
	return options, spot, onDemand
}

// restrict narrows a planned node to the given instance types (a prefix of its
// options in price order, so its cheapest option stays).
func restrict(n *scheduling.NewNode, types []*scheduling.InstanceType) *scheduling.NewNode {
	if len(types) == len(n.InstanceTypes) {
		return n
	}
	out := *n
	out.InstanceTypes = types
	names := make([]string, len(types))
	for i, it := range types {
		names[i] = it.Name
	}
	out.Requirements = n.Requirements.With(scheduling.MustRequirement(v1.LabelInstanceType, v1.NodeSelectorOpIn, names...))
	return &out
}

// simulate places the candidates' pods on the ready nodes without the candidates.
func (d *decider) simulate(cands []*Candidate) (*scheduling.Plan, error) {
	gone := make(map[*scheduling.Node]bool, len(cands))
	in := *d.in.Cluster
	in.Pods = nil
	for _, c := range cands {
		gone[c.Node] = true
		in.Pods = append(in.Pods, c.movedPods()...)
	}
	in.Nodes = make([]*scheduling.Node, 0, len(d.dests))
	for _, n := range d.dests {
		if !gone[n] {
			in.Nodes = append(in.Nodes, n)
		}
	}
	return scheduling.Solve(&in, d.opts.Scheduling)
}

// movedPods are the candidate's pods as they would be pending elsewhere.
func (c *Candidate) movedPods() []*corev1.Pod {
	if c.moved == nil {
		c.moved = make([]*corev1.Pod, len(c.Pods))
		for i, p := range c.Pods {
			cp := *p
			cp.Spec.NodeName = ""
			c.moved[i] = &cp
		}
	}
	return c.moved
}

func unschedulable(plan *scheduling.Plan, err error) string {
	if err != nil {
		return "its pods cannot be placed: " + err.Error()
	}
	f := plan.Unschedulable[0]
	return fmt.Sprintf("pod %s/%s would not fit anywhere else: %s", f.Pod.Namespace, f.Pod.Name, f.Reason)
}

// ceiling is the most a replacement for nodes costing current may cost.
func (d *decider) ceiling(current float64) float64 {
	if d.opts.MinSavings < 0 {
		return current
	}
	return current * (1 - d.opts.MinSavings)
}

// underCeiling reports an available offering of it of the capacity type, within
// reqs, that costs less than ceiling.
func underCeiling(it *scheduling.InstanceType, reqs scheduling.Requirements, captype string, ceiling float64) bool {
	o, ok := it.CheapestOffering(reqs.With(scheduling.MustRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, captype)))
	return ok && o.Price < ceiling
}

// capacityTypeReserved is the karpenter.sh/capacity-type of capacity reservations.
const capacityTypeReserved = "reserved"

// pinReserved narrows a replacement the plan put on reserved capacity to reserved
// capacity, as Karpenter does: were the reservation full at launch, the launch
// fails and the command is abandoned, where a fallback to on-demand would cost
// many times what the plan counted on (and maybe more than the nodes replaced).
// Its options shrink to the types with a reserved offering it may use.
func pinReserved(n *scheduling.NewNode) *scheduling.NewNode {
	if n.Offering.CapacityType != capacityTypeReserved {
		return n
	}
	out := requireCapacityType(n, capacityTypeReserved)
	var types []*scheduling.InstanceType
	for _, it := range out.InstanceTypes {
		if _, ok := it.CheapestOffering(out.Requirements); ok {
			types = append(types, it)
		}
	}
	return restrict(out, types)
}

// requireCapacityType narrows a planned node to one capacity type.
func requireCapacityType(n *scheduling.NewNode, captype string) *scheduling.NewNode {
	out := *n
	out.Requirements = n.Requirements.With(scheduling.MustRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, captype))
	return &out
}
