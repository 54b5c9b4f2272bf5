package state

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/kubescheme"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

func TestNodeComingUpIsSeenAsItWillBe(t *testing.T) {
	nc := &v1.NodeClaim{Spec: v1.NodeClaimSpec{StartupTaints: []corev1.Taint{{Key: "agent-not-ready", Effect: corev1.TaintEffectNoSchedule}}}}
	node := &corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{
		v1.UnregisteredNoExecuteTaint,
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: "agent-not-ready", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule},
	}}}
	got := withoutStartupTaints(node, nc)
	if len(got.Spec.Taints) != 1 || got.Spec.Taints[0].Key != "dedicated" {
		t.Errorf("taints %v, want only the NodePool's own taint", got.Spec.Taints)
	}
	if len(node.Spec.Taints) != 4 {
		t.Error("the cached node was modified")
	}
}

// A Ready node keeps the not-ready taint until the node lifecycle controller's next
// pass, and the cloud provider's uninitialized taint until the cloud controller
// manager's: it is open to pods as planned. A node that is not Ready stays closed.
func TestReadyNodesStaleReadinessTaints(t *testing.T) {
	taints := []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}}
	node := func(ready corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "sim:///a/i-1", Taints: slices.Clone(taints)},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	}
	initialized := &v1.NodeClaim{Status: v1.NodeClaimStatus{ProviderID: "sim:///a/i-1",
		Conditions: []metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue}}}}
	for _, tt := range []struct {
		ready corev1.ConditionStatus
		want  int
	}{{corev1.ConditionTrue, 1}, {corev1.ConditionFalse, 4}, {corev1.ConditionUnknown, 4}} {
		n := node(tt.ready)
		s := sortNodes([]*corev1.Node{n}, []*v1.NodeClaim{initialized}, nil)
		if len(s.up) != 1 || len(s.up[0].Spec.Taints) != tt.want {
			t.Errorf("Ready=%s: taints %v, want %d", tt.ready, s.up, tt.want)
		}
		if len(n.Spec.Taints) != 4 {
			t.Error("the cached node was modified")
		}
	}
}

// A claim made without requests (not by Tailor) is a node with room for pods only.
func TestLaunchingNodeWithoutRequests(t *testing.T) {
	n := LaunchingNode(&v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "bare"}})
	if pods := n.Status.Allocatable[corev1.ResourcePods]; pods.Value() != 110 {
		t.Errorf("allocatable %v, want 110 pods", n.Status.Allocatable)
	}
}

func TestLaunchingNode(t *testing.T) {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{v1.NodePoolLabelKey: "default"}},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.LabelZone, Operator: v1.NodeSelectorOpIn, Values: []string{"us-east-1a"}},
				{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"m5.large", "c5.large"}},
			},
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}},
		}}
	n := LaunchingNode(nc)
	if n.Labels[v1.LabelZone] != "us-east-1a" || n.Labels[v1.NodePoolLabelKey] != "default" {
		t.Errorf("labels %v", n.Labels)
	}
	if _, ok := n.Labels[v1.LabelInstanceType]; ok {
		t.Error("an unsettled requirement became a label")
	}
	if cpu := n.Status.Allocatable[corev1.ResourceCPU]; cpu.MilliValue() != 1500 {
		t.Errorf("allocatable before launch %s, want the claim's requests", cpu.String())
	}
	nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m")}
	if cpu := LaunchingNode(nc).Status.Allocatable[corev1.ResourceCPU]; cpu.MilliValue() != 1900 {
		t.Errorf("allocatable after launch %s, want the instance's", cpu.String())
	}
}

