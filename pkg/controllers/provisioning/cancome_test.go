package provisioning

import (
	"context"
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

// A pending pod that fits no instance type of any NodePool gets no copies: its
// Job's 10,000 pods to come would fit none either (they became 10,000 expected
// pods in every batch). A pod that fits still gets its copies.
func TestExpectedPodsOnlyOfPodsThatFit(t *testing.T) {
	in := &scheduling.Input{NodePools: []*scheduling.NodePool{{NodePool: &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		InstanceTypes: schedtest.SyntheticTypes(20)}}}
	pending := []*corev1.Pod{ownedBy(pod("huge-a", "1000"), "Job", "huge"), ownedBy(pod("web-a", "1"), "ReplicaSet", "web")}
	want := map[k8stypes.UID]int32{"huge": 20000, "web": 5}
	have := map[k8stypes.UID]int{"huge": 1, "web": 1}
	fits := func(pods []*corev1.Pod) []bool { return scheduling.FitNewNodes(in, pods) }
	if n := len(expectedPods(pending, want, have, maxExpected, nil)); n != maxExpected {
		t.Fatalf("%d expected pods without the check, want %d: the case shows nothing", n, maxExpected)
	}
	got := expectedPods(pending, want, have, maxExpected, fits)
	if len(got) != 4 {
		t.Errorf("%d expected pods, want web's 4 and none of the Job that fits no node", len(got))
	}
	for _, p := range got {
		if metav1.GetControllerOf(p).UID != "web" {
			t.Errorf("expected pod %s is not web's", p.Name)
		}
	}
}

func TestQuotaRoom(t *testing.T) {
	quota := func(ns string, hard, used corev1.ResourceList, edit func(*corev1.ResourceQuota)) *corev1.ResourceQuota {
		q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: ns},
			Spec: corev1.ResourceQuotaSpec{Hard: hard}, Status: corev1.ResourceQuotaStatus{Hard: hard, Used: used}}
		if edit != nil {
			edit(q)
		}
		return q
	}
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	p := pod("job-a", "1") // 1 cpu, in default
	limited := pod("limited", "1")
	limited.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}
	for _, tc := range []struct {
		name   string
		quotas []*corev1.ResourceQuota
		pod    *corev1.Pod
		room   int64
		ok     bool
	}{
		{"no quota", nil, p, 0, false},
		{"pods", []*corev1.ResourceQuota{quota("default", rl("pods", "10"), rl("pods", "7"), nil)}, p, 3, true},
		{"count/pods", []*corev1.ResourceQuota{quota("default", rl("count/pods", "2"), rl("count/pods", "2"), nil)}, p, 0, true},
		{"requests.cpu", []*corev1.ResourceQuota{quota("default", rl("requests.cpu", "4500m"), rl("requests.cpu", "1"), nil)}, p, 3, true},
		{"cpu, the smaller of two quotas", []*corev1.ResourceQuota{
			quota("default", rl("cpu", "10"), rl("cpu", "1"), nil), quota("default", rl("pods", "3"), rl("pods", "1"), nil)}, p, 2, true},
		{"over its hard limit", []*corev1.ResourceQuota{quota("default", rl("pods", "1"), rl("pods", "3"), nil)}, p, 0, true},
		{"limits.memory", []*corev1.ResourceQuota{quota("default", rl("limits.memory", "3Gi"), nil, nil)}, limited, 3, true},
		{"a resource the pod does not ask for", []*corev1.ResourceQuota{quota("default", rl("requests.example.com/gpu", "1", "services", "0"), rl("requests.example.com/gpu", "1"), nil)}, p, 0, false},
		{"another namespace", []*corev1.ResourceQuota{quota("other", rl("pods", "0"), nil, nil)}, p, 0, false},
		{"a BestEffort scope, the pod is not", []*corev1.ResourceQuota{quota("default", rl("pods", "0"), nil, func(q *corev1.ResourceQuota) {
			q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
		})}, p, 0, false},
		{"a priority class scope the pod is in", []*corev1.ResourceQuota{quota("default", rl("pods", "0"), nil, func(q *corev1.ResourceQuota) {
			q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
				{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpDoesNotExist}}}
		})}, p, 0, true},
	} {
		room, ok := quotaRoom(tc.quotas, tc.pod)
		if room != tc.room || ok != tc.ok {
			t.Errorf("%s: room %d, %v; want %d, %v", tc.name, room, ok, tc.room, tc.ok)
		}
	}
}

