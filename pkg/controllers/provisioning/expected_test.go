package provisioning

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
	"github.com/nodetailor/tailor/pkg/state"
)

// ownedBy makes pod a pod of the controller kind/name.
func ownedBy(p *corev1.Pod, kind, name string) *corev1.Pod {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name,
		UID: k8stypes.UID(name), Controller: ptr(true)}}
	return p
}

func ptr[T any](v T) *T { return &v }

func TestExpectedPods(t *testing.T) {
	withClaim := ownedBy(pod("db-0", "1"), "StatefulSet", "db")
	withClaim.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}}}
	pending := []*corev1.Pod{
		ownedBy(pod("web-a", "1"), "ReplicaSet", "web"), ownedBy(pod("web-b", "1"), "ReplicaSet", "web"),
		ownedBy(pod("done-a", "1"), "ReplicaSet", "done"),
		withClaim,
		pod("bare", "1"),
	}
	want := map[k8stypes.UID]int32{"web": 5, "done": 3, "db": 3}
	have := map[k8stypes.UID]int{"web": 2, "done": 3, "db": 1}
	got := expectedPods(pending, want, have, 100, nil)
	if len(got) != 3 {
		t.Fatalf("%d expected pods %v, want web's 3 missing (done has all its pods; db's pods have claims of their own)", len(got), names(got))
	}
	uids := map[k8stypes.UID]bool{}
	for _, p := range got {
		if !strings.HasPrefix(p.Name, expectedPrefix+"web-") || p.Spec.Containers[0].Resources.Requests.Cpu().String() != "1" ||
			metav1.GetControllerOf(p).UID != "web" || p.Namespace != "default" {
			t.Errorf("%s/%s is not a copy of web's pending pod", p.Namespace, p.Name)
		}
		if uids[p.UID] || p.UID == "web-a" {
			t.Errorf("%s: UID %s not its own", p.Name, p.UID)
		}
		uids[p.UID] = true
	}
	// Names sort after every real pod name, so the engine places real pods first.
	if !(got[0].Name > "web-zzzz-99999") {
		t.Errorf("%s sorts before a real pod's name", got[0].Name)
	}
	if n := len(expectedPods(pending, want, have, 2, nil)); n != 2 {
		t.Errorf("%d expected pods, want the limit, 2", n)
	}
	if n := len(expectedPods(pending, map[k8stypes.UID]int32{"web": 1}, have, 100, nil)); n != 0 {
		t.Errorf("%d expected pods of an owner that has more than it wants", n)
	}
}

