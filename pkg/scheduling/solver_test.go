package scheduling_test

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

func aws(t testing.TB) []*InstanceType {
	t.Helper()
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	return types
}

func pool(np *v1.NodePool, types []*InstanceType) *NodePool {
	return &NodePool{NodePool: np, InstanceTypes: types}
}

func existingNode(name string, cpu, memory string, labels map[string]string, bound ...*corev1.Pod) *Node {
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
		corev1.ResourcePods: resource.MustParse("110")}
	lbls := map[string]string{v1.LabelHostname: name}
	for k, v := range labels {
		lbls[k] = v
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
	n.Status.Allocatable, n.Status.Capacity = alloc, alloc
	for _, p := range bound {
		p.Spec.NodeName = name
	}
	return &Node{Node: n, Pods: bound}
}

// The seed example: a Deployment of 10 replicas of 1 cpu and 1Gi, a default NodePool.
func TestSeedExampleOnAWS(t *testing.T) {
	in := &Input{Pods: pods(10, "inflate", "1", "1Gi"), NodePools: []*NodePool{pool(makeNodePool("default"), aws(t))}}
	plan := solve(t, in)
	if len(plan.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %v", plan.Unschedulable)
	}
	for _, n := range plan.NewNodes {
		t.Logf("%s: %s %s/%s $%.4f, %d pods", n.Name, n.InstanceType.Name, n.Offering.Zone, n.Offering.CapacityType, n.Offering.Price, len(n.Pods))
	}
	placed := 0
	for _, n := range plan.NewNodes {
		placed += len(n.Pods)
		if n.Offering.CapacityType != v1.CapacityTypeSpot {
			t.Errorf("node %s is %s; spot is allowed and cheaper", n.Name, n.Offering.CapacityType)
		}
		if len(n.InstanceTypes) > 60 {
			t.Errorf("node %s keeps %d options, want at most 60", n.Name, len(n.InstanceTypes))
		}
	}
	if placed != 10 {
		t.Errorf("%d pods on new nodes, want 10", placed)
	}
}

// For identical pods the cheapest plan is a coin-change problem over instance types
// (each holds some number of pods at some price), solved exactly by dynamic
// programming. The solver's plan must come within 5% of it.
func TestIdenticalPodsNearOptimal(t *testing.T) {
	types := aws(t)
	for _, tc := range []struct {
		n           int
		cpu, memory string
	}{
		{10, "1", "1Gi"}, {7, "500m", "4Gi"}, {25, "2", "1Gi"}, {40, "250m", "512Mi"}, {3, "8", "30Gi"},
	} {
		name := fmt.Sprintf("%dx%s-%s", tc.n, tc.cpu, tc.memory)
		t.Run(name, func(t *testing.T) {
			in := &Input{Pods: pods(tc.n, "p", tc.cpu, tc.memory), NodePools: []*NodePool{pool(makeNodePool("default"), types)}}
			plan := solve(t, in)
			best := optimalIdentical(t, types, in.Pods[0], tc.n)
			if plan.Cost() > best*1.05+1e-9 {
				t.Errorf("plan costs %.4f/h with %d nodes; the optimum is %.4f/h", plan.Cost(), len(plan.NewNodes), best)
			}
		})
	}
}

func optimalIdentical(t *testing.T, types []*InstanceType, pod *corev1.Pod, n int) float64 {
	req := PodRequests(pod)
	cost := make([]float64, n+1)
	for k := 1; k <= n; k++ {
		cost[k] = math.Inf(1)
	}
	for _, it := range types {
		alloc := it.Allocatable()
		per := n
		for name, q := range req {
			have := alloc[name]
			per = min(per, int(have.MilliValue()/max(q.MilliValue(), 1)))
		}
		if per == 0 {
			continue
		}
		o, _ := it.CheapestOffering(nil)
		for k := 1; k <= n; k++ {
			cost[k] = min(cost[k], cost[max(k-per, 0)]+o.Price)
		}
	}
	return cost[n]
}

func TestExistingRoomFirstThenLaunchingThenNew(t *testing.T) {
	existing := existingNode("existing", "2", "4Gi", nil, makePod("already", "1", "1Gi"))
	launching := existingNode("launching", "4", "8Gi", nil)
	launching.Launching = true
	in := &Input{
		Pods:      pods(6, "web", "1", "1Gi"),
		Nodes:     []*Node{launching, existing},
		NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(20))},
	}
	plan := solve(t, in)
	count := map[string]int{}
	for _, b := range plan.Bindings {
		count[b.Node]++
	}
	if count["existing"] != 1 || count["launching"] != 4 {
		t.Errorf("bindings %v, want 1 on existing (its free room) and 4 on launching", count)
	}
	if len(plan.NewNodes) != 1 || len(plan.NewNodes[0].Pods) != 1 {
		t.Errorf("want one new node for the remaining pod, got %d", len(plan.NewNodes))
	}
}

func TestNodePoolWeightOrder(t *testing.T) {
	in := &Input{Pods: pods(3, "web", "1", "1Gi"), NodePools: []*NodePool{
		pool(makeNodePool("a-low"), schedtest.SyntheticTypes(10)),
		pool(makeNodePool("z-high", weight(50)), schedtest.SyntheticTypes(10)),
	}}
	plan := solve(t, in)
	for _, n := range plan.NewNodes {
		if n.NodePool != "z-high" {
			t.Errorf("node from %s, want the heavier NodePool z-high", n.NodePool)
		}
	}
}

