package reliability

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// TestKillCycles kills the controller with SIGKILL at random moments while it
// launches and terminates nodes: each cycle changes the wanted pods (up, then
// down), deletes some NodeClaims as a user would (every down cycle, a quarter of
// the up ones), starts a controller and kills it at a random moment once it is at
// work. A last controller then scales up, and to zero: every pod must run, no
// NodeClaim may ever have had two instances, and at zero nothing may be left: no
// instance, no Node or NodeClaim held by its finalizer.
//
// A kill lands during a launch when the harness, reading just before it, sees a
// NodeClaim launching (created, not initialized yet), and during a termination
// when it sees one terminating (deleting, still held by its finalizer). Up cycles
// kill in the first state, down cycles in the second; over the run at least one
// kill must land in each.
func TestKillCycles(t *testing.T) {
	e := newEnv(t, 2)
	// Launches take a second, so kills land with launches in flight; a node agent
	// on every node, so drains have DaemonSet pods to deal with.
	e.create(simNodeClass(time.Second), nodePool("default", func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
			requirement("karpenter.k8s.aws/instance-cpu", v1.NodeSelectorOpLte, "8")}
		np.Spec.Disruption.ConsolidateAfter = v1.MustParseNillableDuration("2s")
	}), daemonSet("agent"), deployment("small", 0, "250m", "256Mi"), deployment("large", 0, "1", "1Gi"))
	scaleTo := func(pods int) {
		e.scale("small", pods*2/3)
		e.scale("large", pods-pods*2/3)
	}

	duringLaunch, duringTermination := 0, 0
	for i := range suite.killCycles {
		// Up, then down: launches in one cycle, terminations in the next.
		up := i%2 == 0
		pods := suite.killPods/2 + e.rng.IntN(suite.killPods/2+1)
		if !up {
			pods = e.rng.IntN(suite.killPods/4 + 1)
		}
		scaleTo(pods)
		deleted := 0
		if !up || e.rng.IntN(4) == 0 {
			deleted = e.deleteRandomClaims()
		}
		target, state := "launching", func(launching, _ int) bool { return launching > 0 }
		if !up {
			target, state = "terminating", func(_, terminating int) bool { return terminating > 0 }
		}
		// Until a kill has landed in the cycle's state, the kill comes at the first
		// sight of it: the first up cycle launches into an empty cluster and each
		// down cycle has claims deleted by hand, so every run kills at least once
		// during each. The other cycles pause at random first.
		landed := (up && duringLaunch > 0) || (!up && duringTermination > 0)
		started := time.Now()
		c := e.startController(fmt.Sprintf("cycle-%03d", i+1), false)
		killed, busy, pause, launching, terminating := e.killInState(c, state, !landed)
		if launching > 0 {
			duringLaunch++
		}
		if terminating > 0 {
			duringTermination++
		}
		seen := "not within 10s"
		if !busy.IsZero() {
			seen = fmt.Sprintf("%.1fs before the kill (pause %.1fs)", killed.Sub(busy).Seconds(), pause.Seconds())
		}
		t.Logf("cycle %d: %d pods wanted, %d nodeclaims deleted by hand; a nodeclaim %s seen %s; killed %.1fs after start with %d nodeclaims launching, %d terminating",
			i+1, pods, deleted, target, seen, killed.Sub(started).Seconds(), launching, terminating)
	}
	t.Logf("kill -9: %d cycles, %d during a launch (a nodeclaim created, not initialized), %d during a termination (a nodeclaim deleting, held by its finalizer)",
		suite.killCycles, duringLaunch, duringTermination)
	e.note("kill -9: %d cycles, %d during a launch (a nodeclaim created, not initialized), %d during a termination (a nodeclaim deleting, held by its finalizer)",
		suite.killCycles, duringLaunch, duringTermination)
	if duringLaunch == 0 {
		t.Errorf("no kill landed during a launch in %d cycles: no nodeclaim was launching at any kill", suite.killCycles)
	}
	if duringTermination == 0 {
		t.Errorf("no kill landed during a termination in %d cycles: no nodeclaim was terminating at any kill", suite.killCycles)
	}

	e.startController("final", false)
	scaleTo(suite.killPods / 2)
	if !e.eventually(fmt.Sprintf("after the kills: all %d pods running", suite.killPods/2), suite.deadline, e.podsRunning) {
		e.checkInvariants(false)
		return
	}
	e.claimsMatchInstances("after the kills: one instance per nodeclaim, one nodeclaim per instance")
	scaleTo(0)
	e.settleToZero("after the kills, scaled to zero: every node, nodeclaim and instance gone")
}

