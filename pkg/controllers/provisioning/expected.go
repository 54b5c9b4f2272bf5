package provisioning

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Expected pods are the replicas a ReplicaSet, StatefulSet or Job wants and has not
// made yet. The kube-controller-manager makes pods at the rate its client allows
// (20 a second by default), so a Deployment scaled to 500 reaches the provisioner in
// several batches; each batch planned on its own gets the nodes that suit its own
// size and its own tail of small nodes (60 nodes where one plan of all 500 has 11,
// at much the same price). So a batch is planned together with the pods still to
// come, as copies of a pending pod of their owner, and only the new nodes that take
// a pod that exists are created: the room they keep for the copies is what the
// next batch's pods fill.

// +kubebuilder:rbac:groups=apps,resources=replicasets;statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=resourcequotas,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=list

// OwnerKinds are the owners whose replicas are expected, and the ResourceQuotas
// that may leave no room for them: start their informers with the controller, so
// the first batch does not wait for their lists.
func OwnerKinds() []client.Object {
	return []client.Object{&appsv1.ReplicaSet{}, &appsv1.StatefulSet{}, &batchv1.Job{}, &corev1.ResourceQuota{}}
}

// maxExpected bounds the copies added to one batch, so that an owner asking for a
// million replicas cannot make one plan huge.
const maxExpected = 10000

// expectedPrefix starts an expected pod's name: '~' sorts after every character a
// pod name may hold, so the engine places the real pods of a shape before the
// expected ones (it takes each shape's pods in name order) and they share nodes.
const expectedPrefix = "~expected-"

// expectedPods returns the pods the owners of pending still have to make: for
// each controlling owner of a pending pod, want[owner] less have[owner] copies of
// its first pending pod that has no volume claim of its own (a copy would share
// it), and that fits a new node (fits, nil for all: copies of a pod that fits no
// instance type would fit none either, and only cost the solve). At most limit
// in all.
func expectedPods(pending []*corev1.Pod, want map[types.UID]int32, have map[types.UID]int, limit int, fits func([]*corev1.Pod) []bool) []*corev1.Pod {
	owners := byOwner(pending, func(p *corev1.Pod) bool { return !ownClaims(p) })
	owners = slices.DeleteFunc(owners, func(o *ownerPods) bool { return int(want[o.uid]) <= have[o.uid] })
	if fits != nil && len(owners) > 0 {
		firsts := make([]*corev1.Pod, len(owners))
		for i, o := range owners {
			firsts[i] = o.first
		}
		ok := fits(firsts)
		i := 0
		owners = slices.DeleteFunc(owners, func(*ownerPods) bool { i++; return !ok[i-1] })
	}
	var out []*corev1.Pod
	for _, o := range owners {
		for i := range min(int(want[o.uid])-have[o.uid], limit-len(out)) {
			out = append(out, expectedCopy(o.first, i))
		}
	}
	return out
}

// madeDemand is the rest of each owner in want that pods holds pods of: the pods it
// has made that are not among pods (bound, or waiting for their claims). They are
// planned for no more, but size new nodes (scheduling.Input.Demand), so that the
// part of a workload planned now gets the nodes a plan of the whole would, not
// those that suit the part (for pods of one size the cheapest node type depends
// on how many there are). At most limit in all.
//
// Only the owners of a pod planned for the first time count (replanned says which
// pods were planned before). A pod planned again has lost its room (the
// kube-scheduler gave it to another pod) while the rest of its workload has its
// nodes: sizing the node for it by the whole workload buys a node for pods that
// do not need one (in the mix of four shapes, three such nodes cost 29% more than
// the plan).
func madeDemand(pods []*corev1.Pod, want map[types.UID]int32, have map[types.UID]int, replanned map[types.UID]bool, limit int) []scheduling.Demand {
	arriving := map[types.UID]bool{}
	for _, o := range byOwner(pods, func(p *corev1.Pod) bool { return !replanned[p.UID] }) {
		arriving[o.uid] = true
	}
	var out []scheduling.Demand
	for _, o := range byOwner(pods, nil) {
		if _, ok := want[o.uid]; !ok || !arriving[o.uid] {
			continue
		}
		if n := min(have[o.uid]-o.count, limit); n > 0 {
			out = append(out, scheduling.Demand{Pod: o.first, Count: n})
			limit -= n
		}
	}
	return out
}

