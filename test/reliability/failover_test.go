package reliability

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
)

const (
	leaseNamespace = "kube-system"
	leaseName      = "tailor-controller"
)

// maxFailover bounds the time from the leader's kill -9 to the standby holding
// the Lease. The controller keeps controller-runtime's defaults: a LeaseDuration
// of 15s and a RetryPeriod of 2s, which client-go jitters by up to JitterFactor
// (1.2), so a standby tries every 2-4.4s. The dead leader renewed at or before
// the kill; the standby sees that renewal at its next try (≤4.4s later) and
// counts the 15s from then; it takes the Lease at its first try after those
// (≤4.4s more): 23.8s at worst. 10s more for a loaded 2-core machine and its API
// server: 33.8s.
var maxFailover = leaseDuration + 2*time.Duration(float64(retryPeriod)*(1+leaderelection.JitterFactor)) + 10*time.Second

// controller-runtime's defaults, which the controller keeps.
const leaseDuration, retryPeriod = 15 * time.Second, 2 * time.Second

// TestLeaderFailover runs two controllers with leader election and kills the
// leader with SIGKILL in the middle of a batch, once some of its NodeClaims are in
// flight (created, their Node not registered yet): the standby takes over within
// maxFailover of the kill (the times are in the summary) and finishes the batch
// without launching anything twice. Every pod needs a node of its own, so the
// right number of NodeClaims is known: one per pod. At the end the leader is
// stopped with SIGTERM, and must give up its Lease on the way out, so the standby
// need not wait for it to expire.
func TestLeaderFailover(t *testing.T) {
	e := newEnv(t, 3)
	// 2-vCPU types and pods of 1.1 cpu: one pod per node. Launches take 2s, so
	// the leader dies with some in flight.
	e.create(simNodeClass(2*time.Second), nodePool("default", func(np *v1.NodePool) {
		np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{
			requirement("karpenter.k8s.aws/instance-cpu", v1.NodeSelectorOpIn, "2")}
		// Only empty nodes go, so every instance ever launched is one a pod needed:
		// the count of launches checks for a double launch even if its node is gone.
		np.Spec.Disruption.ConsolidationPolicy = v1.ConsolidationPolicyWhenEmpty
	}), deployment("one-per-node", 0, "1100m", "1Gi"))
	leases, err := kubernetes.NewForConfig(e.cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	replicas := []*controller{e.startController("replica-1", true), e.startController("replica-2", true)}
	next := 3
	leader, holder := e.waitLeader(replicas)
	t.Logf("leader: %s (%s)", leader.name, holder)

	want := 0
	var failovers []time.Duration
	var killedInFlight []int
	for round := 1; round <= suite.failoverRounds; round++ {
		before, err := e.claimCount(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		want += suite.failoverPods
		e.scale("one-per-node", want)
		// Mid-batch: the leader has made some of the round's claims and some are
		// in flight, not registered yet (launches take 2s, so each is for a while).
		var flight inFlightClaims
		if !e.eventually(fmt.Sprintf("round %d: the leader starts the batch, claims in flight", round), time.Minute, func(ctx context.Context) (bool, string) {
			var err error
			flight, err = e.claimsInFlight(ctx)
			if err != nil {
				return false, err.Error()
			}
			return flight.total > before && flight.inFlight() > 0, flight.String()
		}) {
			return
		}
		killed := time.Now()
		leader.kill()
		newHolder, acquired, err := waitHolder(t.Context(), leases, func(h string) bool { return h != "" && h != holder })
		if err != nil {
			t.Fatalf("round %d: no new leader after the kill: %v", round, err)
		}
		failover := acquired.Sub(killed)
		failovers = append(failovers, failover)
		killedInFlight = append(killedInFlight, flight.inFlight())
		t.Logf("round %d: leader %s killed with %s; %s took the Lease %.1fs after the kill (seen by polling it; its acquireTime says %.2fs)",
			round, leader.name, flight, newHolder, failover.Seconds(), e.leaseAcquireTime(leases).Sub(killed).Seconds())
		if failover > maxFailover {
			t.Errorf("round %d: the standby took the Lease %.1fs after the leader was killed, over the bound of %s", round, failover.Seconds(), maxFailover)
		}
		// Two replicas again, as a Deployment would restart the killed one.
		for i, c := range replicas {
			if c == leader {
				replicas[i] = e.startController(fmt.Sprintf("replica-%d", next), true)
				next++
			}
		}
		leader, holder = e.waitLeader(replicas)
		if holder != newHolder {
			t.Errorf("round %d: the Lease says %s leads, the replicas' metrics say %s (%s)", round, newHolder, leader.name, holder)
		}
		if !e.eventually(fmt.Sprintf("round %d: all %d pods running", round, want), suite.deadline, e.podsRunning) {
			e.checkInvariants(false)
			return
		}
		e.exactlyOneClaimPerPod(want)
		if seen := e.track.instancesSeen(); seen != want {
			t.Errorf("round %d: %d instances launched in all for %d one-node pods: a double launch", round, seen, want)
		}
	}
	t.Logf("failover after kill -9, from the kill to the new leader holding the Lease: %s (bound %s); nodeclaims in flight at each kill: %s",
		formatDurations(failovers), maxFailover, formatInts(killedInFlight))
	e.note("failover after kill -9, from the kill to the new leader holding the Lease: %s (bound %s); nodeclaims in flight (created, not registered) at each kill: %s",
		formatDurations(failovers), maxFailover, formatInts(killedInFlight))

	// SIGTERM: the leader should release the Lease as it leaves.
	lease := &coordinationv1.Lease{}
	if err := e.kube.Get(t.Context(), client.ObjectKey{Namespace: leaseNamespace, Name: leaseName}, lease); err != nil {
		t.Fatal(err)
	}
	w, err := leases.CoordinationV1().Leases(leaseNamespace).Watch(t.Context(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", leaseName).String(), ResourceVersion: lease.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	leader.stop()
	released, took, err := watchHandover(w, holder)
	w.Stop()
	switch {
	case err != nil:
		t.Errorf("after SIGTERM of leader %s: %v", leader.name, err)
	case !released:
		t.Errorf("leader %s stopped with SIGTERM without releasing the Lease: the standby took over %.1fs after the signal, once the Lease expired", leader.name, took.Sub(stopped).Seconds())
		e.note("graceful stop: Lease NOT released; the standby led %.1fs after SIGTERM", took.Sub(stopped).Seconds())
	default:
		t.Logf("graceful stop: leader %s released the Lease; the standby took over %.1fs after SIGTERM", leader.name, took.Sub(stopped).Seconds())
		e.note("graceful stop: Lease released; the standby led %.1fs after SIGTERM", took.Sub(stopped).Seconds())
	}

	e.scale("one-per-node", 0)
	e.settleToZero("after the failovers, scaled to zero: every node, nodeclaim and instance gone")
}

// waitLeader waits until exactly one replica reports itself leader in its
// metrics, and returns it with the Lease's holder.
func (e *env) waitLeader(replicas []*controller) (*controller, string) {
	e.t.Helper()
	var leader *controller
	var holder string
	ok := e.eventually("a leader elected", 2*time.Minute, func(ctx context.Context) (bool, string) {
		leader = nil
		var says []string
		for _, c := range replicas {
			families, err := c.metrics()
			if err != nil {
				says = append(says, fmt.Sprintf("%s: %v", c.name, err))
				continue
			}
			if sum(families, "leader_election_master_status", map[string]string{"name": leaseName}) == 1 {
				if leader != nil {
					return false, fmt.Sprintf("both %s and %s say they lead", leader.name, c.name)
				}
				leader = c
			}
		}
		if leader == nil {
			return false, "no replica leads: " + strings.Join(says, "; ")
		}
		lease := &coordinationv1.Lease{}
		if err := e.kube.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: leaseName}, lease); err != nil {
			return false, err.Error()
		}
		holder = ptrValue(lease.Spec.HolderIdentity)
		return holder != "", "the Lease has no holder"
	})
	if !ok {
		e.t.FailNow()
	}
	return leader, holder
}

// waitHolder reads the Lease every 50ms until its holder satisfies ok, and says
// when that was seen.
func waitHolder(ctx context.Context, cs kubernetes.Interface, ok func(string) bool) (string, time.Time, error) {
	var holder string
	var at time.Time
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		lease, err := cs.CoordinationV1().Leases(leaseNamespace).Get(ctx, leaseName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		holder, at = ptrValue(lease.Spec.HolderIdentity), time.Now()
		return ok(holder), nil
	})
	return holder, at, err
}

// watchHandover follows the Lease from a watch until someone other than old holds
// it, and says whether the Lease was released (no holder) on the way.
func watchHandover(w watch.Interface, old string) (released bool, at time.Time, err error) {
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return released, at, fmt.Errorf("the Lease watch ended")
			}
			lease, isLease := ev.Object.(*coordinationv1.Lease)
			if !isLease {
				continue
			}
			h := ptrValue(lease.Spec.HolderIdentity)
			if h == "" {
				released = true
			} else if h != old {
				return released, time.Now(), nil
			}
		case <-timeout:
			return released, at, fmt.Errorf("nobody took the Lease over within 2m (released: %v)", released)
		}
	}
}