func TestProvisionable(t *testing.T) {
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	for name, tc := range map[string]struct {
		pod  corev1.Pod
		want bool
	}{
		"unschedulable": {corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{unschedulable}}}, true},
		"not yet tried": {corev1.Pod{}, false},
		"bound":         {corev1.Pod{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Conditions: []corev1.PodCondition{unschedulable}}}, false},
		"daemon": {corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet"}}},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{unschedulable}}}, false},
		"finished": {corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded, Conditions: []corev1.PodCondition{unschedulable}}}, false},
	} {
		if got := Provisionable(&tc.pod); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

// Reading pods from the informer's store gives the snapshot the same pods as listing
// them, and the pods are the store's own (not copies).
func TestSnapshotReadsPodsFromTheStore(t *testing.T) {
	pods := []*corev1.Pod{testobj.Pod("b", "", "", testobj.Unschedulable()), testobj.Pod("a", "", "", testobj.Unschedulable()),
		testobj.Pod("bound", "", "", testobj.NodeName("n"))}
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	builder := fake.NewClientBuilder().WithScheme(scheme)
	store := toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)
	for _, p := range pods {
		builder = builder.WithObjects(p.DeepCopy())
		if err := store.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	kube := builder.Build()
	noTypes := func(*v1.NodePool) ([]*scheduling.InstanceType, error) { return nil, nil }

	listed, err := New(kube).Snapshot(t.Context(), noTypes)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := New(kube).WithPodStore(store).Snapshot(t.Context(), noTypes)
	if err != nil {
		t.Fatal(err)
	}
	names := func(s *Snapshot) (out []string) {
		for _, p := range s.Input.Pods {
			out = append(out, p.Name)
		}
		return out
	}
	if got, want := names(stored), names(listed); !slices.Equal(got, want) || !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("pending pods from the store %v, from a list %v, want [a b]", got, want)
	}
	if stored.Input.Pods[0] != pods[1] {
		t.Error("the snapshot copied the store's pod")
	}
}

// A claim still launching counts against its NodePool's limits with the capacity
// the plan reserved for it (its largest option), not the requests it was made for:
// otherwise the next batch, planned before the launch, would go past the limit.
func TestLaunchingClaimHoldsItsReservationAgainstLimits(t *testing.T) {
	types := schedtest.SyntheticTypes(8) // fake-it-i has i+1 vCPU
	np := readyPool("default", 0, metav1.ConditionTrue)
	np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("10")}
	launching := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "first-batch", Labels: map[string]string{v1.NodePoolLabelKey: "default"}},
		Spec: v1.NodeClaimSpec{
			Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn,
				Values: []string{"fake-it-7", "fake-it-5"}}},
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}},
		}}
	pending := testobj.Pod("second-batch", "6", "", testobj.Unschedulable())
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(np, launching, pending).Build()
	snap, err := New(kube).Snapshot(t.Context(), func(*v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil })
	if err != nil {
		t.Fatal(err)
	}
	var node *scheduling.Node
	for _, n := range snap.Input.Nodes {
		if n.Launching {
			node = n
		}
	}
	if node == nil {
		t.Fatal("the launching claim is not in the snapshot")
	}
	if cpu := node.Node.Status.Capacity[corev1.ResourceCPU]; cpu.Value() != 8 {
		t.Errorf("launching claim counts %s cpu against the limit, want 8 (its largest option)", cpu.String())
	}
	// The room is the smallest option's (fake-it-5: 6 cpu less 100m overhead):
	// whichever option launches has at least that much.
	if cpu := node.Node.Status.Allocatable[corev1.ResourceCPU]; cpu.MilliValue() != 5900 {
		t.Errorf("launching claim offers %s cpu of room, want the 5900m of its smallest option", cpu.String())
	}
	if pods := node.Node.Status.Allocatable[corev1.ResourcePods]; pods.Value() != 60 {
		t.Errorf("launching claim offers room for %s pods, want its smallest option's 60", pods.String())
	}
	plan, err := scheduling.Solve(snap.Input, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 8 reserved + at least 7 for a node that takes 6 cpu (and its overhead) > 10;
	// counting only the 3 cpu of requests, a 7-cpu node would have fitted.
	if len(plan.NewNodes) != 0 || len(plan.Unschedulable) != 1 || !strings.Contains(plan.Unschedulable[0].Reason, "limit cpu=10 leaves 2") {
		t.Errorf("plan: %d new nodes, unschedulable %v; want the pod held back by the limit", len(plan.NewNodes), plan.Unschedulable)
	}
	// Once launched, the instance's own capacity counts.
	launching.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}
	if err := kube.Update(t.Context(), launching); err != nil {
		t.Fatal(err)
	}
	snap, err = New(kube).Snapshot(t.Context(), func(*v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil })
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range snap.Input.Nodes {
		if cpu := n.Node.Status.Capacity[corev1.ResourceCPU]; n.Launching && cpu.Value() != 6 {
			t.Errorf("launched claim counts %s cpu, want its instance's 6", cpu.String())
		}
	}
}

type syncer bool

func (s syncer) HasSynced() bool { return bool(s) }