// ownerPods are the pods of one controlling owner: its first, and how many.
type ownerPods struct {
	uid   types.UID
	first *corev1.Pod
	count int
}

// byOwner groups the pods that have a controlling owner (and that keep admits,
// when set) by that owner, in the order of the owners' UIDs.
func byOwner(pods []*corev1.Pod, keep func(*corev1.Pod) bool) []*ownerPods {
	index := map[types.UID]*ownerPods{}
	var out []*ownerPods
	for _, p := range pods {
		owner := metav1.GetControllerOf(p)
		if owner == nil || keep != nil && !keep(p) {
			continue
		}
		o := index[owner.UID]
		if o == nil {
			o = &ownerPods{uid: owner.UID, first: p}
			index[owner.UID] = o
			out = append(out, o)
		}
		o.count++
	}
	slices.SortFunc(out, func(a, b *ownerPods) int { return strings.Compare(string(a.uid), string(b.uid)) })
	return out
}

// ownClaims reports a pod with a volume claim made for it alone (a StatefulSet's
// claim template, an ephemeral volume).
func ownClaims(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool {
		return v.PersistentVolumeClaim != nil || v.Ephemeral != nil
	})
}

// expectedCopy is the i-th pod expected beside template. It shares the template's
// labels and spec, which nothing writes.
func expectedCopy(template *corev1.Pod, i int) *corev1.Pod {
	owner := metav1.GetControllerOf(template)
	cp := &corev1.Pod{TypeMeta: template.TypeMeta, Spec: template.Spec, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	cp.Namespace = template.Namespace
	cp.Name = fmt.Sprintf("%s%s-%d", expectedPrefix, owner.Name, i)
	cp.UID = types.UID(expectedUIDPrefix + fmt.Sprintf("%s/%d", owner.UID, i))
	cp.Labels, cp.Annotations, cp.OwnerReferences = template.Labels, template.Annotations, template.OwnerReferences
	return cp
}

// expectedUIDPrefix begins the UID of every expected pod.
const expectedUIDPrefix = "expected/"

// isExpected reports a pod expected, not made yet (see expectedCopy).
func isExpected(p *corev1.Pod) bool { return strings.HasPrefix(string(p.UID), expectedUIDPrefix) }

// replicasWanted is how many live pods each owner wants: a ReplicaSet or
// StatefulSet its replicas, a Job as many as it runs at once. An owner that is
// going, suspended, finished or failing to make its pods (a quota, say) wants none
// more than it has: they may never come.
func replicasWanted(obj client.Object) (int32, bool) {
	if obj.GetDeletionTimestamp() != nil {
		return 0, false
	}
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		for _, c := range o.Status.Conditions {
			if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
				return 0, false
			}
		}
		return ptrOr(o.Spec.Replicas, 1), true
	case *appsv1.StatefulSet:
		if o.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
			// OrderedReady (the default) makes pod n+1 only once pod n runs and
			// is Ready (the controller's monotonic mode): while one is pending,
			// none other comes, so it wants none beyond those it has.
			return 0, true
		}
		return ptrOr(o.Spec.Replicas, 1), true
	case *batchv1.Job:
		if ptrOr(o.Spec.Suspend, false) {
			return 0, false
		}
		for _, c := range o.Status.Conditions {
			if c.Status == corev1.ConditionTrue && (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed ||
				c.Type == batchv1.JobFailureTarget || c.Type == batchv1.JobSuccessCriteriaMet) {
				return 0, false
			}
		}
		n := ptrOr(o.Spec.Parallelism, 1)
		if o.Spec.Completions != nil {
			n = min(n, *o.Spec.Completions-o.Status.Succeeded)
		}
		return n, true
	}
	return 0, false
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// wanted reads the owners of the pending pods: how many live pods each wants, of
// which those beyond the have it has only as many as can come (see canCome).
// An owner it cannot read (gone, or not a kind it knows) is left out.
func (p *Provisioner) wanted(ctx context.Context, pending []*corev1.Pod, have map[types.UID]int) map[types.UID]int32 {
	out := map[types.UID]int32{}
	newest := map[types.UID]time.Time{}
	for _, pod := range pending {
		if owner := metav1.GetControllerOf(pod); owner != nil && pod.CreationTimestamp.After(newest[owner.UID]) {
			newest[owner.UID] = pod.CreationTimestamp.Time
		}
	}
	seen := map[types.UID]bool{}
	for _, pod := range pending {
		owner := metav1.GetControllerOf(pod)
		if owner == nil || seen[owner.UID] {
			continue
		}
		seen[owner.UID] = true
		var obj client.Object
		switch owner.Kind {
		case "ReplicaSet":
			obj = &appsv1.ReplicaSet{}
		case "StatefulSet":
			obj = &appsv1.StatefulSet{}
		case "Job":
			obj = &batchv1.Job{}
		default:
			continue
		}
		if err := p.kube.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: owner.Name}, obj); err != nil {
			log.FromContext(ctx).V(1).Info("not reading a pending pod's owner", "pod", client.ObjectKeyFromObject(pod), "owner", owner.Name, "error", err.Error())
			continue
		}
		if obj.GetUID() != owner.UID {
			continue // a namesake made since
		}
		n, ok := replicasWanted(obj)
		if !ok {
			continue
		}
		if more := int(n) - have[owner.UID]; more > 0 {
			n = int32(have[owner.UID] + p.canCome(ctx, obj, pod, newest[owner.UID], more))
		}
		out[owner.UID] = n
	}
	return out
}

