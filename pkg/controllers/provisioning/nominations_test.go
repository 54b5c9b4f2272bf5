package provisioning

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
	"github.com/nodetailor/tailor/pkg/state"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func pod(name, cpu string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: k8stypes.UID(name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}}
}

// claim is a NodeClaim created for cpu; launched gives it a provider ID.
func claim(name, cpu string, opts ...func(*v1.NodeClaim)) *v1.NodeClaim {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.NodePoolLabelKey: "default"}},
		Spec: v1.NodeClaimSpec{Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi")}}}}
	for _, o := range opts {
		o(nc)
	}
	return nc
}

func registered(providerID, node string) func(*v1.NodeClaim) {
	return func(nc *v1.NodeClaim) { nc.Status.ProviderID, nc.Status.NodeName = providerID, node }
}

func initialized(at time.Time) func(*v1.NodeClaim) {
	return func(nc *v1.NodeClaim) {
		nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeInitialized,
			Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)})
	}
}

// input is what state.Snapshot makes of these claims, nodes and pending pods.
func input(claims []*v1.NodeClaim, nodes []*scheduling.Node, pending ...*corev1.Pod) *scheduling.Input {
	in := &scheduling.Input{Pods: pending, Nodes: nodes}
	have := map[string]bool{}
	for _, n := range nodes {
		have[n.Node.Spec.ProviderID] = true
	}
	for _, nc := range claims {
		if nc.DeletionTimestamp == nil && !have[nc.Status.ProviderID] {
			in.Nodes = append(in.Nodes, &scheduling.Node{Node: state.LaunchingNode(nc), Launching: true})
		}
	}
	return in
}

