package disruption

import (
	"fmt"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// balanced says why a consolidation move that saves savings is refused under the
// Balanced policy of one of its candidates' NodePools, or "" when it is approved
// (or no candidate's NodePool is Balanced). As Karpenter 1.14 scores it, per
// NodePool: the move's share of the pool's price saved, over its share of the pool's
// disruption cost, must be at least 1/threshold. A node's disruption cost is 1 (the
// cordon, drain and API calls) plus its pods' eviction costs.
func (d *decider) balanced(cands []*Candidate, savings float64) string {
	current := 0.0
	for _, c := range cands {
		current += c.Price
	}
	checked := map[string]bool{}
	for _, c := range cands {
		np := c.Pool.NodePool
		if np.Spec.Disruption.ConsolidationPolicy != v1.ConsolidationPolicyBalanced || checked[np.Name] {
			continue
		}
		checked[np.Name] = true
		var poolPrice, poolDisruption, movePrice, moveDisruption float64
		for _, o := range d.candidates {
			if o.Pool.NodePool.Name == np.Name {
				poolPrice += o.Price
				poolDisruption += 1 + o.cost
			}
		}
		for _, m := range cands {
			if m.Pool.NodePool.Name == np.Name {
				movePrice += m.Price
				moveDisruption += 1 + m.cost
			}
		}
		if poolPrice <= 0 || poolDisruption <= 0 || current <= 0 {
			continue
		}
		// The pool's part of the saving is its part of the price of the nodes going.
		saved := savings * movePrice / current
		score := (saved / poolPrice) / (moveDisruption / poolDisruption)
		threshold := v1.DefaultConsolidationThreshold
		if t := np.Spec.Disruption.ConsolidationThreshold; t != nil {
			threshold = int(*t)
		}
		if score < 1/float64(threshold) {
			return fmt.Sprintf("NodePool %s is Balanced: the move saves %.1f%% of its price for %.1f%% of its disruption cost (score %.2f, below 1/%d)",
				np.Name, 100*saved/poolPrice, 100*moveDisruption/poolDisruption, score, threshold)
		}
	}
	return ""
}