func TestTaintedGPUPool(t *testing.T) {
	types := aws(t)
	gpu := makeNodePool("gpu", weight(10), taint("nvidia.com/gpu", "true", corev1.TaintEffectNoSchedule),
		requirement("karpenter.k8s.aws/instance-gpu-count", v1.NodeSelectorOpGt, "0"))
	in := &Input{
		Pods: []*corev1.Pod{
			makePod("trainer", "4", "16Gi", withRequest("nvidia.com/gpu", "1"), withToleration("nvidia.com/gpu", "true", corev1.TaintEffectNoSchedule)),
			makePod("web", "1", "1Gi"),
			makePod("gpu-without-toleration", "1", "1Gi", withRequest("nvidia.com/gpu", "1")),
		},
		NodePools: []*NodePool{pool(makeNodePool("default", requirement("karpenter.k8s.aws/instance-category", v1.NodeSelectorOpIn, "c", "m", "r")), types), pool(gpu, types)},
	}
	plan := solve(t, in)
	where := map[string]string{}
	for _, n := range plan.NewNodes {
		for _, p := range n.Pods {
			where[p.Name] = n.NodePool + "/" + n.InstanceType.Name
		}
	}
	if !strings.HasPrefix(where["trainer"], "gpu/") {
		t.Errorf("trainer on %q, want the gpu NodePool", where["trainer"])
	}
	if !strings.HasPrefix(where["web"], "default/") {
		t.Errorf("web on %q: it does not tolerate the gpu taint", where["web"])
	}
	if len(plan.Unschedulable) != 1 || plan.Unschedulable[0].Pod.Name != "gpu-without-toleration" {
		t.Fatalf("unschedulable %v, want gpu-without-toleration", plan.Unschedulable)
	}
	reason := plan.Unschedulable[0].Reason
	for _, want := range []string{"NodePool gpu: taint nvidia.com/gpu=true:NoSchedule not tolerated", "NodePool default: no instance type offers 1 nvidia.com/gpu"} {
		if !strings.Contains(reason, want) {
			t.Errorf("reason %q does not say %q", reason, want)
		}
	}
}

func TestArchitectureSelection(t *testing.T) {
	in := &Input{Pods: pods(4, "arm", "1", "2Gi", withNodeSelector(v1.LabelArch, "arm64")),
		NodePools: []*NodePool{pool(makeNodePool("default"), aws(t))}}
	plan := solve(t, in)
	for _, n := range plan.NewNodes {
		for _, it := range n.InstanceTypes {
			if r, _ := it.Requirements.Get(v1.LabelArch); !r.Has("arm64") {
				t.Errorf("option %s is not arm64", it.Name)
			}
		}
	}
}

func TestUnknownLabelIsUnschedulable(t *testing.T) {
	in := &Input{Pods: []*corev1.Pod{makePod("p", "1", "1Gi", withNodeSelector("example.com/team", "payments"))},
		NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(5))}}
	plan := solve(t, in)
	if len(plan.Unschedulable) != 1 || !strings.Contains(plan.Unschedulable[0].Reason, "example.com/team In [payments], a label no instance type or template defines") {
		t.Fatalf("got %v", plan.Unschedulable)
	}
	// A template label provides it.
	in.NodePools = []*NodePool{pool(makeNodePool("default", templateLabel("example.com/team", "payments")), schedtest.SyntheticTypes(5))}
	plan = solve(t, in)
	if len(plan.Unschedulable) != 0 {
		t.Fatalf("template label should satisfy the selector: %v", plan.Unschedulable)
	}
}

func TestTooBigForAnyType(t *testing.T) {
	in := &Input{Pods: []*corev1.Pod{makePod("huge", "200", "1Gi")},
		NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(10))}}
	plan := solve(t, in)
	if len(plan.Unschedulable) != 1 || !strings.Contains(plan.Unschedulable[0].Reason, "NodePool default: no instance type offers 200 cpu") {
		t.Fatalf("got %v", plan.Unschedulable)
	}
}

func TestLimitsStopGrowth(t *testing.T) {
	in := &Input{Pods: pods(20, "web", "1", "1Gi"),
		NodePools: []*NodePool{pool(makeNodePool("default", limit(corev1.ResourceCPU, "8")), schedtest.SyntheticTypes(4))}}
	plan := solve(t, in)
	if len(plan.Unschedulable) == 0 {
		t.Fatal("a cpu limit of 8 cannot hold 20 pods of 1 cpu")
	}
	if !strings.Contains(plan.Unschedulable[0].Reason, "limit cpu=8 reached") {
		t.Errorf("reason %q does not name the limit", plan.Unschedulable[0].Reason)
	}
	// Existing nodes of the pool count against the limit too.
	full := existingNode("old", "8", "16Gi", map[string]string{v1.NodePoolLabelKey: "default"})
	in.Nodes = []*Node{full}
	in.Pods = pods(20, "more", "1", "1Gi")
	plan = solve(t, in)
	if len(plan.NewNodes) != 0 {
		t.Errorf("%d new nodes despite the pool's limit being used up by an existing node", len(plan.NewNodes))
	}
}

func TestNodesLimit(t *testing.T) {
	in := &Input{Pods: pods(5, "solo", "1", "1Gi", withLabels("app", "solo"), withPodAntiAffinity(v1.LabelHostname, map[string]string{"app": "solo"})),
		NodePools: []*NodePool{pool(makeNodePool("default", limit("nodes", "3")), schedtest.SyntheticTypes(4))}}
	plan := solve(t, in)
	if len(plan.NewNodes) != 3 || len(plan.Unschedulable) != 2 {
		t.Errorf("%d new nodes and %d unschedulable, want 3 and 2 under a 3-node limit", len(plan.NewNodes), len(plan.Unschedulable))
	}
}

func TestZonalSpread(t *testing.T) {
	sel := map[string]string{"app": "web"}
	in := &Input{Pods: pods(9, "web", "1", "1Gi", withLabels("app", "web"), withSpread(v1.LabelZone, 1, corev1.DoNotSchedule, sel)),
		NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(20))}}
	plan := solve(t, in)
	perZone := map[string]int{}
	for _, n := range plan.NewNodes {
		perZone[n.Offering.Zone] += len(n.Pods)
	}
	if len(perZone) != 3 || perZone["zone-a"] != 3 || perZone["zone-b"] != 3 {
		t.Errorf("pods per zone %v, want 3 in each of 3 zones", perZone)
	}
}