func node(name, providerID, cpu string, pods ...*corev1.Pod) *scheduling.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}}}
	for _, p := range pods {
		p.Spec.NodeName = name
	}
	return &scheduling.Node{Node: n, Pods: pods}
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestReserve(t *testing.T) {
	tests := []struct {
		name   string
		claims []*v1.NodeClaim
		nodes  []*scheduling.Node
		noms   map[string]string // pod → claim
		at     time.Time         // when the nominations were made; now is t0 + grace/2
		// plan are the pods left to plan for; on, the pods then on each claim's node.
		plan []string
		on   map[string][]string
		kept []string
	}{{
		name:   "a pod waits on its launching claim's node",
		claims: []*v1.NodeClaim{claim("c1", "2")},
		noms:   map[string]string{"a": "c1"},
		plan:   []string{"b"},
		on:     map[string][]string{"c1": {"a"}},
		kept:   []string{"a"},
	}, {
		name:   "the claim is gone",
		claims: []*v1.NodeClaim{claim("c2", "2")},
		noms:   map[string]string{"a": "c1"},
		plan:   []string{"a", "b"},
	}, {
		name: "the claim is being deleted",
		claims: []*v1.NodeClaim{claim("c1", "2", func(nc *v1.NodeClaim) {
			nc.DeletionTimestamp = &metav1.Time{Time: t0}
		})},
		noms: map[string]string{"a": "c1"},
		plan: []string{"a", "b"},
	}, {
		name:   "the claim's node registered: the pod waits on the real node",
		claims: []*v1.NodeClaim{claim("c1", "2", registered("sim:///z/i-1", "i-1"))},
		nodes:  []*scheduling.Node{node("i-1", "sim:///z/i-1", "2")},
		noms:   map[string]string{"a": "c1"},
		plan:   []string{"b"},
		on:     map[string][]string{"c1": {"a"}},
		kept:   []string{"a"},
	}, {
		name:   "the node is up and the pod still fits: it waits out the grace",
		claims: []*v1.NodeClaim{claim("c1", "2", registered("sim:///z/i-1", "i-1"), initialized(t0))},
		nodes:  []*scheduling.Node{node("i-1", "sim:///z/i-1", "2", pod("x", "1"))},
		noms:   map[string]string{"a": "c1"},
		at:     t0,
		plan:   []string{"b"},
		on:     map[string][]string{"c1": {"x", "a"}},
		kept:   []string{"a"},
	}, {
		name:   "the node is up and someone took the room: the pod is planned for at once",
		claims: []*v1.NodeClaim{claim("c1", "2", registered("sim:///z/i-1", "i-1"), initialized(t0))},
		nodes:  []*scheduling.Node{node("i-1", "sim:///z/i-1", "2", pod("x", "1500m"))},
		noms:   map[string]string{"a": "c1"},
		at:     t0,
		plan:   []string{"a", "b"},
		on:     map[string][]string{"c1": {"x"}},
	}, {
		name:   "the node is up with room for the pod but no more pods: the pod is planned for at once",
		claims: []*v1.NodeClaim{claim("c1", "2", registered("sim:///z/i-1", "i-1"), initialized(t0))},
		nodes: []*scheduling.Node{func() *scheduling.Node {
			n := node("i-1", "sim:///z/i-1", "2", pod("x", "100m"))
			n.Node.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("1")
			return n
		}()},
		noms: map[string]string{"a": "c1"},
		at:   t0,
		plan: []string{"a", "b"},
		on:   map[string][]string{"c1": {"x"}},
	}, {
		name:   "the node has been up longer than the grace",
		claims: []*v1.NodeClaim{claim("c1", "2", registered("sim:///z/i-1", "i-1"), initialized(t0.Add(-time.Minute)))},
		nodes:  []*scheduling.Node{node("i-1", "sim:///z/i-1", "2")},
		noms:   map[string]string{"a": "c1"},
		at:     t0.Add(-time.Minute),
		plan:   []string{"a", "b"},
	}, {
		name:   "a nomination of a pod no longer pending is forgotten",
		claims: []*v1.NodeClaim{claim("c1", "2")},
		noms:   map[string]string{"gone": "c1"},
		plan:   []string{"a", "b"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(tt.claims, tt.nodes, pod("a", "1"), pod("b", "1"))
			n := nominations{}
			for p, c := range tt.noms {
				n.nominate(pod(p, "1"), c, tt.at)
			}
			got, _ := n.reserve(in, tt.claims, t0.Add(NominationGrace/2))
			if diff := cmpNames(names(got), tt.plan); diff {
				t.Errorf("to plan: got %v, want %v", names(got), tt.plan)
			}
			nodes := claimNodes(in, tt.claims)
			for c, want := range tt.on {
				if got := names(nodes[c].Pods); cmpNames(got, want) {
					t.Errorf("on %s: got %v, want %v", c, got, want)
				}
			}
			var kept []string
			for uid := range n {
				kept = append(kept, string(uid))
			}
			if cmpNames(kept, tt.kept) {
				t.Errorf("nominations kept: got %v, want %v", kept, tt.kept)
			}
		})
	}
}

// A pod whose room was taken while another pod still waits for its node is held
// back, neither planned nor holding room, until no pod waits any more or
// NominationGrace passed; then it is planned with the room truly left.
func TestRoomTakenWhileOthersWaitIsHeldBack(t *testing.T) {
	claims := []*v1.NodeClaim{
		claim("x", "2", registered("sim:///z/i-x", "i-x"), initialized(t0)),
		claim("y", "2"), // still launching
	}
	nodes := func() []*scheduling.Node {
		return []*scheduling.Node{node("i-x", "sim:///z/i-x", "2", pod("taker", "1500m"))}
	}
	a, b := pod("a", "1"), pod("b", "1")
	n := nominations{}
	n.nominate(a, "x", t0)
	n.nominate(b, "y", t0)
	in := input(claims, nodes(), a, b)
	plan, lapsed := n.reserve(in, claims, t0.Add(time.Second))
	if len(plan) != 0 || lapsed.RoomTaken != 1 || lapsed.Held != 1 || !n.held(a) || !n.holding() {
		t.Fatalf("to plan %v, lapses %+v, a held %v; want a held back while b waits for y", names(plan), lapsed, n.held(a))
	}
	if on := names(claimNodes(in, claims)["x"].Pods); len(on) != 1 {
		t.Errorf("x holds %v: a held back keeps no room", on)
	}
	// Still held a while later, as b still waits.
	if plan, lapsed = n.reserve(input(claims, nodes(), a, b), claims, t0.Add(5*time.Second)); len(plan) != 0 || lapsed.Held != 1 {
		t.Errorf("to plan %v, lapses %+v; want a still held back", names(plan), lapsed)
	}
	// b was placed: nothing waits, and a is planned.
	plan, lapsed = n.reserve(input(claims, nodes(), a), claims, t0.Add(6*time.Second))
	if cmpNames(names(plan), []string{"a"}) || lapsed.Released != 1 || !lapsed.any() || n.holding() {
		t.Errorf("to plan %v, lapses %+v; want a released once b no longer waits", names(plan), lapsed)
	}

	// Held back past NominationGrace, a pod is planned even while others wait.
	n = nominations{}
	n.nominate(a, "x", t0)
	n.nominate(b, "y", t0)
	n.reserve(input(claims, nodes(), a, b), claims, t0.Add(time.Second))
	plan, lapsed = n.reserve(input(claims, nodes(), a, b), claims, t0.Add(time.Second+NominationGrace))
	if cmpNames(names(plan), []string{"a"}) || lapsed.Released != 1 {
		t.Errorf("to plan %v, lapses %+v; want a planned after the grace", names(plan), lapsed)
	}
}