func TestCreationFailing(t *testing.T) {
	newest := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(newest.Add(d)) }
	for _, tc := range []struct {
		name  string
		event corev1.Event
		want  bool
	}{
		{"after the newest pod", corev1.Event{Reason: "FailedCreate", LastTimestamp: at(time.Minute)}, true},
		{"before it: creates work again", corev1.Event{Reason: "FailedCreate", LastTimestamp: at(-time.Minute)}, false},
		{"a series seen since", corev1.Event{Reason: "FailedCreate", EventTime: metav1.NewMicroTime(newest.Add(-time.Hour)),
			Series: &corev1.EventSeries{LastObservedTime: metav1.NewMicroTime(newest.Add(time.Second))}}, true},
		{"only a first timestamp", corev1.Event{Reason: "FailedCreate", FirstTimestamp: at(time.Second)}, true},
		{"another reason", corev1.Event{Reason: "SuccessfulCreate", LastTimestamp: at(time.Minute)}, false},
	} {
		if got := creationFailing([]corev1.Event{tc.event}, newest); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Through the API server: a Job of parallelism 50 whose namespace's quota has
// room for no more pods, and a Parallel StatefulSet whose creates fail (a
// FailedCreate event after its newest pod, as its controller records a webhook's
// refusal), get claims sized for their pending pod alone, not for the 49 and 39
// copies that cannot come (a 50-cpu claim for a 1-cpu pod, eating the pool's
// limit headroom).
func TestProvisionExpectsOnlyPodsThatCanCome(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "quota-"}}
	if err := kube.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// No namespace controller runs here to empty it.
		_ = kube.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns.Name), client.GracePeriodSeconds(0))
		_ = kube.Delete(context.Background(), ns)
	})
	readyNodePool(t, "cancome", nil)
	labels := map[string]string{"app": "x"}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "batch", Namespace: ns.Name},
		Spec: batchv1.JobSpec{Parallelism: ptr[int32](50), Template: template}}
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr[int32](40), PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template}}
	sts.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
	for _, obj := range []client.Object{job, sts} {
		if err := kube.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Delete(context.Background(), obj) })
	}
	own := func(p *corev1.Pod, kind string, owner client.Object, ns string) {
		if ns != p.Namespace { // pendingPod makes pods in default
			copy := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}, Spec: p.Spec}
			if err := kube.Delete(ctx, p); err != nil {
				t.Fatal(err)
			}
			if err := kube.Create(ctx, copy); err != nil {
				t.Fatal(err)
			}
			copy.Status = p.Status
			if err := kube.Status().Update(ctx, copy); err != nil {
				t.Fatal(err)
			}
			p = copy
		}
		patch := client.MergeFrom(p.DeepCopy())
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr(true)}}
		if err := kube.Patch(ctx, p, patch); err != nil {
			t.Fatal(err)
		}
	}
	own(pendingPod(t, "batch-0", "1", "cancome"), "Job", job, ns.Name)
	// The quota comes after the Job's pod, so the quota admission lets that one in.
	hard := corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "pods", Namespace: ns.Name}, Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	if err := kube.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	quota.Status = corev1.ResourceQuotaStatus{Hard: hard, Used: hard} // as the quota controller would say
	if err := kube.Status().Update(ctx, quota); err != nil {
		t.Fatal(err)
	}
	dbPod := pendingPod(t, "db-0", "1", "cancome")
	own(dbPod, "StatefulSet", sts, "default")
	refused := &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "db-", Namespace: "default"}, Reason: "FailedCreate", Type: corev1.EventTypeWarning,
		InvolvedObject: corev1.ObjectReference{Kind: "StatefulSet", Namespace: "default", Name: sts.Name, UID: sts.UID},
		Message:        "create Pod db-1 in StatefulSet db failed error: admission webhook denied the request",
		FirstTimestamp: metav1.NewTime(time.Now().Add(time.Minute)), LastTimestamp: metav1.NewTime(time.Now().Add(time.Minute))}
	if err := kube.Create(ctx, refused); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), refused) })

	types := schedtest.SyntheticTypes(60)
	p := NewProvisioner(kube, state.New(kube), func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		record.NewFakeRecorder(100), clocktesting.NewFakeClock(time.Now()), Options{}).ReadEventsWith(kube)
	if err := p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	var cpu resource.Quantity
	for _, c := range poolClaims(t, "cancome") {
		cpu.Add(c.Spec.Resources.Requests[corev1.ResourceCPU])
	}
	if cpu.Cmp(resource.MustParse("4")) > 0 {
		t.Errorf("the claims request %s cpu for two 1-cpu pods whose copies cannot come", cpu.String())
	}
}