func TestSpreadCountsExistingPods(t *testing.T) {
	sel := map[string]string{"app": "web"}
	existing := existingNode("in-a", "4", "8Gi", map[string]string{v1.LabelZone: "zone-a"},
		makePod("old-1", "100m", "100Mi", withLabels("app", "web")), makePod("old-2", "100m", "100Mi", withLabels("app", "web")))
	in := &Input{Pods: pods(4, "web", "1", "1Gi", withLabels("app", "web"), withSpread(v1.LabelZone, 1, corev1.DoNotSchedule, sel)),
		Nodes:     []*Node{existing},
		NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(20))}}
	plan := solve(t, in)
	perZone := map[string]int{"zone-a": 2}
	for _, b := range plan.Bindings {
		perZone["zone-a"]++
		_ = b
	}
	for _, n := range plan.NewNodes {
		perZone[n.Offering.Zone] += len(n.Pods)
	}
	if perZone["zone-a"] != 2 || perZone["zone-b"] != 2 || perZone["zone-c"] != 2 {
		t.Errorf("pods per zone %v, want 2 each (2 already in zone-a)", perZone)
	}
}

func TestHostnameAntiAffinity(t *testing.T) {
	sel := map[string]string{"app": "db"}
	in := &Input{Pods: pods(4, "db", "500m", "1Gi", withLabels("app", "db"), withPodAntiAffinity(v1.LabelHostname, sel)),
		NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(20))}}
	plan := solve(t, in)
	if len(plan.NewNodes) != 4 {
		t.Errorf("%d nodes, want one per pod", len(plan.NewNodes))
	}
}

func TestZonalAffinity(t *testing.T) {
	sel := map[string]string{"app": "cache"}
	in := &Input{Pods: pods(6, "cache", "2", "4Gi", withLabels("app", "cache"), withPodAffinity(v1.LabelZone, sel)),
		NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(3))}}
	plan := solve(t, in)
	zones := map[string]bool{}
	for _, n := range plan.NewNodes {
		zones[n.Offering.Zone] = true
	}
	if len(zones) != 1 || len(plan.NewNodes) < 2 {
		t.Errorf("%d nodes in zones %v, want several nodes all in one zone", len(plan.NewNodes), zones)
	}
}

func TestHostPorts(t *testing.T) {
	in := &Input{Pods: pods(3, "agent", "100m", "100Mi", withHostPort(9100)),
		NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(4))}}
	plan := solve(t, in)
	if len(plan.NewNodes) != 3 {
		t.Errorf("%d nodes, want 3: the pods share a host port", len(plan.NewNodes))
	}
}

func TestMinValues(t *testing.T) {
	types := aws(t)
	families := []string{"m5", "m6i", "m7i", "c5", "c6i", "c7i", "r5", "r6i"}
	in := &Input{Pods: pods(3, "web", "1", "2Gi"),
		NodePools: []*NodePool{pool(makeNodePool("default", minValues("karpenter.k8s.aws/instance-family", 5, families...)), types)}}
	plan := solve(t, in)
	for _, n := range plan.NewNodes {
		seen := map[string]bool{}
		for _, it := range n.InstanceTypes {
			r, _ := it.Requirements.Get("karpenter.k8s.aws/instance-family")
			seen[r.Values()[0]] = true
		}
		if len(seen) < 5 {
			t.Errorf("node %s keeps %d families, want at least 5", n.Name, len(seen))
		}
	}
}

func TestDaemonSetsTakeRoom(t *testing.T) {
	ds := makePod("agent", "1", "1Gi")
	in := &Input{Pods: pods(1, "web", "1", "1Gi"), DaemonSets: []*corev1.Pod{ds},
		NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(4))}}
	plan := solve(t, in)
	// fake-it-0 (1 cpu) cannot hold web and the agent; fake-it-1 (2 cpu) cannot
	// either after its 100m overhead; fake-it-2 can.
	if got := plan.NewNodes[0].InstanceType.Name; got != "fake-it-2" {
		t.Errorf("instance type %s, want fake-it-2 (room for the DaemonSet pod too)", got)
	}
	// A DaemonSet that does not tolerate the pool's taint takes no room there.
	in.NodePools = []*NodePool{pool(makeNodePool("default", taint("dedicated", "x", corev1.TaintEffectNoSchedule)), schedtest.SyntheticTypes(4))}
	in.Pods = pods(1, "web", "1", "1Gi", withToleration("dedicated", "x", corev1.TaintEffectNoSchedule))
	plan = solve(t, in)
	if got := plan.NewNodes[0].InstanceType.Name; got != "fake-it-1" {
		t.Errorf("instance type %s, want fake-it-1 (the DaemonSet does not land there)", got)
	}
}

func TestPreferredNodeAffinityRelaxed(t *testing.T) {
	types := schedtest.SyntheticTypes(4)
	prefer := func(zone string) podOption {
		return withPreferredNodeAffinity(10, corev1.NodeSelectorRequirement{Key: v1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}})
	}
	in := &Input{Pods: []*corev1.Pod{makePod("p", "1", "1Gi", prefer("zone-b"))}, NodePools: []*NodePool{pool(makeNodePool("default"), types)}}
	plan := solve(t, in)
	if z := plan.NewNodes[0].Offering.Zone; z != "zone-b" {
		t.Errorf("zone %s, want the preferred zone-b", z)
	}
	in.Pods = []*corev1.Pod{makePod("p", "1", "1Gi", prefer("zone-x"))}
	plan = solve(t, in)
	if len(plan.Unschedulable) != 0 {
		t.Errorf("an unmeetable preference must be relaxed, got %v", plan.Unschedulable)
	}
}