// canCome is how many of the more pods like pod that owner has still to make can
// come now: none while its controller's creates fail (a Job's or StatefulSet's
// FailedCreate event after its newest pod, see creationFailing; a ReplicaSet says
// so in its ReplicaFailure condition, see replicasWanted), and no more than the
// namespace's ResourceQuotas have room for. What it cannot read it takes as no
// obstacle.
func (p *Provisioner) canCome(ctx context.Context, owner client.Object, pod *corev1.Pod, newest time.Time, more int) int {
	logger := log.FromContext(ctx).V(1)
	if _, isRS := owner.(*appsv1.ReplicaSet); !isRS && p.events != nil {
		var failed corev1.EventList
		sel := fields.SelectorFromSet(fields.Set{"involvedObject.uid": string(owner.GetUID()), "reason": failedCreateReason})
		if err := p.events.List(ctx, &failed, client.InNamespace(owner.GetNamespace()), client.MatchingFieldsSelector{Selector: sel}); err != nil {
			logger.Info("not reading a pending pod's owner's events", "owner", owner.GetName(), "error", err.Error())
		} else if creationFailing(failed.Items, newest) {
			return 0
		}
	}
	var quotas corev1.ResourceQuotaList
	if err := p.kube.List(ctx, &quotas, client.InNamespace(pod.Namespace)); err != nil {
		logger.Info("not reading the namespace's resource quotas", "namespace", pod.Namespace, "error", err.Error())
		return more
	}
	list := make([]*corev1.ResourceQuota, len(quotas.Items))
	for i := range quotas.Items {
		list[i] = &quotas.Items[i]
	}
	if room, ok := quotaRoom(list, pod); ok && room < int64(more) {
		return int(room)
	}
	return more
}

// withoutExpected drops what the plan holds for expected pods: their bindings and
// failures, and the new nodes that take only expected pods.
func withoutExpected(plan *scheduling.Plan, expected map[types.UID]bool) {
	if len(expected) == 0 {
		return
	}
	real := func(p *corev1.Pod) bool { return !expected[p.UID] }
	plan.Bindings = slices.DeleteFunc(plan.Bindings, func(b scheduling.Binding) bool { return !real(b.Pod) })
	plan.Unschedulable = slices.DeleteFunc(plan.Unschedulable, func(f scheduling.Failure) bool { return !real(f.Pod) })
	plan.NewNodes = slices.DeleteFunc(plan.NewNodes, func(n *scheduling.NewNode) bool { return !slices.ContainsFunc(n.Pods, real) })
	for _, n := range plan.NewNodes {
		n.Pods = slices.DeleteFunc(n.Pods, func(p *corev1.Pod) bool { return !real(p) })
	}
}
