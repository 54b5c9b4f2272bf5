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
		started := time.Now()
		c := e.startController(fmt.Sprintf("cycle-%03d", i+1), false)
		// Kill it at work: once its caches are synced and a claim is launching (up
		// cycles) or terminating (down cycles), or after 8s regardless, at a random
		// moment of the next 3s.
		busy := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 8*time.Second, true, func(ctx context.Context) (bool, error) {
			launching, terminating := e.inFlight(ctx)
			return c.ready() && ((up && launching > 0) || (!up && terminating > 0)), nil
		}) == nil
		after := time.Duration(e.rng.Int64N(int64(3 * time.Second)))
		select {
		case <-time.After(after):
		case <-t.Context().Done():
			return
		}
		launching, terminating := e.inFlight(t.Context())
		c.kill()
		if launching > 0 {
			duringLaunch++
		}
		if terminating > 0 {
			duringTermination++
		}
		t.Logf("cycle %d: %d pods wanted, %d nodeclaims deleted by hand; killed %.1fs after start (%.1fs after it was at work: %v) with %d nodeclaims launching, %d terminating",
			i+1, pods, deleted, time.Since(started).Seconds(), after.Seconds(), busy, launching, terminating)
	}
	t.Logf("kill -9: %d cycles, %d during a launch, %d during a termination", suite.killCycles, duringLaunch, duringTermination)
	e.note("kill -9: %d cycles, %d during a launch, %d during a termination", suite.killCycles, duringLaunch, duringTermination)

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

// deleteRandomClaims deletes one to three NodeClaims, as a user or another tool
// would: their termination starts with the next controller.
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

func initialized(nc *v1.NodeClaim) bool {
	for _, c := range nc.Status.Conditions {
		if c.Type == v1.ConditionTypeInitialized {
			return c.Status == "True"
		}
	}
	return false
}