func TestRequiredNodeAffinityTermsAreORed(t *testing.T) {
	in := &Input{Pods: []*corev1.Pod{makePod("p", "1", "1Gi", withNodeAffinity(
		[]corev1.NodeSelectorRequirement{{Key: v1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"s390x"}}},
		[]corev1.NodeSelectorRequirement{{Key: v1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-c"}}},
	))}, NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(4))}}
	plan := solve(t, in)
	if len(plan.NewNodes) != 1 || plan.NewNodes[0].Offering.Zone != "zone-c" {
		t.Errorf("want one node in zone-c from the second term, got %+v", plan.NewNodes)
	}
}

// zonalVolumes are a PV bound to claim "bound" in zone-b and a WaitForFirstConsumer
// StorageClass of claim "waiting" allowing zone-c, both naming the zone by key;
// withClaim mounts a claim in a pod.
func zonalVolumes(key string) (in Input, withClaim func(string) podOption) {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-b"}}}}}}}}}
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "zonal"}, VolumeBindingMode: &wait,
		AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: key, Values: []string{"zone-c"}}}}}}
	scName := "zonal"
	claims := []*corev1.PersistentVolumeClaim{
		{ObjectMeta: metav1.ObjectMeta{Name: "bound", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}},
		{ObjectMeta: metav1.ObjectMeta{Name: "waiting", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &scName}},
	}
	withClaim = func(name string) podOption {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
		}
	}
	return Input{PersistentVolumes: []*corev1.PersistentVolume{pv}, PersistentVolumeClaims: claims,
		StorageClasses: []*storagev1.StorageClass{sc}}, withClaim
}

func TestZonalVolume(t *testing.T) {
	in, withClaim := zonalVolumes(v1.LabelZone)
	in.Pods = []*corev1.Pod{makePod("a", "1", "1Gi", withClaim("bound")), makePod("b", "1", "1Gi", withClaim("waiting")), makePod("c", "1", "1Gi", withClaim("missing"))}
	in.NodePools = []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(4))}
	plan := solve(t, &in)
	zoneOf := map[string]string{}
	for _, n := range plan.NewNodes {
		for _, p := range n.Pods {
			zoneOf[p.Name] = n.Offering.Zone
		}
	}
	if zoneOf["a"] != "zone-b" || zoneOf["b"] != "zone-c" {
		t.Errorf("zones %v, want a in zone-b (its volume) and b in zone-c (its storage class)", zoneOf)
	}
	if len(plan.Unschedulable) != 1 || !strings.Contains(plan.Unschedulable[0].Reason, `persistentvolumeclaim "missing" not found`) {
		t.Errorf("unschedulable %v", plan.Unschedulable)
	}
}

func TestDeterministic(t *testing.T) {
	in := &Input{Pods: schedtest.DiversePods(500, 7), NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(50))}}
	first := solve(t, in)
	for range 3 {
		again := solve(t, in)
		if len(again.NewNodes) != len(first.NewNodes) || again.Cost() != first.Cost() {
			t.Fatalf("solve is not deterministic: %d nodes $%.4f, then %d nodes $%.4f", len(first.NewNodes), first.Cost(), len(again.NewNodes), again.Cost())
		}
		for i := range first.NewNodes {
			if first.NewNodes[i].InstanceType != again.NewNodes[i].InstanceType || len(first.NewNodes[i].Pods) != len(again.NewNodes[i].Pods) {
				t.Fatalf("node %d differs between runs", i)
			}
		}
	}
}

func TestDiverseMixIsValid(t *testing.T) {
	in := &Input{Pods: schedtest.DiversePods(1000, 3), NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(400))}}
	plan := solve(t, in)
	if len(plan.Unschedulable) != 0 {
		t.Errorf("%d unschedulable, e.g. %s", len(plan.Unschedulable), plan.Unschedulable[0].Reason)
	}
}

// The two solves of a large batch run side by side on one input: neither may write
// to it (the race detector watches), and the cheaper plan comes back every time.
func TestSecondOpinionIsDeterministic(t *testing.T) {
	pool := makeNodePool("default")
	types := schedtest.SyntheticTypes(40)
	in := &Input{Pods: schedtest.DiversePods(2*SecondOpinionPods, 3), NodePools: []*NodePool{{NodePool: pool, InstanceTypes: types}}}
	first := solve(t, in)
	for range 3 {
		again := solve(t, in)
		if again.Cost() != first.Cost() || len(again.NewNodes) != len(first.NewNodes) {
			t.Fatalf("plans differ: $%.4f on %d nodes, then $%.4f on %d", first.Cost(), len(first.NewNodes), again.Cost(), len(again.NewNodes))
		}
	}
	for _, slack := range []float64{0, GrowSlack} {
		one, err := solveWith(in, slack)
		if err != nil {
			t.Fatal(err)
		}
		if one.Cost() < first.Cost()-1e-9 {
			t.Errorf("the solve with slack %.2f costs $%.4f, less than the plan returned ($%.4f)", slack, one.Cost(), first.Cost())
		}
	}
}

func solveWith(in *Input, slack float64) (*Plan, error) {
	return SolveOnce(in, Options{}, slack, false), nil
}

// Preferred node affinity terms are tried one at a time, heaviest first: when the
// heaviest cannot be met, the next one still steers the pod (as Karpenter relaxes).
func TestPreferredNodeAffinityTermsRelaxedOneAtATime(t *testing.T) {
	prefer := func(weight int32, zone string) podOption {
		return withPreferredNodeAffinity(weight, corev1.NodeSelectorRequirement{Key: v1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}})
	}
	for _, want := range []string{"zone-b", "zone-c"} {
		other := map[string]string{"zone-b": "zone-c", "zone-c": "zone-b"}[want]
		in := &Input{Pods: []*corev1.Pod{makePod("p", "1", "1Gi", prefer(50, "zone-x"), prefer(20, want), prefer(10, other))},
			NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(4))}}
		plan := solve(t, in)
		if len(plan.NewNodes) != 1 {
			t.Fatalf("want one node, got %d (unschedulable %v)", len(plan.NewNodes), plan.Unschedulable)
		}
		if z := plan.NewNodes[0].Offering.Zone; z != want {
			t.Errorf("zone %s, want %s: the second-heaviest term once the heaviest (zone-x) cannot be met", z, want)
		}
	}
}

