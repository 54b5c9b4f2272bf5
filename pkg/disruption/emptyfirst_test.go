package disruption

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// emptied makes n a node a scale-down has just emptied: its pods terminating (or
// already gone), their going stamped on its claim a few seconds ago, so emptiness
// deletes it once consolidateAfter (30s) has passed.
func (c *cluster) emptied(n *scheduling.Node, terminating bool) {
	for _, p := range n.Pods {
		p.DeletionTimestamp = &metav1.Time{Time: now.Add(-5 * time.Second)}
	}
	if !terminating {
		n.Pods = nil
	}
	c.claim(n).Status.LastPodEventTime = metav1.NewTime(now.Add(-5 * time.Second))
}

// After a scale-down, 8 of 10 nodes are empty or emptying and 2 keep one pod each.
// Moving one of those pods onto a node about to be deleted saves nothing that
// waiting does not, and under a 10% budget the move would take the one slot the
// empty nodes need: no pod is evicted while empty nodes wait, and they go first.
func TestEmptyNodesGoBeforePodsMove(t *testing.T) {
	for _, tc := range []struct {
		name        string
		budget      string
		terminating bool
	}{
		{"pods terminating, budget 10%", "10%", true},
		{"pods gone, budget 10%", "10%", false},
		{"pods terminating, budget 100%", "100%", true},
		{"pods gone, budget 100%", "100%", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			c.pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: tc.budget}}
			// Nodes of 2 cpu: a busy node's pod of 1.5 cpu fits only on a node that
			// is emptying (beside its terminating pod of a quarter cpu, if still there).
			var busy, empty []*scheduling.Node
			for i := range 10 {
				if i%5 == 2 {
					busy = append(busy, c.node(1, v1.CapacityTypeOnDemand, pod("1500m", "1Gi"), pod("10m", "10Mi", daemon)))
					continue
				}
				n := c.node(1, v1.CapacityTypeOnDemand, pod("250m", "256Mi"), pod("10m", "10Mi", daemon))
				c.emptied(n, tc.terminating)
				empty = append(empty, n)
			}
			dec := Decide(c.in)
			if dec.Command != nil {
				t.Fatalf("the empty nodes are not quiet yet: want nothing, got %s", dec.Command)
			}
			for _, n := range busy {
				if b := blocked(dec, n.Node.Name); b.Kind != BlockEmptyFirst {
					t.Errorf("%s held back by %q (%s), want %q", n.Node.Name, b.Kind, b.Reason, BlockEmptyFirst)
				}
			}

			// Once quiet, the empty nodes go, as many at a time as the budget
			// allows, and no pod moves until they are gone.
			c.in.Now = now.Add(30 * time.Second)
			left := len(empty)
			for range 20 {
				dec := Decide(c.in)
				cmd := dec.Command
				if cmd == nil {
					break
				}
				if cmd.Reason != v1.DisruptionReasonEmpty {
					t.Fatalf("with %d empty nodes left: want them deleted, got %s", left, cmd)
				}
				if want := min(left, allowedOf(tc.budget, len(c.in.Claims))); len(cmd.Candidates) != want {
					t.Errorf("deleted %d empty nodes at once, want %d", len(cmd.Candidates), want)
				}
				left -= len(cmd.Candidates)
				c.apply(cmd)
			}
			if left != 0 {
				t.Errorf("%d empty nodes left", left)
			}
			for _, n := range busy {
				if len(n.Pods) != 2 {
					t.Errorf("%s has %d pods, want its own two: no pod moves", n.Node.Name, len(n.Pods))
				}
			}
		})
	}
}

// allowedOf is what a budget of nodes ("10%", "100%") allows of total nodes.
func allowedOf(budget string, total int) int { return BudgetNodes(budget, total) }

// A move that saves more than the empty nodes waiting goes ahead, but only within
// the budget those nodes leave it; and an empty node that will not be deleted
// (do-not-disrupt) holds nothing back. Validation after the delay refuses a move
// once nodes emptied meanwhile save as much.
func TestMovesThatSaveMoreThanWaitingEmptyNodes(t *testing.T) {
	build := func(t *testing.T, budget string) (*cluster, *scheduling.Node, *scheduling.Node) {
		c := newCluster(t)
		c.pool.Spec.Disruption.Budgets = []v1.Budget{{Nodes: budget}}
		// A 16-cpu node running a 1-cpu pod: a cheaper node saves most of its price.
		big := c.node(15, v1.CapacityTypeOnDemand, pod("1", "1Gi"))
		small := c.node(0, v1.CapacityTypeOnDemand, pod("500m", "256Mi"))
		c.emptied(small, false)
		return c, big, small
	}
	for _, tc := range []struct {
		budget string
		move   bool
	}{
		{"100%", true},
		{"2", true},  // one slot for the empty node, one for the move
		{"1", false}, // the only slot is the empty node's
	} {
		t.Run("budget "+tc.budget, func(t *testing.T) {
			c, big, _ := build(t, tc.budget)
			dec := Decide(c.in)
			switch {
			case tc.move && (dec.Command == nil || dec.Command.Reason != v1.DisruptionReasonUnderutilized):
				t.Fatalf("the move saves more than the empty node: want it, got %v", dec.Command)
			case !tc.move && dec.Command != nil:
				t.Fatalf("the budget's one slot waits for the empty node: want nothing, got %s", dec.Command)
			case !tc.move && blocked(dec, big.Node.Name).Kind != BlockEmptyFirst:
				t.Errorf("%s held back by %+v, want %q", big.Node.Name, blocked(dec, big.Node.Name), BlockEmptyFirst)
			}
		})
	}
	t.Run("do-not-disrupt empty node", func(t *testing.T) {
		c, _, small := build(t, "1")
		small.Node.Annotations = map[string]string{v1.DoNotDisruptAnnotationKey: "true"}
		if cmd := Decide(c.in).Command; cmd == nil || cmd.Reason != v1.DisruptionReasonUnderutilized {
			t.Fatalf("an empty node that stays holds nothing back: want the move, got %v", cmd)
		}
	})
	t.Run("validation", func(t *testing.T) {
		c, big, _ := build(t, "100%")
		cmd := Decide(c.in).Command
		if cmd == nil || cmd.Candidates[0].Node.Node.Name != big.Node.Name {
			t.Fatalf("want %s consolidated, got %v", big.Node.Name, cmd)
		}
		// Meanwhile a scale-down empties nodes that together save more.
		for range 20 {
			c.emptied(c.node(3, v1.CapacityTypeOnDemand, pod("3", "1Gi")), true)
		}
		if _, err := Validate(c.in, cmd); err == nil || !strings.Contains(err.Error(), "deleted first") {
			t.Errorf("validation: got %v, want the move to wait for the empty nodes", err)
		}
	})
}

func blocked(dec *Decision, node string) Blocked {
	for _, b := range dec.Blocked {
		if b.Node == node {
			return b
		}
	}
	return Blocked{}
}
