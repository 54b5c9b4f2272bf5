package disruption

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Several commands may be in flight at once: a claim of a command already decided
// (in flight, or tainted by one being carried out) is not a candidate again, counts
// against budgets, and its pods hold the room they will move to, so that the next
// command cannot count on the same room.
func TestInFlightCommandsHoldTheirRoom(t *testing.T) {
	for _, how := range []string{"in flight", "tainted"} {
		t.Run(how, func(t *testing.T) {
			c := newCluster(t)
			// big has room for one more 1.5-cpu pod (and just had a pod arrive, so it is
			// not a candidate itself); a and b each hold one on a node nothing smaller
			// fits.
			big := c.node(3, v1.CapacityTypeOnDemand, pod("1500m", "1Gi"))
			c.claim(big).Status.LastPodEventTime = metav1.NewTime(now)
			a := c.node(1, v1.CapacityTypeOnDemand, pod("1500m", "1Gi"))
			b := c.node(1, v1.CapacityTypeOnDemand, pod("1500m", "1Gi"))
			first := Decide(c.in).Command
			if first == nil || first.Decision() != "delete" || len(first.Candidates) != 1 {
				t.Fatalf("want one small node deleted onto %s, got %v", big.Node.Name, first)
			}
			going := first.Candidates[0].Node
			other := a
			if going.Node.Name == a.Node.Name {
				other = b
			}
			if how == "in flight" {
				c.in.InFlight = map[string]bool{first.Candidates[0].Claim.Name: true}
			} else {
				going.Node.Spec.Taints = []corev1.Taint{v1.DisruptedNoScheduleTaint}
			}
			dec := Decide(c.in)
			if dec.Command != nil {
				t.Fatalf("%s's pod takes the room on %s: want nothing more, got %s", going.Node.Name, big.Node.Name, dec.Command)
			}
			if why := blockedReason(dec, other.Node.Name); !strings.Contains(why, "would not fit") && !strings.Contains(why, "saves enough") {
				t.Errorf("%s blocked for %q, want its pod to have nowhere to go", other.Node.Name, why)
			}
			if n := dec.Eligible[v1.DisruptionReasonUnderutilized]; n != 1 {
				t.Errorf("%d consolidation candidates, want 1 (the one in flight is not one)", n)
			}

			// Under a budget of one, the command in flight uses it up.
			c.pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: "1"}}
			if n := Decide(c.in).Allowed["default"][v1.DisruptionReasonUnderutilized]; n != 0 {
				t.Errorf("allowed %d under a budget of 1 with one command in flight, want 0", n)
			}
		})
	}
}

// Validating a command after its delay sees the other commands in flight: one that
// now counts on room another took is dropped.
func TestValidateSeesOtherCommands(t *testing.T) {
	c := newCluster(t)
	big := c.node(3, v1.CapacityTypeOnDemand, pod("1500m", "1Gi"))
	c.claim(big).Status.LastPodEventTime = metav1.NewTime(now)
	a := c.node(1, v1.CapacityTypeOnDemand, pod("1500m", "1Gi"))
	b := c.node(1, v1.CapacityTypeOnDemand, pod("1500m", "1Gi"))
	cmd := Decide(c.in).Command
	if cmd == nil {
		t.Fatal("want a command")
	}
	if _, err := Validate(c.in, cmd); err != nil {
		t.Fatalf("alone, the command holds: %v", err)
	}
	other := c.claim(a)
	if cmd.Candidates[0].Claim == other {
		other = c.claim(b)
	}
	c.in.InFlight = map[string]bool{other.Name: true}
	if _, err := Validate(c.in, cmd); err == nil {
		t.Errorf("%s in flight takes the room %s counted on; the command must not hold", other.Name, cmd)
	}
}

// The first replacement of a multi-node command stands idle while the others come
// up: named in Replacements, it is neither deleted as empty nor a candidate, but it
// still takes pods (it is not leaving).
func TestReplacementsOfACommandInFlightAreNotCandidates(t *testing.T) {
	c := newCluster(t)
	idle := c.node(3, v1.CapacityTypeOnDemand)
	if cmd := Decide(c.in).Command; cmd == nil || cmd.Reason != v1.DisruptionReasonEmpty {
		t.Fatalf("an idle node alone: want it deleted as empty, got %v", cmd)
	}
	c.in.Replacements = map[string]bool{c.claim(idle).Name: true}
	dec := Decide(c.in)
	if dec.Command != nil {
		t.Fatalf("the idle replacement of a command in flight: want nothing, got %s", dec.Command)
	}
	if n := dec.Eligible[v1.DisruptionReasonEmpty]; n != 0 {
		t.Errorf("%d empty candidates, want 0", n)
	}

	// A node whose pod fits on the replacement may still move there.
	c.node(1, v1.CapacityTypeOnDemand, pod("1500m", "1Gi"))
	cmd := Decide(c.in).Command
	if cmd == nil || cmd.Decision() != "delete" || slices.Contains(names(cmd.Candidates), idle.Node.Name) {
		t.Errorf("want the small node deleted onto the replacement, got %v", cmd)
	}
}