// The deprecated beta labels mean their GA keys in pod selectors, affinities and
// NodePool requirements.
func TestDeprecatedLabelsNormalised(t *testing.T) {
	types := schedtest.SyntheticTypes(4)
	in := &Input{Pods: []*corev1.Pod{
		makePod("selector", "1", "1Gi", withNodeSelector("failure-domain.beta.kubernetes.io/zone", "zone-c")),
		makePod("affinity", "1", "1Gi", withNodeAffinity([]corev1.NodeSelectorRequirement{
			{Key: "beta.kubernetes.io/instance-type", Operator: corev1.NodeSelectorOpIn, Values: []string{"fake-it-3"}}})),
	}, NodePools: []*NodePool{pool(makeNodePool("default"), types)}}
	plan := solve(t, in)
	if len(plan.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %v", plan.Unschedulable)
	}
	for _, n := range plan.NewNodes {
		for _, p := range n.Pods {
			switch p.Name {
			case "selector":
				if n.Offering.Zone != "zone-c" {
					t.Errorf("pod selector: zone %s, want zone-c", n.Offering.Zone)
				}
			case "affinity":
				if n.InstanceType.Name != "fake-it-3" {
					t.Errorf("pod affinity: type %s, want fake-it-3", n.InstanceType.Name)
				}
			}
		}
	}
	in = &Input{Pods: pods(1, "web", "1", "1Gi"), NodePools: []*NodePool{pool(makeNodePool("default",
		requirement("failure-domain.beta.kubernetes.io/zone", v1.NodeSelectorOpIn, "zone-b")), types)}}
	plan = solve(t, in)
	if len(plan.NewNodes) != 1 || plan.NewNodes[0].Offering.Zone != "zone-b" {
		t.Errorf("NodePool requirement on the beta zone key: want one node in zone-b, got %+v", plan.NewNodes)
	}
}

// Volumes as the kube-scheduler's VolumeBinding plugin reads them: every node
// affinity term of a PV and every allowed topology of a StorageClass is an
// alternative; claims being deleted, lost, or not yet bound to the volume they name
// hold the pod back; a generic ephemeral volume's claim is the pod's own, or (before
// it exists) its template's.
func TestVolumes(t *testing.T) {
	wait := storagev1.VolumeBindingWaitForFirstConsumer
	zones := func(zs ...string) []corev1.NodeSelectorTerm {
		var out []corev1.NodeSelectorTerm
		for _, z := range zs {
			out = append(out, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: v1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{z}}}})
		}
		return out
	}
	pv := func(name string, terms []corev1.NodeSelectorTerm, deleting bool) *corev1.PersistentVolume {
		p := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}}}
		if deleting {
			p.DeletionTimestamp, p.Finalizers = &metav1.Time{}, []string{"kubernetes.io/pv-protection"}
		}
		return p
	}
	className := func(s string) *string { return &s }
	claim := func(name, volume string, phase corev1.PersistentVolumeClaimPhase, class *string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume, StorageClassName: class}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
	}
	deletingClaim := claim("deleting", "pv-ab", corev1.ClaimBound, nil)
	deletingClaim.DeletionTimestamp, deletingClaim.Finalizers = &metav1.Time{}, []string{"kubernetes.io/pvc-protection"}
	annotatedClaim := claim("annotated", "pv-ab", "", nil)
	annotatedClaim.Annotations = map[string]string{"pv.kubernetes.io/bind-completed": "yes"}
	withVolume := func(v corev1.VolumeSource) podOption {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: v})
		}
	}
	withClaim := func(name string) podOption {
		return withVolume(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}})
	}
	ephemeral := func(class string) podOption {
		return withVolume(corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class}}}})
	}
	in := &Input{
		PersistentVolumes: []*corev1.PersistentVolume{pv("pv-ab", zones("zone-a", "zone-b"), false), pv("pv-c", zones("zone-c"), false),
			pv("pv-gone", zones("zone-a"), true)},
		PersistentVolumeClaims: []*corev1.PersistentVolumeClaim{
			claim("two-terms", "pv-ab", corev1.ClaimBound, nil), claim("zone-c", "pv-c", corev1.ClaimBound, nil),
			deletingClaim, claim("lost", "pv-ab", corev1.ClaimLost, nil), claim("prebound", "pv-ab", corev1.ClaimPending, nil),
			annotatedClaim, claim("pv-deleting", "pv-gone", corev1.ClaimBound, nil),
			claim("two-topologies", "", corev1.ClaimPending, className("bc")),
			claim("eph-existing-data", "", corev1.ClaimPending, className("bc")),
		},
		StorageClasses: []*storagev1.StorageClass{
			{ObjectMeta: metav1.ObjectMeta{Name: "bc"}, VolumeBindingMode: &wait, AllowedTopologies: []corev1.TopologySelectorTerm{
				{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: v1.LabelZone, Values: []string{"zone-b"}}}},
				{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: v1.LabelZone, Values: []string{"zone-c"}}}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "c-only"}, VolumeBindingMode: &wait, AllowedTopologies: []corev1.TopologySelectorTerm{
				{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: v1.LabelZone, Values: []string{"zone-c"}}}}}},
		},
		NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(4))},
	}
	cases := []struct {
		pod   *corev1.Pod
		zones []string // nil: no node
	}{
		// The second term of the PV's node affinity and the second topology of the
		// class are where the pod's own selector lets it go.
		{makePod("two-terms", "1", "1Gi", withClaim("two-terms"), withNodeSelector(v1.LabelZone, "zone-b")), []string{"zone-b"}},
		{makePod("two-topologies", "1", "1Gi", withClaim("two-topologies"), withNodeSelector(v1.LabelZone, "zone-c")), []string{"zone-c"}},
		// Two volumes: only the zone both allow.
		{makePod("both", "1", "1Gi", withClaim("two-topologies"), func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "more", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "zone-c"}}})
		}), []string{"zone-c"}},
		{makePod("annotated", "1", "1Gi", withClaim("annotated")), []string{"zone-a", "zone-b"}},
		{makePod("deleting", "1", "1Gi", withClaim("deleting")), nil},
		{makePod("lost", "1", "1Gi", withClaim("lost")), nil},
		{makePod("prebound", "1", "1Gi", withClaim("prebound")), nil},
		{makePod("pv-deleting", "1", "1Gi", withClaim("pv-deleting")), nil},
		// An ephemeral volume whose claim does not exist yet goes by its template's
		// class; once the claim exists, by the claim.
		{makePod("eph-new", "1", "1Gi", ephemeral("c-only")), []string{"zone-c"}},
		{makePod("eph-existing", "1", "1Gi", ephemeral("c-only"), withNodeSelector(v1.LabelZone, "zone-b")), []string{"zone-b"}},
	}
	for _, tc := range cases {
		in.Pods = append(in.Pods, tc.pod)
	}
	plan := solve(t, in)
	zoneOf := map[string]string{}
	for _, n := range plan.NewNodes {
		for _, p := range n.Pods {
			zoneOf[p.Name] = n.Offering.Zone
		}
	}
	for _, tc := range cases {
		z, placed := zoneOf[tc.pod.Name]
		switch {
		case tc.zones == nil && placed:
			t.Errorf("pod %s: placed in %s, want no node", tc.pod.Name, z)
		case tc.zones != nil && !slices.Contains(tc.zones, z):
			t.Errorf("pod %s: zone %q, want one of %v", tc.pod.Name, z, tc.zones)
		}
	}
}