// killInState kills the controller in the state the cycle is for: it waits (up
// to 10s) for the controller's caches to sync and the state to show; unless
// firstSight, pauses a random 0-2s; then kills at the next sight of the state
// (within 5s, else regardless). It returns when it killed, when the state first
// showed (zero if it never did), the pause, and the claims launching and
// terminating as read just before the kill.
func (e *env) killInState(c *controller, state func(launching, terminating int) bool, firstSight bool) (killed, busy time.Time, pause time.Duration, launching, terminating int) {
	ctx := e.t.Context()
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		if !c.ready() {
			return false, nil
		}
		if state(e.inFlight(ctx)) {
			busy = time.Now()
			return true, nil
		}
		return false, nil
	})
	if !busy.IsZero() && !firstSight {
		pause = time.Duration(e.rng.Int64N(int64(2 * time.Second)))
		select {
		case <-time.After(pause):
		case <-ctx.Done():
		}
	}
	// The reading that decides the kill is the one the kill follows.
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		launching, terminating = e.inFlight(ctx)
		return state(launching, terminating), nil
	})
	c.kill()
	return time.Now(), busy, pause, launching, terminating
}

// deleteRandomClaims deletes one to three NodeClaims, as a user or another tool
// would: their termination starts with the next controller. The first has a Node
// when one does: its termination takes at least the taint's 5s to settle, long
// enough for the harness to see the next controller at it.
func (e *env) deleteRandomClaims() int {
	claims := &v1.NodeClaimList{}
	if err := e.kube.List(e.t.Context(), claims); err != nil {
		e.t.Fatal(err)
	}
	claims.Items = slices.DeleteFunc(claims.Items, func(nc v1.NodeClaim) bool { return nc.DeletionTimestamp != nil })
	n := 0
	for range 1 + e.rng.IntN(3) {
		if len(claims.Items) == 0 {
			break
		}
		i := e.rng.IntN(len(claims.Items))
		if n == 0 {
			var withNode []int
			for j, nc := range claims.Items {
				if nc.Status.NodeName != "" {
					withNode = append(withNode, j)
				}
			}
			if len(withNode) > 0 {
				i = withNode[e.rng.IntN(len(withNode))]
			}
		}
		if err := e.kube.Delete(e.t.Context(), &claims.Items[i]); client.IgnoreNotFound(err) != nil {
			e.t.Fatal(err)
		}
		claims.Items = slices.Delete(claims.Items, i, i+1)
		n++
	}
	return n
}

// inFlight counts the NodeClaims launching (not initialized yet) and terminating.
func (e *env) inFlight(ctx context.Context) (launching, terminating int) {
	claims := &v1.NodeClaimList{}
	if err := e.cached.List(ctx, claims); err != nil {
		return 0, 0
	}
	for _, nc := range claims.Items {
		switch {
		case nc.DeletionTimestamp != nil:
			terminating++
		case !initialized(&nc):
			launching++
		}
	}
	return launching, terminating
}

func initialized(nc *v1.NodeClaim) bool { return conditionTrue(nc, v1.ConditionTypeInitialized) }

func conditionTrue(nc *v1.NodeClaim, condition string) bool {
	for _, c := range nc.Status.Conditions {
		if c.Type == condition {
			return c.Status == "True"
		}
	}
	return false
}
