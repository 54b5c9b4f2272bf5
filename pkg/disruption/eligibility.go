package disruption

import (
	"fmt"
	"math"
	"slices"
	"strings"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// BlockKind is the kind of check that holds a candidate back.
type BlockKind string

// The checks every method and validation run, in this order (see check).
const (
	// BlockDoNotDisrupt: the node or its claim is annotated karpenter.sh/do-not-disrupt.
	BlockDoNotDisrupt BlockKind = "DoNotDisrupt"
	// BlockPods: a pod may not be evicted now (do-not-disrupt, a PDB).
	BlockPods BlockKind = "Pods"
	// BlockNeeded: pending pods (or pods of nodes going away) would run on it.
	BlockNeeded BlockKind = "Needed"
	// BlockBudget: the NodePool's disruption budget allows no more now.
	BlockBudget BlockKind = "Budget"
	// BlockEmptyFirst: empty nodes of its NodePool wait to be deleted, and
	// consolidation moves no pods while deleting them saves as much as the move
	// or needs the budget the move would take.
	BlockEmptyFirst BlockKind = "EmptyFirst"
	// BlockNoBetterPlace: its pods have nowhere to go that serves the method (no
	// room, no saving, no cheaper replacement).
	BlockNoBetterPlace BlockKind = "NoBetterPlace"
)

// block is one check's verdict; the zero value lets the candidate through.
type block struct {
	kind BlockKind
	why  string
}

func (b block) ok() bool { return b.kind == "" }

// eligible reports whether a candidate is one of the method's at all, before any
// check: empty (and quiet for consolidateAfter) for emptiness, drifted for drift,
// quiet and busy in a pool that consolidates underused nodes for consolidation.
func (c *Candidate) eligible(r v1.DisruptionReason) bool {
	switch r {
	case v1.DisruptionReasonEmpty:
		return len(c.Pods) == 0 && c.consolidatable
	case v1.DisruptionReasonDrifted:
		return c.drift != ""
	case v1.DisruptionReasonUnderutilized:
		return c.Pool.NodePool.Spec.Disruption.ConsolidationPolicy != v1.ConsolidationPolicyWhenEmpty && c.consolidatable && len(c.Pods) > 0
	}
	return false
}

// check is the one chain of checks between an eligible candidate and a command,
// for every method and for validation: do-not-disrupt, then pods that may not be
// evicted (a drifted claim with a terminationGracePeriod drains past them), then
// pending pods that need the node (drift replaces the node, so it does not ask),
// then the budget, of which taken[pool] is already spoken for (consolidation's
// share of it leaves out what the pool's waiting empty nodes need: see moveRoom).
func (d *decider) check(c *Candidate, r v1.DisruptionReason, taken map[string]int) block {
	if c.blockedNode != "" {
		return block{BlockDoNotDisrupt, c.blockedNode}
	}
	graceful := r == v1.DisruptionReasonDrifted && c.Claim.Spec.TerminationGracePeriod != nil
	if c.blockedPods != "" && !graceful {
		return block{BlockPods, c.blockedPods}
	}
	if why := d.needed[c.Node]; why != "" && r != v1.DisruptionReasonDrifted {
		return block{BlockNeeded, why}
	}
	pool := c.Pool.NodePool.Name
	if taken[pool] >= d.allowed[pool][r] {
		return block{BlockBudget, fmt.Sprintf("the disruption budget of NodePool %s allows no more %s disruptions now", pool, r)}
	}
	if r == v1.DisruptionReasonUnderutilized && taken[pool] >= d.moveRoom(pool) {
		return block{BlockEmptyFirst, fmt.Sprintf("the disruption budget of NodePool %s is kept for its %d empty nodes waiting to be deleted", pool, d.waiting[pool].nodes)}
	}
	return block{}
}

// moveRoom is how many of pool's nodes consolidation may move pods off now: what
// the budget allows, less what the pool's waiting empty nodes need of it. A
// command in flight counts against every reason's budget, so a move would hold
// up their deletion until it is done.
func (d *decider) moveRoom(pool string) int {
	room := d.allowed[pool][v1.DisruptionReasonUnderutilized]
	w := d.waiting[pool].nodes
	if empty := d.allowed[pool][v1.DisruptionReasonEmpty]; w > 0 && empty != math.MaxInt {
		room = min(room, empty-w)
	}
	return room
}

// emptyFirst says why a move of the candidates' pods waits for the empty nodes
// of their NodePools, or "": deleting those saves at least as much as the move
// would, and evicting pods to save what waiting saves anyway only disrupts (the
// pods may even land on those nodes and keep them). A move that saves more goes
// ahead, within moveRoom.
func (d *decider) emptyFirst(cands []*Candidate, savings float64) string {
	var w emptyWait
	var pools []string
	for _, c := range cands {
		pool := c.Pool.NodePool.Name
		if x := d.waiting[pool]; x.nodes > 0 && !slices.Contains(pools, pool) {
			pools = append(pools, pool)
			w.nodes += x.nodes
			w.saving += x.saving
		}
	}
	if w.nodes == 0 || savings > w.saving+1e-9 {
		return ""
	}
	return fmt.Sprintf("%d empty nodes of NodePool %s are deleted first: they save $%.4f/h, moving these pods $%.4f/h",
		w.nodes, strings.Join(pools, ", "), w.saving, savings)
}

// blockedBy records a candidate held back, for events.
func (dec *Decision) blockedBy(c *Candidate, b block) {
	dec.Blocked = append(dec.Blocked, Blocked{Node: c.Node.Node.Name, Kind: b.kind, Reason: b.why, Candidate: c})
}