// DaemonSets as the kube-scheduler will place them on new nodes: those waiting for
// karpenter.sh/initialized count; their host ports are taken; and a type their
// requests overflow takes no pod at all, even one requesting nothing.
func TestDaemonSetsOnNewNodes(t *testing.T) {
	types := schedtest.SyntheticTypes(4)
	initializedOnly := makePod("late-agent", "1", "1Gi", withNodeSelector(v1.NodeInitializedLabelKey, "true"))
	in := &Input{Pods: pods(1, "web", "1", "1Gi"), DaemonSets: []*corev1.Pod{initializedOnly},
		NodePools: []*NodePool{pool(makeNodePool("default"), types)}}
	plan := solve(t, in)
	if got := plan.NewNodes[0].InstanceType.Name; got != "fake-it-2" {
		t.Errorf("instance type %s, want fake-it-2 (room for the DaemonSet that waits for karpenter.sh/initialized)", got)
	}

	agent := makePod("agent", "100m", "100Mi", withHostPort(9100))
	in = &Input{Pods: pods(2, "exporter", "100m", "100Mi", withHostPort(9100)), DaemonSets: []*corev1.Pod{agent},
		NodePools: []*NodePool{pool(makeNodePool("default"), types)}}
	plan = solve(t, in)
	if len(plan.NewNodes) != 0 || len(plan.Unschedulable) != 2 {
		t.Errorf("pods wanting the DaemonSet's host port: %d new nodes, %d unschedulable; want none placed", len(plan.NewNodes), len(plan.Unschedulable))
	}

	// A DaemonSet of 1.5 cpu overflows fake-it-0 (1 cpu) and fake-it-1 (2 cpu less
	// 100m overhead is 1.9 cpu, fine): an empty pod must not go to fake-it-0.
	big := makePod("big-agent", "1500m", "100Mi")
	in = &Input{Pods: []*corev1.Pod{makePod("empty", "0", "0")}, DaemonSets: []*corev1.Pod{big},
		NodePools: []*NodePool{pool(makeNodePool("default"), types)}}
	plan = solve(t, in)
	if len(plan.NewNodes) != 1 {
		t.Fatalf("want one new node, got %d (unschedulable %v)", len(plan.NewNodes), plan.Unschedulable)
	}
	for _, it := range plan.NewNodes[0].InstanceTypes {
		if it.Name == "fake-it-0" {
			t.Errorf("fake-it-0 offered although its DaemonSets overflow it; chose %s", plan.NewNodes[0].InstanceType.Name)
		}
	}
}

// With nodeTaintsPolicy Honor, a zone only a tainted NodePool offers is no domain
// of the spread: the pods spread over the zones they can reach, instead of some
// being held back for a zone they cannot go to.
func TestSpreadNodeTaintsPolicyHonor(t *testing.T) {
	types := schedtest.SyntheticTypes(4)
	honor := corev1.NodeInclusionPolicyHonor
	spread := func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: v1.LabelZone,
			WhenUnsatisfiable: corev1.DoNotSchedule, NodeTaintsPolicy: &honor, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	}
	in := &Input{Pods: pods(4, "web", "1", "1Gi", withLabels("app", "web"), spread), NodePools: []*NodePool{
		pool(makeNodePool("ab", requirement(v1.LabelZone, v1.NodeSelectorOpIn, "zone-a", "zone-b")), types),
		pool(makeNodePool("c-tainted", requirement(v1.LabelZone, v1.NodeSelectorOpIn, "zone-c"), taint("dedicated", "x", corev1.TaintEffectNoSchedule)), types),
	}}
	plan := solve(t, in)
	if len(plan.Unschedulable) != 0 {
		t.Errorf("%d pods unschedulable (%v); the tainted pool's zone-c must not count as a domain", len(plan.Unschedulable), plan.Unschedulable[0].Reason)
	}
}