func TestReplicasWanted(t *testing.T) {
	now := metav1.Now()
	failing := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: ptr[int32](5)}}
	failing.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue}}
	deleting := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr[int32](5)}}
	job := func(parallelism, completions *int32, succeeded int32, edit func(*batchv1.Job)) *batchv1.Job {
		j := &batchv1.Job{Spec: batchv1.JobSpec{Parallelism: parallelism, Completions: completions}}
		j.Status.Succeeded = succeeded
		if edit != nil {
			edit(j)
		}
		return j
	}
	for _, tc := range []struct {
		name string
		obj  client.Object
		want int32
		ok   bool
	}{
		{"replicaset", &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: ptr[int32](5)}}, 5, true},
		{"replicaset failing to make pods", failing, 0, false},
		{"replicaset being deleted", deleting, 0, false},
		{"parallel statefulset, replicas defaulted", &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{PodManagementPolicy: appsv1.ParallelPodManagement}}, 1, true},
		// OrderedReady makes the next pod only once the last runs and is Ready.
		{"orderedready statefulset", &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr[int32](40)}}, 0, true},
		{"job runs parallelism at once", job(ptr[int32](4), nil, 0, nil), 4, true},
		{"job near its completions", job(ptr[int32](4), ptr[int32](6), 3, nil), 3, true},
		{"suspended job", job(ptr[int32](4), nil, 0, func(j *batchv1.Job) { j.Spec.Suspend = ptr(true) }), 0, false},
		{"finished job", job(ptr[int32](4), nil, 0, func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		}), 0, false},
		{"another kind", &appsv1.DaemonSet{}, 0, false},
	} {
		got, ok := replicasWanted(tc.obj)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// Two pods of a ReplicaSet that wants ten: the batch is planned for all ten, and
// only the node that takes the two is kept, sized for the ten (its requests hold
// the room the eight to come will take).
func TestPlanWithExpected(t *testing.T) {
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	in := &scheduling.Input{NodePools: []*scheduling.NodePool{{NodePool: pool, InstanceTypes: schedtest.SyntheticTypes(20)}},
		Pods: []*corev1.Pod{ownedBy(pod("web-a", "1"), "ReplicaSet", "web"), ownedBy(pod("web-b", "1"), "ReplicaSet", "web")}}
	expected := expectedPods(in.Pods, map[k8stypes.UID]int32{"web": 10}, map[k8stypes.UID]int{"web": 2}, maxExpected, nil)
	used, plan, _, n, _, err := planWithExpected(in, in, expected, nil, nil, false, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 8 || len(used.Pods) != 10 || len(plan.NewNodes) != 1 {
		t.Fatalf("%d expected pods used, %d planned, %d new nodes; want 8, 10 and one node", n, len(used.Pods), len(plan.NewNodes))
	}
	node := plan.NewNodes[0]
	if got := names(node.Pods); len(got) != 2 || got[0] != "web-a" || got[1] != "web-b" {
		t.Errorf("the node takes %v, want the two real pods only", got)
	}
	if cpu := node.Requests[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("10")) < 0 {
		t.Errorf("the node requests %s cpu, want room for all ten pods", cpu.String())
	}
	// Without them, the two pods get a node of their own size.
	_, alone, _, _, _, err := planWithExpected(in, in, nil, nil, nil, false, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cpu := alone.NewNodes[0].Requests[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("3")) > 0 {
		t.Errorf("without expected pods the node requests %s cpu; the case shows nothing", cpu.String())
	}
}

// When the expected pods would take room a real pod needs (up to a limit), the
// batch is planned without them.
func TestPlanWithExpectedYieldsToRealPods(t *testing.T) {
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pool.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("6")}
	in := &scheduling.Input{NodePools: []*scheduling.NodePool{{NodePool: pool, InstanceTypes: schedtest.SyntheticTypes(6)}},
		Pods: []*corev1.Pod{ownedBy(pod("big-a", "2"), "ReplicaSet", "big"), pod("small-a", "1"), pod("small-b", "1"), pod("small-c", "1")}}
	expected := expectedPods(in.Pods, map[k8stypes.UID]int32{"big": 10}, map[k8stypes.UID]int{"big": 1}, maxExpected, nil)
	_, plan, _, n, _, err := planWithExpected(in, in, expected, nil, nil, false, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Unschedulable) != 0 || n != 0 {
		t.Errorf("%d real pods unschedulable, %d expected pods used; want every real pod placed, planned without expected pods", len(plan.Unschedulable), n)
	}
	// Planned with them, a real pod is left out: what the fallback is for.
	with := *in
	with.Pods = append(slices.Clone(in.Pods), expected...)
	_, withPlan, _, err := planPods(&with, &with, false, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	uids := map[k8stypes.UID]bool{}
	for _, p := range expected {
		uids[p.UID] = true
	}
	withoutExpected(withPlan, uids)
	if len(withPlan.Unschedulable) == 0 {
		t.Error("planned with the expected pods, every real pod fits; the case shows nothing")
	}
	for _, node := range plan.NewNodes {
		for _, p := range node.Pods {
			if strings.HasPrefix(p.Name, expectedPrefix) {
				t.Errorf("node %s holds expected pod %s", node.Name, p.Name)
			}
		}
	}
}

// Under a cpu limit of 3, web's three copies share a node with web-a and the
// batch pod, and api-a, a real pod of another workload, is left out; without
// the copies api-a is placed and batch is left out. Both plans leave one pod out,
// but a pod still to come may not take the headroom a pod that exists needs: the
// plan without the copies is kept.
func TestPlanWithExpectedKeepsEveryRealPodsPlace(t *testing.T) {
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pool.Spec.Limits = v1.Limits{corev1.ResourceCPU: resource.MustParse("3")}
	in := &scheduling.Input{NodePools: []*scheduling.NodePool{{NodePool: pool, InstanceTypes: schedtest.SyntheticTypes(8)}},
		Pods: []*corev1.Pod{ownedBy(pod("web-a", "1"), "ReplicaSet", "web"), ownedBy(pod("api-a", "1500m"), "ReplicaSet", "api"), pod("batch", "500m")}}
	expected := expectedPods(in.Pods, map[k8stypes.UID]int32{"web": 4, "api": 1}, map[k8stypes.UID]int{"web": 1, "api": 1}, maxExpected, nil)
	if len(expected) != 3 {
		t.Fatalf("%d expected pods, want web's 3", len(expected))
	}
	_, alone, _, err := planPods(in, in, false, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Planned with the copies, the count of pods left out is the same, but not the pods.
	with := *in
	with.Pods = append(slices.Clone(in.Pods), expected...)
	_, withPlan, _, err := planPods(&with, &with, false, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	uids := map[k8stypes.UID]bool{}
	for _, p := range expected {
		uids[p.UID] = true
	}
	withoutExpected(withPlan, uids)
	if len(withPlan.Unschedulable) != len(alone.Unschedulable) || placesAll(withPlan, alone) {
		t.Fatalf("with the copies %v left out, without %v; the case shows nothing", failed(withPlan), failed(alone))
	}

	_, plan, _, n, _, err := planWithExpected(in, in, expected, nil, nil, false, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d expected pods used, want the plan without them", n)
	}
	if !placesAll(plan, alone) {
		t.Errorf("%v left out, but %v only without the expected pods: they took a real pod's headroom", failed(plan), failed(alone))
	}
}

func failed(plan *scheduling.Plan) []string {
	var out []string
	for _, f := range plan.Unschedulable {
		out = append(out, f.Pod.Name)
	}
	return out
}

// Through the API server: the provisioner reads the ReplicaSet that owns the
// pending pods and sizes the batch's NodeClaim for the replicas still to come.
func TestProvisionSizesForTheReplicaSet(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	readyNodePool(t, "rs", nil)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr[int32](8), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}}}
	if err := kube.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), rs) })
	for _, name := range []string{"web-1", "web-2"} {
		p := pendingPod(t, name, "1", "rs")
		patch := client.MergeFrom(p.DeepCopy())
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr(true)}}
		if err := kube.Patch(ctx, p, patch); err != nil {
			t.Fatal(err)
		}
	}
	types := schedtest.SyntheticTypes(20)
	p := NewProvisioner(kube, state.New(kube), func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		record.NewFakeRecorder(100), clocktesting.NewFakeClock(time.Now()), Options{})
	if err := p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	claims := poolClaims(t, "rs")
	if len(claims) != 1 {
		t.Fatalf("%d claims, want one for the ReplicaSet's eight pods", len(claims))
	}
	if cpu := claims[0].Spec.Resources.Requests[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("8")) < 0 {
		t.Errorf("the claim requests %s cpu, want room for all eight replicas", cpu.String())
	}
	if len(p.nominated) != 2 {
		t.Errorf("%d pods nominated, want the two that exist", len(p.nominated))
	}
}