func cmpNames(a, b []string) bool {
	if len(a) != len(b) {
		return true
	}
	for i := range a {
		if a[i] != b[i] {
			return true
		}
	}
	return false
}

// The room a launching claim holds for its pods is not handed to another pod: the
// plan makes a new node for the newcomer instead of binding it to the claim.
func TestReservedRoomIsNotHandedOutTwice(t *testing.T) {
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	types := schedtest.SyntheticTypes(20)
	nc := claim("c1", "1")
	nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m"),
		corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("110")}
	waiting, newcomer := pod("a", "1500m"), pod("b", "1")

	solve := func(n nominations) *scheduling.Plan {
		t.Helper()
		in := input([]*v1.NodeClaim{nc}, nil, waiting, newcomer)
		in.NodePools = []*scheduling.NodePool{{NodePool: pool, InstanceTypes: types}}
		in.Pods, _ = n.reserve(in, []*v1.NodeClaim{nc}, t0)
		plan, err := scheduling.Solve(in, scheduling.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return plan
	}
	// Without the reservation the newcomer would take the waiting pod's room.
	if plan := solve(nominations{}); len(plan.Bindings) == 0 {
		t.Fatalf("the claim's room should look free without the nomination: %+v", plan)
	}
	n := nominations{}
	n.nominate(waiting, "c1", t0)
	plan := solve(n)
	for _, b := range plan.Bindings {
		t.Errorf("pod %s bound to %s, whose room is held for pod a", b.Pod.Name, b.Node)
	}
	if len(plan.NewNodes) != 1 || len(plan.NewNodes[0].Pods) != 1 || plan.NewNodes[0].Pods[0].Name != "b" {
		t.Errorf("want one new node for pod b, got %+v", plan.NewNodes)
	}
}