// minValues holds after the repack pass: nodes are not merged into one that only
// fewer instance types than minValues can hold.
func TestMinValuesSurviveRepack(t *testing.T) {
	types := schedtest.SyntheticTypes(4)
	names := []string{"fake-it-0", "fake-it-1", "fake-it-2", "fake-it-3"}
	in := &Input{Pods: pods(3, "web", "1200m", "1Gi"),
		NodePools: []*NodePool{pool(makeNodePool("default", minValues(v1.LabelInstanceType, 3, names...)), types)}}
	plan := solve(t, in)
	if len(plan.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %v", plan.Unschedulable)
	}
	for _, n := range plan.NewNodes {
		if len(n.InstanceTypes) < 3 {
			t.Errorf("node %s (%d pods) keeps %d instance types, want at least 3 (minValues)", n.Name, len(n.Pods), len(n.InstanceTypes))
		}
	}
}

// PreferencePolicyIgnore plans with what pods require only: a preferred zone is
// not followed, so the pod goes to the cheapest zone.
func TestPreferencePolicyIgnore(t *testing.T) {
	types := schedtest.SyntheticTypes(4)
	pod := makePod("p", "1", "1Gi", withPreferredNodeAffinity(100,
		corev1.NodeSelectorRequirement{Key: v1.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-c"}}))
	in := &Input{Pods: []*corev1.Pod{pod}, NodePools: []*NodePool{pool(makeNodePool("default"), types)}}
	respect, err := Solve(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ignore, err := Solve(in, Options{PreferencePolicy: PreferencePolicyIgnore})
	if err != nil {
		t.Fatal(err)
	}
	if len(respect.NewNodes) != 1 || len(ignore.NewNodes) != 1 {
		t.Fatalf("nodes: %d respecting, %d ignoring; want one each", len(respect.NewNodes), len(ignore.NewNodes))
	}
	if respect.NewNodes[0].Offering.Zone != "zone-c" {
		t.Errorf("Respect: zone %s, want the preferred zone-c", respect.NewNodes[0].Offering.Zone)
	}
	if z := ignore.NewNodes[0].Offering.Zone; z == "zone-c" {
		t.Errorf("Ignore: zone %s, the preference was followed", z)
	}
}

// MinValuesPolicyBestEffort places a pod only fewer types than minValues can hold,
// on a node whose requirements say how far minValues was relaxed; Strict leaves it
// unschedulable.
func TestMinValuesPolicyBestEffort(t *testing.T) {
	types := schedtest.SyntheticTypes(4)
	names := []string{"fake-it-0", "fake-it-1", "fake-it-2", "fake-it-3"}
	in := &Input{Pods: append(pods(1, "big", "3", "1Gi"), pods(1, "small", "100m", "100Mi")...),
		NodePools: []*NodePool{pool(makeNodePool("default", minValues(v1.LabelInstanceType, 3, names...)), types)}}
	strict, err := Solve(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(strict.Unschedulable) != 1 || strict.Unschedulable[0].Pod.Name != "big-0" {
		t.Fatalf("Strict: unschedulable %v, want big-0 (only fake-it-3 holds 3 cpu)", strict.Unschedulable)
	}
	best, err := Solve(in, Options{MinValuesPolicy: MinValuesPolicyBestEffort})
	if err != nil {
		t.Fatal(err)
	}
	if len(best.Unschedulable) != 0 {
		t.Fatalf("BestEffort: unschedulable %v", best.Unschedulable)
	}
	relaxed := 0
	for _, n := range best.NewNodes {
		r, _ := n.Requirements.Get(v1.LabelInstanceType)
		if n.MinValuesRelaxed {
			relaxed++
			if r.MinValues != len(n.InstanceTypes) || r.MinValues >= 3 {
				t.Errorf("node %s: minValues %d with %d options, want relaxed to the options kept", n.Name, r.MinValues, len(n.InstanceTypes))
			}
		} else if r.MinValues != 3 || len(n.InstanceTypes) < 3 {
			t.Errorf("node %s not relaxed but keeps minValues %d over %d types", n.Name, r.MinValues, len(n.InstanceTypes))
		}
	}
	if relaxed == 0 {
		t.Error("no node says its minValues were relaxed")
	}
}

// A limited NodePool keeps larger fallback options as far as its limits allow,
// rather than only types no larger than the cheapest: a launch that finds the
// cheapest short of capacity can still go on, and no option breaks the limit.
func TestLimitsKeepFallbackOptionsWithinHeadroom(t *testing.T) {
	types := schedtest.SyntheticTypes(8)
	in := &Input{Pods: pods(1, "web", "1", "1Gi"), NodePools: []*NodePool{pool(makeNodePool("default", limit(corev1.ResourceCPU, "3")), types)}}
	plan := solve(t, in)
	if len(plan.NewNodes) != 1 {
		t.Fatalf("want one node, got %d (%v)", len(plan.NewNodes), plan.Unschedulable)
	}
	var names []string
	for _, it := range plan.NewNodes[0].InstanceTypes {
		names = append(names, it.Name)
		if cpu := it.Capacity[corev1.ResourceCPU]; cpu.Value() > 3 {
			t.Errorf("option %s has %s cpu, past the limit of 3", it.Name, cpu.String())
		}
	}
	if !slices.Equal(names, []string{"fake-it-1", "fake-it-2"}) {
		t.Errorf("options %v, want fake-it-1 and the fallback fake-it-2 (3 cpu, within the limit)", names)
	}
	// Two nodes share the headroom: the first keeps its fallback, the second
	// cannot without passing the limit.
	in.Pods = pods(2, "web", "1500m", "1Gi", withPodAntiAffinity(v1.LabelHostname, map[string]string{"app": "web"}), withLabels("app", "web"))
	in.NodePools = []*NodePool{pool(makeNodePool("default", limit(corev1.ResourceCPU, "5")), types)}
	plan = solve(t, in)
	total := int64(0)
	for _, n := range plan.NewNodes {
		largest := int64(0)
		for _, it := range n.InstanceTypes {
			cpu := it.Capacity[corev1.ResourceCPU]
			largest = max(largest, cpu.Value())
		}
		total += largest
	}
	if len(plan.NewNodes) != 2 || total > 5 {
		t.Errorf("%d nodes whose largest options sum to %d cpu; want 2 nodes within the limit of 5", len(plan.NewNodes), total)
	}
}

// Pods of one size fill nodes in whole pods: a batch too large for the repack pass
// (more than 64 pods) still gets the type with the lowest price per pod that fits
// whole, not many small nodes that each waste most of a pod's room. Per pod, 100
// replicas cost no more than 40 (which the repack pass sizes).
func TestUniformPodsSizeNodesInWholePods(t *testing.T) {
	np := makeNodePool("default", requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeOnDemand))
	perPod := func(n int) float64 {
		plan := solve(t, &Input{Pods: pods(n, "inflate", "1", "1536Mi"), NodePools: []*NodePool{pool(np, aws(t))}})
		if len(plan.Unschedulable) > 0 {
			t.Fatalf("%d pods unschedulable", len(plan.Unschedulable))
		}
		return plan.Cost() / float64(n)
	}
	small, large := perPod(40), perPod(100)
	if large > small*1.02 {
		t.Errorf("100 pods cost $%.4f/hour each, 40 pods $%.4f/hour each", large, small)
	}
}

// The lower bound reads the offerings a pool allows: a pool of on-demand capacity is
// not bounded by spot prices, and stays below what the plan costs.
func TestLowerBoundReadsThePoolsOfferings(t *testing.T) {
	in := func(np *v1.NodePool) *Input {
		return &Input{Pods: pods(100, "inflate", "1", "1536Mi"), NodePools: []*NodePool{pool(np, aws(t))}}
	}
	bound := func(np *v1.NodePool) (float64, float64) {
		plan := solve(t, in(np))
		return LowerBound(in(np).NodePools, plan), plan.Cost()
	}
	anyBound, _ := bound(makeNodePool("default"))
	onDemandBound, onDemandCost := bound(makeNodePool("default", requirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeOnDemand)))
	if onDemandBound <= anyBound {
		t.Errorf("on-demand bound $%.4f, not above the bound with spot $%.4f", onDemandBound, anyBound)
	}
	if onDemandBound > onDemandCost {
		t.Errorf("bound $%.4f above the plan's $%.4f", onDemandBound, onDemandCost)
	}
}

// Where one node holds for the same price what two do, the plan takes the one: it
// launches faster and runs one set of DaemonSets less. 14 pods of 950m fit two
// 8-cpu nodes or one 16-cpu node, at $0.408 either way.
func TestEqualPriceFewerNodes(t *testing.T) {
	types := []*InstanceType{
		smallType("one", "1", "4Gi", 0.04, nil),
		smallType("eight", "8", "32Gi", 0.204, nil),
		smallType("sixteen", "16", "64Gi", 0.408, nil),
	}
	plan := solve(t, &Input{Pods: pods(14, "inflate", "950m", "1Gi"), NodePools: []*NodePool{pool(makeNodePool("default"), types)}})
	if len(plan.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %v", plan.Unschedulable)
	}
	if len(plan.NewNodes) != 1 || plan.Cost() > 0.408+1e-9 {
		var got []string
		for _, n := range plan.NewNodes {
			got = append(got, fmt.Sprintf("%s (%d pods)", n.InstanceTypes[0].Name, len(n.Pods)))
		}
		t.Errorf("planned %v at $%.4f/hour; want one sixteen at $0.408", got, plan.Cost())
	}
}

// Preferring fewer nodes at the same price never costs money: 45 pods of 950m
// cost $1.22 (40 on 8-cpu nodes, the last five on five 1-cpu nodes), though six
// 8-cpu or three 16-cpu nodes would hold them on fewer nodes for $1.224.
func TestFewerNodesNeverCostMore(t *testing.T) {
	types := []*InstanceType{
		smallType("one", "1", "4Gi", 0.04, nil),
		smallType("eight", "8", "32Gi", 0.204, nil),
		smallType("sixteen", "16", "64Gi", 0.408, nil),
	}
	plan := solve(t, &Input{Pods: pods(45, "inflate", "950m", "1Gi"), NodePools: []*NodePool{pool(makeNodePool("default"), types)}})
	if len(plan.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %v", plan.Unschedulable)
	}
	if c := plan.Cost(); c > 1.22+1e-9 {
		t.Errorf("plan costs $%.4f/hour on %d nodes; want $1.22", c, len(plan.NewNodes))
	}
}

// The EBS CSI driver names its volumes' zone topology.ebs.csi.aws.com/zone, a label
// its node plugin adds to nodes once they run: a new node's zone is that label's
// value, so the volume's zone places the pod (as Karpenter reads it).
func TestEBSCSIZoneVolume(t *testing.T) {
	in, withClaim := zonalVolumes(LabelEBSCSIZone)
	in.Pods = []*corev1.Pod{makePod("a", "1", "1Gi", withClaim("bound")), makePod("b", "1", "1Gi", withClaim("waiting"))}
	in.NodePools = []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(4))}
	plan := solve(t, &in)
	zoneOf := map[string]string{}
	for _, n := range plan.NewNodes {
		for _, p := range n.Pods {
			zoneOf[p.Name] = n.Offering.Zone
		}
	}
	if len(plan.Unschedulable) != 0 || zoneOf["a"] != "zone-b" || zoneOf["b"] != "zone-c" {
		t.Errorf("zones %v, unschedulable %v: want a in zone-b (its EBS volume) and b in zone-c (its storage class)", zoneOf, plan.Unschedulable)
	}
}