// leaseAcquireTime is when the Lease's holder acquired it, as it wrote.
func (e *env) leaseAcquireTime(cs kubernetes.Interface) time.Time {
	lease, err := cs.CoordinationV1().Leases(leaseNamespace).Get(e.t.Context(), leaseName, metav1.GetOptions{})
	if err != nil || lease.Spec.AcquireTime == nil {
		return time.Time{}
	}
	return lease.Spec.AcquireTime.Time
}

// inFlightClaims counts NodeClaims as the API server has them now.
type inFlightClaims struct {
	// total counts every claim; unlaunched, those not launched yet; unregistered,
	// those launched whose Node has not registered yet.
	total, unlaunched, unregistered int
}

// inFlight counts the claims created and not registered yet, nor deleting.
func (f inFlightClaims) inFlight() int { return f.unlaunched + f.unregistered }

func (f inFlightClaims) String() string {
	return fmt.Sprintf("%d nodeclaims, %d in flight (%d not launched yet, %d launched, not registered)",
		f.total, f.inFlight(), f.unlaunched, f.unregistered)
}

func (e *env) claimsInFlight(ctx context.Context) (inFlightClaims, error) {
	claims := &v1.NodeClaimList{}
	if err := e.kube.List(ctx, claims); err != nil {
		return inFlightClaims{}, err
	}
	f := inFlightClaims{total: len(claims.Items)}
	for _, nc := range claims.Items {
		switch {
		case nc.DeletionTimestamp != nil:
		case !conditionTrue(&nc, v1.ConditionTypeLaunched):
			f.unlaunched++
		case !conditionTrue(&nc, v1.ConditionTypeRegistered):
			f.unregistered++
		}
	}
	return f, nil
}