// The kube-scheduler put c (planned for claim y) on claim x's node, where it took
// the room of a and b. Planning a and b alone into the room left needs a new node;
// planning a, b and d afresh fits all three into the same two nodes, and is kept.
func TestPlanPodsRepacksDisplacedPods(t *testing.T) {
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pools := []*scheduling.NodePool{{NodePool: pool, InstanceTypes: schedtest.SyntheticTypes(20)}}
	c := pod("c", "1500m")
	claims := []*v1.NodeClaim{
		claim("x", "2", registered("sim:///z/i-x", "i-x"), initialized(t0)),
		claim("y", "2", registered("sim:///z/i-y", "i-y"), initialized(t0.Add(2*time.Second))),
	}
	a, b, d := pod("a", "1"), pod("b", "1"), pod("d", "500m")
	// a and b are held back while d waits for y, and planned once NominationGrace
	// passed with d still waiting (see TestRoomTakenWhileOthersWaitIsHeldBack).
	snapshot := func() (*scheduling.Input, *scheduling.Input, lapses) {
		in := func() *scheduling.Input {
			in := input(claims, []*scheduling.Node{node("i-x", "sim:///z/i-x", "2", c), node("i-y", "sim:///z/i-y", "2")}, a, b, d)
			in.NodePools = pools
			return in
		}
		n := nominations{}
		n.nominate(a, "x", t0)
		n.nominate(b, "x", t0)
		n.nominate(d, "y", t0)
		if _, held := n.reserve(in(), claims, t0.Add(time.Second)); held.RoomTaken != 2 || held.Held != 2 {
			t.Fatalf("lapsed %+v, want a and b's room taken and both held back", held)
		}
		pinned := in()
		fresh := *pinned
		fresh.Nodes = cloneNodes(pinned.Nodes)
		var lapsed lapses
		pinned.Pods, lapsed = n.reserve(pinned, claims, t0.Add(time.Second+NominationGrace))
		return pinned, &fresh, lapsed
	}
	pinned, fresh, lapsed := snapshot()
	if lapsed.Released != 2 || len(pinned.Pods) != 2 {
		t.Fatalf("lapsed %+v, to plan %v; want a and b planned after the grace, d still waiting", lapsed, names(pinned.Pods))
	}
	in, plan, repacked, err := planPods(pinned, fresh, lapsed.any(), scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !repacked || in != fresh || len(plan.NewNodes) != 0 || len(plan.Bindings) != 3 {
		t.Errorf("repacked %v, %d new nodes, %d bindings; want all three pods repacked onto the two nodes", repacked, len(plan.NewNodes), len(plan.Bindings))
	}
	// The pinned plan alone needs a node: that is what repacking saves.
	pinned, fresh, lapsed = snapshot()
	if _, plan, _, _ := planPods(pinned, fresh, false, scheduling.Options{}); len(plan.NewNodes) == 0 {
		t.Error("the displaced pods fit without repacking; the case shows nothing")
	}
	// With no lapse, the pinned plan is kept without a second solve.
	if in, _, repacked, _ := planPods(pinned, fresh, false, scheduling.Options{}); repacked || in != pinned {
		t.Error("repacked without a lapse")
	}
	// The clones are the fresh input's own: reserving did not add the waiting pods to them.
	for _, n := range fresh.Nodes {
		if n.Node.Name == "i-y" && len(n.Pods) != 0 {
			t.Errorf("the fresh copy of i-y holds %v", names(n.Pods))
		}
	}
}

// A pod the kube-scheduler places only after pods planned for other nodes (a zone
// spread whose zone's other pods wait for a larger node held back) does not hold
// back the batch's larger nodes: waiting for it held them until MaxReleaseHold
// ran out, by which time its nomination lapsed and it got a node of its own
// (Karpenter's example workloads: 43 nodes where the plan has 40).
func TestPodsPlacedAfterOthersDoNotHoldTheRelease(t *testing.T) {
	zoneSpread := func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "zs"}}}}
	}
	for _, tc := range []struct {
		name  string
		shape func(*corev1.Pod)
		after bool
	}{
		{"plain", func(*corev1.Pod) {}, false},
		{"zone spread", zoneSpread, true},
		{"zone spread, soft", func(p *corev1.Pod) {
			zoneSpread(p)
			p.Spec.TopologySpreadConstraints[0].WhenUnsatisfiable = corev1.ScheduleAnyway
		}, false},
		{"hostname spread", func(p *corev1.Pod) {
			zoneSpread(p)
			p.Spec.TopologySpreadConstraints[0].TopologyKey = corev1.LabelHostname
		}, false},
		{"required pod affinity", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: corev1.LabelTopologyZone, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}}}
		}, true},
		{"pod anti-affinity", func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "zs"}}}}}}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waiting := pod("waiting", "1")
			tc.shape(waiting)
			if got := placedAfterOthers(waiting); got != tc.after {
				t.Fatalf("placedAfterOthers = %v, want %v", got, tc.after)
			}
			clk := clocktesting.NewFakeClock(t0)
			order := nodeclaim.NewReleaseOrder(clk)
			batch := order.Batch([]float64{1, 8})
			batch.Add(0, "small")
			batch.Add(1, "large")
			p := (&Provisioner{nominated: nominations{}, planned: map[k8stypes.UID]bool{}}).OrderReleases(order)
			p.nominate(waiting, "small", t0)
			if order.Hold("large") == 0 || !order.Waiting() {
				t.Fatal("the large node is not held back while the small one launches")
			}
			clk.Step(time.Second)
			p.observeReleases([]*v1.NodeClaim{claim("small", "1", registered("sim:///z/i-s", "i-s"), initialized(t0)), claim("large", "8")})
			if held := order.Waiting(); held == tc.after {
				t.Errorf("with the small node up and its pod pending, the large node held back: %v, want %v", held, !tc.after)
			}
		})
	}
}

