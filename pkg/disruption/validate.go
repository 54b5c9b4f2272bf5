package disruption

import (
	"fmt"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Validate checks a command again on a newer snapshot, just before it is carried
// out: the cluster moves while a decision waits (pods arrive, budgets fill), and a
// stale decision must not be acted on. It returns the command rebuilt on the new
// snapshot, or why it no longer holds.
func Validate(in *Input, cmd *Command) (*Command, error) {
	d := newDecider(in)
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
		case !c.consolidatable && cmd.Reason != v1.DisruptionReasonDrifted:
			return nil, fmt.Errorf("node %s had a pod arrive or leave", c.Node.Node.Name)
		case cmd.Reason == v1.DisruptionReasonEmpty && len(c.Pods) > 0:
			return nil, fmt.Errorf("node %s is no longer empty", c.Node.Node.Name)
		case cmd.Reason == v1.DisruptionReasonDrifted && c.drift == "":
			return nil, fmt.Errorf("node %s is no longer drifted", c.Node.Node.Name)
		}
		if why := c.blocked(cmd.Reason == v1.DisruptionReasonDrifted && c.Claim.Spec.TerminationGracePeriod != nil); why != "" {
			return nil, fmt.Errorf("node %s: %s", c.Node.Node.Name, why)
		}
		if why := d.needed[c.Node]; why != "" && cmd.Reason != v1.DisruptionReasonDrifted {
			return nil, fmt.Errorf("node %s: %s", c.Node.Node.Name, why)
		}
		pool := c.Pool.NodePool.Name
		if taken[pool]++; taken[pool] > d.allowed[pool][cmd.Reason] {
			return nil, fmt.Errorf("node %s: %s", c.Node.Node.Name, budgetBlocked(pool, cmd.Reason))
		}
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
	return fresh, nil
}
