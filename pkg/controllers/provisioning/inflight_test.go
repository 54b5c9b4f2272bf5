package provisioning

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// Pods whose planned room is gone get no new NodeClaim while the nodes in flight
// (launched, not registered) still have room for them under their constraints
// (issue 26 §3): on the realistic cloud, nodes come up 20–50 s apart in any order,
// the kube-scheduler puts pods on whichever is up first, and every claim made for
// the pods it displaced cost another 30–45 s launch and registration.

// zonePool is a NodePool of the synthetic types in zones a and b.
func zonePool() []*scheduling.NodePool {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.Requirements = []v1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelTopologyZone,
		Operator: v1.NodeSelectorOpIn, Values: []string{"zone-a", "zone-b"}}}
	return []*scheduling.NodePool{{NodePool: np, InstanceTypes: schedtest.SyntheticTypes(4)}}
}

// launched is a claim in zone whose instance is launched with 2 cpu, not registered.
func launched(name, zone string) *v1.NodeClaim {
	nc := claim(name, "2")
	nc.Labels[corev1.LabelTopologyZone] = zone
	nc.Status.ProviderID = "sim:///" + zone + "/i-" + name
	nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	return nc
}

// up is a launched claim whose node registered and was initialized at t0, and that node.
func up(name, zone string, bound ...*corev1.Pod) (*v1.NodeClaim, *scheduling.Node) {
	nc := launched(name, zone)
	registered(nc.Status.ProviderID, "i-"+name)(nc)
	initialized(t0)(nc)
	n := node("i-"+name, nc.Status.ProviderID, "2", bound...)
	n.Node.Labels = map[string]string{corev1.LabelTopologyZone: zone, corev1.LabelHostname: "i-" + name, v1.NodePoolLabelKey: "default"}
	return nc, n
}

// replan is one provisioning pass over the snapshot in, as Provision makes it:
// the waiting pods hold their room, the pods whose nominations lapsed are planned,
// all of them afresh when that is cheaper. Its bindings to claims become
// nominations.
func replan(t *testing.T, n nominations, claims []*v1.NodeClaim, in *scheduling.Input, now time.Time) *scheduling.Plan {
	t.Helper()
	fresh := *in
	fresh.Nodes = cloneNodes(in.Nodes)
	var lapsed lapses
	in.Pods, lapsed = n.reserve(in, claims, now)
	fresh.Pods = slices.DeleteFunc(slices.Clone(fresh.Pods), n.held)
	if len(in.Pods) == 0 {
		return &scheduling.Plan{}
	}
	kept, plan, repacked, err := planPods(in, &fresh, lapsed.any(), scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if repacked {
		for uid, nom := range n {
			if nom.claim != "" {
				delete(n, uid)
			}
		}
	}
	claimOf := claimOfNode(claimNodes(kept, claims))
	for _, b := range plan.Bindings {
		if c, ok := claimOf[b.Node]; ok {
			n.nominate(b.Pod, c, now)
		}
	}
	return plan
}

// A zone-spread pod whose zone's room was taken, while the zone's node in flight
// is planned for a pod that may go anywhere and the other zone's node in flight
// has room: the two swap, and no claim is made.
func TestZoneSpreadPodTakesItsZonesNodeInFlight(t *testing.T) {
	spread := []testobj.PodOption{testobj.Labels("tenant", "t"),
		testobj.Spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, map[string]string{"tenant": "t"})}
	s1, s2 := testobj.Pod("s1", "1", "1Gi", spread...), testobj.Pod("s2", "1", "1Gi", spread...)
	// n1 was planned for fb, in zone b; the kube-scheduler put it on ua, where s1
	// was planned. n2 waits for fa, in zone a.
	n1, n2 := pod("n1", "1500m"), pod("n2", "1500m")
	ua, uaNode := up("ua", "zone-a", n1)
	ub, ubNode := up("ub", "zone-b", s2)
	fa, fb := launched("fa", "zone-a"), launched("fb", "zone-b")
	claims := []*v1.NodeClaim{ua, ub, fa, fb}
	snapshot := func() *scheduling.Input {
		in := input(claims, []*scheduling.Node{uaNode, ubNode}, n2, s1)
		in.NodePools = zonePool()
		return in
	}
	n := nominations{}
	n.nominate(s1, "ua", t0)
	n.nominate(n2, "fa", t0)
	for _, at := range []time.Duration{time.Second, 5 * time.Second, NominationGrace + 2*time.Second, 40 * time.Second} {
		plan := replan(t, n, claims, snapshot(), t0.Add(at))
		if len(plan.NewNodes) > 0 {
			t.Fatalf("at +%v: a new claim for %v, while fa (zone a) can take s1 and fb (zone b) n2", at, names(plan.NewNodes[0].Pods))
		}
	}
	if nom := n[s1.UID]; nom.claim != "fa" {
		t.Errorf("s1 waits for %q, want fa: its zone's node in flight", nom.claim)
	}
	if nom := n[n2.UID]; nom.claim != "fb" {
		t.Errorf("n2 waits for %q, want fb: the room n1 left", nom.claim)
	}
}

// With no room in flight in its zone, the zone-spread pod gets its claim once
// its hold is over, whatever the first pass finds.
func TestZoneSpreadPodWithoutRoomInFlightGetsAClaim(t *testing.T) {
	spread := []testobj.PodOption{testobj.Labels("tenant", "t"),
		testobj.Spread(corev1.LabelTopologyZone, 1, corev1.DoNotSchedule, map[string]string{"tenant": "t"})}
	s1, s2 := testobj.Pod("s1", "1", "1Gi", spread...), testobj.Pod("s2", "1", "1Gi", spread...)
	n1, n2 := pod("n1", "1500m"), pod("n2", "1500m")
	ua, uaNode := up("ua", "zone-a", n1)
	ub, ubNode := up("ub", "zone-b", s2)
	fb := launched("fb", "zone-b") // n2 waits here: zone b only
	claims := []*v1.NodeClaim{ua, ub, fb}
	n := nominations{}
	n.nominate(s1, "ua", t0)
	n.nominate(n2, "fb", t0)
	snapshot := func() *scheduling.Input {
		in := input(claims, []*scheduling.Node{uaNode, ubNode}, n2, s1)
		in.NodePools = zonePool()
		return in
	}
	if plan := replan(t, n, claims, snapshot(), t0.Add(time.Second)); len(plan.NewNodes) > 0 || !n.held(s1) {
		t.Fatalf("s1 held %v, %d new nodes; want it held back while n2 waits", n.held(s1), len(plan.NewNodes))
	}
	plan := replan(t, n, claims, snapshot(), t0.Add(NominationGrace+2*time.Second))
	if len(plan.NewNodes) != 1 || names(plan.NewNodes[0].Pods)[0] != "s1" || len(plan.Unschedulable) != 0 {
		t.Fatalf("new nodes %d, unschedulable %d; want one new node for s1, in zone a", len(plan.NewNodes), len(plan.Unschedulable))
	}
	if z := plan.NewNodes[0].Requirements.Labels()[corev1.LabelTopologyZone]; z != "zone-a" {
		t.Errorf("s1's node is in zone %q, want zone-a", z)
	}
}
