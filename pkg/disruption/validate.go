package disruption

import (
	"fmt"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// noLonger says what a candidate stopped being, by method.
var noLonger = map[v1.DisruptionReason]string{
	v1.DisruptionReasonEmpty:         "empty and quiet for consolidateAfter (a pod arrived or left)",
	v1.DisruptionReasonDrifted:       "drifted",
	v1.DisruptionReasonUnderutilized: "quiet for consolidateAfter (a pod arrived or left)",
}

// Validate checks a command again on a newer snapshot, just before it is carried
// out: the cluster moves while a decision waits (pods arrive, budgets fill), and a
// stale decision must not be acted on. It returns the command rebuilt on the new
// snapshot, or why it no longer holds.
func Validate(in *Input, cmd *Command) (*Command, error) {
	d := newDecider(withBuffers(in))
	byClaim := map[string]*Candidate{}
	for _, c := range d.candidates {
		byClaim[c.Claim.Name] = c
	}
	var cands []*Candidate
	taken := map[string]int{}
	for _, old := range cmd.Candidates {
		c := byClaim[old.Claim.Name]
		switch {
		case c == nil:
			return nil, fmt.Errorf("nodeclaim %s is no longer a candidate", old.Claim.Name)
		case !c.eligible(cmd.Reason):
			return nil, fmt.Errorf("node %s is no longer %s", c.Node.Node.Name, noLonger[cmd.Reason])
		}
		if b := d.check(c, cmd.Reason, taken); !b.ok() {
			return nil, fmt.Errorf("node %s: %s", c.Node.Node.Name, b.why)
		}
		taken[c.Pool.NodePool.Name]++
		cands = append(cands, c)
	}
	if cmd.Reason != v1.DisruptionReasonUnderutilized {
		fresh := *cmd
		fresh.Candidates = cands
		return &fresh, nil
	}
	fresh, why := d.consolidate(cands, cmd.Kind)
	switch {
	case fresh == nil:
		return nil, fmt.Errorf("consolidation no longer holds: %s", why)
	case len(fresh.Replacements) > len(cmd.Replacements):
		return nil, fmt.Errorf("consolidation now needs a replacement node")
	case fresh.Savings < cmd.Savings*0.99:
		return nil, fmt.Errorf("consolidation now saves $%.4f/h, not $%.4f/h", fresh.Savings, cmd.Savings)
	}
	// Nodes emptied while the decision waited (a scale-down) go first.
	if why := d.emptyFirst(fresh.Candidates, fresh.Savings); why != "" {
		return nil, fmt.Errorf("consolidation waits: %s", why)
	}
	return fresh, nil
}
