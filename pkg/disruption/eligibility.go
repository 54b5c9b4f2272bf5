package disruption

import (
	"fmt"

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
// then the budget, of which taken[pool] is already spoken for.
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
	return block{}
}

// blockedBy records a candidate held back, for events.
func (dec *Decision) blockedBy(c *Candidate, b block) {
	dec.Blocked = append(dec.Blocked, Blocked{Node: c.Node.Node.Name, Kind: b.kind, Reason: b.why, Candidate: c})
}