// No snapshot comes from a view whose informers do not all hold their initial lists.
func TestSnapshotWaitsForSync(t *testing.T) {
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).Build()
	noTypes := func(*v1.NodePool) ([]*scheduling.InstanceType, error) { return nil, nil }
	cluster := New(kube).WithSyncers(syncer(true), syncer(false))
	if cluster.Synced() {
		t.Error("Synced with an informer still listing")
	}
	if _, err := cluster.Snapshot(t.Context(), noTypes); !errors.Is(err, ErrNotSynced) {
		t.Errorf("Snapshot before sync: %v, want ErrNotSynced", err)
	}
	if _, err := New(kube).WithSyncers(syncer(true)).Snapshot(t.Context(), noTypes); err != nil {
		t.Errorf("Snapshot once synced: %v", err)
	}
}

// readyPool is a NodePool whose Ready condition has status, for its generation.
func readyPool(name string, weight int32, status metav1.ConditionStatus) *v1.NodePool {
	np := testobj.NodePool(name, testobj.Weight(weight))
	np.Generation = 1
	np.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: status, Reason: "Test", ObservedGeneration: 1}}
	return np
}

// Claims being deleted count against their NodePool's limits until they are gone
// (their instances run until termination ends): a node draining, and a claim
// deleted while it launched. They take no pods.
func TestDrainingClaimsCountAgainstLimits(t *testing.T) {
	types := schedtest.SyntheticTypes(8) // fake-it-i has i+1 vCPU
	np := readyPool("default", 0, metav1.ConditionTrue)
	np.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("10"), "nodes": resource.MustParse("5")}
	gone := metav1.Now()
	poolLabel := map[string]string{v1.NodePoolLabelKey: "default"}
	drainingNode := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "draining", Labels: poolLabel,
		DeletionTimestamp: &gone, Finalizers: []string{v1.TerminationFinalizer}},
		Status: v1.NodeClaimStatus{ProviderID: "fake:///a/1", Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "draining", Labels: poolLabel},
		Spec:   corev1.NodeSpec{ProviderID: "fake:///a/1"},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6")}}}
	deletedLaunching := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "deleted-while-launching", Labels: poolLabel,
		DeletionTimestamp: &gone, Finalizers: []string{v1.TerminationFinalizer}},
		Spec: v1.NodeClaimSpec{Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType,
			Operator: v1.NodeSelectorOpIn, Values: []string{"fake-it-1"}}}}}
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(np, drainingNode, node, deletedLaunching,
		testobj.Pod("pending", "2", "", testobj.Unschedulable())).Build()
	withTypes := func(*v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil }
	snap, err := New(kube).Snapshot(t.Context(), withTypes)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Input.Nodes) != 0 {
		t.Errorf("%d nodes pods may go to, want none: both claims are going away", len(snap.Input.Nodes))
	}
	draining := snap.Input.NodePools[0].Draining
	if cpu, nodes := draining[corev1.ResourceCPU], draining["nodes"]; cpu.Value() != 8 || nodes.Value() != 2 {
		t.Errorf("draining %v, want 8 cpu (6 of the node, 2 reserved for the claim deleted while launching) on 2 nodes", draining)
	}
	plan, err := scheduling.Solve(snap.Input, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 8 draining + 3 for a node that takes 2 cpu (and its overhead) > 10.
	if len(plan.NewNodes) != 0 || len(plan.Unschedulable) != 1 || !strings.Contains(plan.Unschedulable[0].Reason, "limit cpu=10 leaves 2") {
		t.Errorf("plan: %d new nodes, unschedulable %v; want the pod held back by the limit", len(plan.NewNodes), plan.Unschedulable)
	}
	used, err := New(kube).Usage(t.Context(), snap.Input.NodePools)
	if err != nil {
		t.Fatal(err)
	}
	if cpu, nodes := used["default"][corev1.ResourceCPU], used["default"]["nodes"]; cpu.Value() != 8 || nodes.Value() != 2 {
		t.Errorf("usage %v, want what the snapshot counts: 8 cpu on 2 nodes", used["default"])
	}
}