// A pod whose planned node is up with room, but whose hard zone spread the
// kube-scheduler would not let onto it even once the pods waiting for other nodes
// have landed (the other zone's node is full of pods that could go anywhere), is
// planned for at once when no other pod waits, rather than after
// NominationGrace. With the other zone's tenant placed, or on its way to a node
// launching there, it waits.
func TestSpreadBarringThePlannedNodeTakesTheRoom(t *testing.T) {
	tenant := func(name string) *corev1.Pod {
		p := pod(name, "100m")
		p.Labels = map[string]string{"app": "shop"}
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1,
			TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "shop"}}}}
		return p
	}
	zoned := func(n *scheduling.Node, zone string) *scheduling.Node {
		n.Node.Labels = map[string]string{corev1.LabelTopologyZone: zone, corev1.LabelHostname: n.Node.Name}
		return n
	}
	inZoneB := func(nc *v1.NodeClaim) {
		nc.Spec.Requirements = append(nc.Spec.Requirements, v1.NodeSelectorRequirementWithMinValues{
			Key: corev1.LabelTopologyZone, Operator: v1.NodeSelectorOpIn, Values: []string{"b"}})
	}
	claims := []*v1.NodeClaim{
		claim("ca", "2", registered("sim:///a/i-a", "i-a"), initialized(t0)),
		claim("cb", "2", registered("sim:///b/i-b", "i-b"), initialized(t0)),
		claim("cb2", "2", inZoneB), // launching in zone b
	}
	for _, tt := range []struct {
		name      string
		zoneB     []*corev1.Pod
		peer      bool // a tenant waits for cb2
		wantPlans bool
	}{
		{"zone b full of others: the spread bars zone a", []*corev1.Pod{pod("other", "1900m")}, false, true},
		{"zone b has its tenant: the pod waits on its node", []*corev1.Pod{pod("other", "1"), tenant("t-b")}, false, false},
		{"zone b's tenant is on its way: the pod waits on its node", []*corev1.Pod{pod("other", "1900m")}, true, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := tenant("s")
			nodes := []*scheduling.Node{
				zoned(node("i-a", "sim:///a/i-a", "2", tenant("t-a")), "a"),
				zoned(node("i-b", "sim:///b/i-b", "2", tt.zoneB...), "b"),
			}
			n := nominations{}
			n.nominate(s, "ca", t0)
			pending := []*corev1.Pod{s}
			if tt.peer {
				p := tenant("p")
				n.nominate(p, "cb2", t0)
				pending = append(pending, p)
			}
			in := input(claims, nodes, pending...)
			plan, lapsed := n.reserve(in, claims, t0.Add(time.Second))
			planned := len(plan) == 1 && plan[0].Name == "s"
			if planned != tt.wantPlans {
				t.Errorf("to plan %v, lapses %+v; want s planned: %v", names(plan), lapsed, tt.wantPlans)
			}
			held := slices.ContainsFunc(claimNodes(in, claims)["ca"].Pods, func(p *corev1.Pod) bool { return p.Name == "s" })
			if held == tt.wantPlans {
				t.Errorf("s holds room on its node: %v, want %v", held, !tt.wantPlans)
			}
			if tt.wantPlans && lapsed.RoomTaken != 1 {
				t.Errorf("lapses %+v, want one room taken", lapsed)
			}
		})
	}
}