func (e *env) claimCount(ctx context.Context) (int, error) {
	claims := &v1.NodeClaimList{}
	if err := e.kube.List(ctx, claims); err != nil {
		return 0, err
	}
	return len(claims.Items), nil
}

// exactlyOneClaimPerPod checks that pods that each need a node of their own got
// exactly that many NodeClaims, Nodes and instances, one instance per claim.
func (e *env) exactlyOneClaimPerPod(pods int) {
	e.t.Helper()
	inv, err := e.inventory(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	if len(inv.claims) != pods || len(inv.nodes) != pods || len(inv.instances) != pods {
		var names []string
		for _, nc := range inv.claims {
			names = append(names, fmt.Sprintf("%s (created %s, node %q)", nc.Name, nc.CreationTimestamp.Format("15:04:05"), nc.Status.NodeName))
		}
		e.t.Errorf("double launch: %d pods that need a node each, but %d nodeclaims, %d nodes, %d instances; claims: %s",
			pods, len(inv.claims), len(inv.nodes), len(inv.instances), strings.Join(names, ", "))
	}
	e.checkInvariants(false)
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func formatInts(ns []int) string {
	var parts []string
	for _, n := range ns {
		parts = append(parts, strconv.Itoa(n))
	}
	return strings.Join(parts, ", ")
}

func formatDurations(ds []time.Duration) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("%.1fs", d.Seconds()))
	}
	return strings.Join(parts, ", ")
}