// Pods get nodes only from Ready NodePools, Ready for their current generation; a
// pod no Ready pool can take says why.
func TestOnlyReadyNodePoolsAreProvisionedFrom(t *testing.T) {
	types := schedtest.SyntheticTypes(4)
	invalid := readyPool("invalid", 100, metav1.ConditionFalse)
	invalid.Status.Conditions[0].Reason = "ValidationFailed"
	invalid.Status.Conditions[0].Message = "spec.template.metadata.labels: Invalid value"
	stale := readyPool("stale", 50, metav1.ConditionTrue)
	stale.Generation = 2 // changed since it was found Ready
	unknown := readyPool("unknown", 20, metav1.ConditionTrue)
	unknown.Status.Conditions = nil
	fallback := readyPool("fallback", 1, metav1.ConditionTrue)
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(invalid, stale, unknown, fallback,
		testobj.Pod("anywhere", "1", "", testobj.Unschedulable()),
		testobj.Pod("only-invalid", "1", "", testobj.Unschedulable(), testobj.NodeSelector(v1.NodePoolLabelKey, "invalid"))).Build()
	snap, err := New(kube).Snapshot(t.Context(), func(*v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil })
	if err != nil {
		t.Fatal(err)
	}
	plan, err := scheduling.Solve(snap.Input, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NewNodes) != 1 || plan.NewNodes[0].NodePool != "fallback" {
		var pools []string
		for _, n := range plan.NewNodes {
			pools = append(pools, n.NodePool)
		}
		t.Errorf("new nodes from %v, want one from the Ready NodePool fallback", pools)
	}
	if len(plan.Unschedulable) != 1 || !strings.Contains(plan.Unschedulable[0].Reason, "not Ready (ValidationFailed): spec.template.metadata.labels") {
		t.Errorf("unschedulable %v, want the pod of NodePool invalid, saying why", plan.Unschedulable)
	}
}

func TestNodePoolReady(t *testing.T) {
	stale := readyPool("p", 0, metav1.ConditionTrue)
	stale.Generation = 2
	none := readyPool("p", 0, metav1.ConditionTrue)
	none.Status.Conditions = nil
	for name, tc := range map[string]struct {
		np   *v1.NodePool
		want bool
	}{
		"ready":                      {readyPool("p", 0, metav1.ConditionTrue), true},
		"not ready":                  {readyPool("p", 0, metav1.ConditionFalse), false},
		"unknown":                    {readyPool("p", 0, metav1.ConditionUnknown), false},
		"no condition":               {none, false},
		"ready for a generation ago": {stale, false},
	} {
		if got, why := NodePoolReady(tc.np); got != tc.want || got == (why != "") {
			t.Errorf("%s: %v %q, want %v and a reason only when not ready", name, got, why, tc.want)
		}
	}
}

// A node's CSI attach limits come from its CSINode: the snapshot carries them, so a
// pod whose volume would take the driver past the node's count is not planned there.
func TestSnapshotReadsCSIAttachLimits(t *testing.T) {
	const driver = "ebs.csi.aws.com"
	if !slices.ContainsFunc(Kinds(), func(o client.Object) bool { _, ok := o.(*storagev1.CSINode); return ok }) {
		t.Error("Kinds does not start a CSINode informer")
	}
	room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Allocatable: room, Capacity: room,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	one := int32(1)
	csiNode := &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
		{Name: driver, NodeID: "i-1", Allocatable: &storagev1.VolumeNodeResources{Count: &one}}}}}
	var objs []client.Object
	for _, name := range []string{"old", "new"} {
		objs = append(objs,
			&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name}, Spec: corev1.PersistentVolumeSpec{
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-" + name}}}},
			&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-" + name}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}})
	}
	withClaim := func(p *corev1.Pod, claim string) *corev1.Pod {
		p.Spec.Containers = []corev1.Container{{Name: "c"}}
		p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		return p
	}
	objs = append(objs, node,
		withClaim(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "old", Namespace: "default"}, Spec: corev1.PodSpec{NodeName: "n1"}}, "old"),
		withClaim(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "default"}, Status: corev1.PodStatus{
			Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}}, "new"))
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	noTypes := func(*v1.NodePool) ([]*scheduling.InstanceType, error) { return nil, nil }
	for _, tc := range []struct {
		name  string
		objs  []client.Object
		bound int
	}{
		{"without a CSINode", objs, 1},
		{"with a CSINode", append(slices.Clone(objs), csiNode), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.objs...).Build()
			snap, err := New(kube).Snapshot(t.Context(), noTypes)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := scheduling.Solve(snap.Input, scheduling.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(snap.Input.Pods) != 1 || len(plan.Bindings) != tc.bound {
				t.Errorf("pending %d, bound %d, want 1 pending and %d bound (CSINodes in the input: %d)",
					len(snap.Input.Pods), len(plan.Bindings), tc.bound, len(snap.Input.CSINodes))
			}
		})
	}
}