// The pods an owner made that are not planned now (bound, or waiting for their
// claims) size the new nodes: one demand per owner, of the pods it has less those
// planned.
func TestMadeDemand(t *testing.T) {
	planned := []*corev1.Pod{ownedBy(pod("web-a", "1"), "ReplicaSet", "web"), ownedBy(pod("web-b", "1"), "ReplicaSet", "web"),
		ownedBy(pod("job-a", "1"), "Job", "job"), ownedBy(pod("unknown-a", "1"), "ReplicaSet", "unknown"), pod("bare", "1")}
	want := map[k8stypes.UID]int32{"web": 10, "job": 1}
	have := map[k8stypes.UID]int{"web": 7, "job": 1, "unknown": 50}
	got := madeDemand(planned, want, have, nil, 100)
	if len(got) != 1 || got[0].Count != 5 || got[0].Pod.Name != "web-a" {
		t.Fatalf("demand %+v, want web's 5 made pods not planned now, as web-a (the job has no others; unknown owners are not read)", got)
	}
	if got := madeDemand(planned, want, have, nil, 3); len(got) != 1 || got[0].Count != 3 {
		t.Errorf("demand %+v, want it cut at the limit, 3", got)
	}
	// web-a lost its room and is planned again: web's other pods have theirs, and
	// web-a's node is not sized for them; web-b is new, and web counts again.
	if got := madeDemand(planned[:1], want, have, map[k8stypes.UID]bool{planned[0].UID: true}, 100); len(got) != 0 {
		t.Errorf("demand %+v for a pod planned again, want none", got)
	}
	if got := madeDemand(planned, want, have, map[k8stypes.UID]bool{planned[0].UID: true}, 100); len(got) != 1 || got[0].Count != 5 {
		t.Errorf("demand %+v beside a new pod of web, want web's 5", got)
	}
}
