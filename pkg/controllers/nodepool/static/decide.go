// Package static keeps a static NodePool (spec.replicas, Karpenter's static
// capacity) at its number of nodes: it creates NodeClaims from the pool's template
// when there are too few and deletes the surplus when there are too many. Those
// nodes are not made for pending pods (package state marks the pool unavailable to
// provisioning) and are never consolidated (package disruption); drift and
// expiration still replace them, and this controller refills the count.
package static

import (
	"cmp"
	"slices"
	"time"
)

// Claim is what the decision needs to know of one of the pool's NodeClaims.
type Claim struct {
	Name string
	// Deleting: the claim has a deletion timestamp; it no longer counts toward
	// replicas, only toward limits.nodes until it is gone.
	Deleting bool
	// Disrupting: its node carries karpenter.sh/disrupted, so disruption (drift,
	// expiration) or termination is taking it away; like Deleting.
	Disrupting bool
	// Launched, Registered and Initialized are the claim's conditions.
	Launched, Registered, Initialized bool
	// Pods are the pods on its node that would have to move.
	Pods int
	// Created is the claim's creation time.
	Created time.Time
}

// Decision is what to do to bring a pool to its replicas.
type Decision struct {
	// Create is how many NodeClaims to create.
	Create int
	// Delete names the NodeClaims to delete, in the order chosen.
	Delete []string
	// Held is how many more claims replicas asks for than limits.nodes allows.
	Held int
}

// Decide compares the claims that stay (not deleting, not disrupting) with
// replicas. Short, it creates the difference, within nodeLimit (limits.nodes, nil
// when unset) counted over every claim the pool has, leaving ones included: their
// instances run until termination ends. Over, it deletes the claims whose loss
// disrupts least: not launched, then not registered, then not initialized, then
// those with fewest pods, then the newest.
func Decide(replicas int64, nodeLimit *int64, claims []Claim) Decision {
	var staying []Claim
	for _, c := range claims {
		if !c.Deleting && !c.Disrupting {
			staying = append(staying, c)
		}
	}
	have := int64(len(staying))
	var d Decision
	switch {
	case have < replicas:
		want := replicas - have
		if nodeLimit != nil {
			room := max(0, *nodeLimit-int64(len(claims)))
			if want > room {
				d.Held = int(want - room)
				want = room
			}
		}
		d.Create = int(want)
	case have > replicas:
		slices.SortFunc(staying, leastDisruptive)
		for _, c := range staying[:have-replicas] {
			d.Delete = append(d.Delete, c.Name)
		}
	}
	return d
}

// leastDisruptive orders claims by how little deleting them disrupts.
func leastDisruptive(a, b Claim) int {
	return cmp.Or(
		cmp.Compare(stage(a), stage(b)),
		cmp.Compare(a.Pods, b.Pods),
		b.Created.Compare(a.Created), // newer first
		cmp.Compare(a.Name, b.Name),
	)
}

// stage is how far a claim got: 0 not launched … 3 initialized.
func stage(c Claim) int {
	switch {
	case !c.Launched:
		return 0
	case !c.Registered:
		return 1
	case !c.Initialized:
		return 2
	}
	return 3
}
