package provisioning

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Whether the pods an owner still has to make can come (pure): a ResourceQuota
// of the namespace may have no room for them, and the owner's controller may be
// failing to create them (a quota, an admission webhook refusing the pod).
//
// What the kube-controller-manager records when a create fails (v1.34):
//   - ReplicaSet: the ReplicaFailure condition, reason FailedCreate
//     (pkg/controller/replicaset calculateStatus), and an event;
//   - Job: no condition; a Warning event FailedCreate on the Job, "Error
//     creating: …" (pkg/controller/controller_utils.go RealPodControl.createPods,
//     which the Job controller's manageJob calls), and the Job is synced again
//     with a backoff of up to a minute, each failure another event;
//   - StatefulSet: no condition either; a Warning event FailedCreate on the
//     StatefulSet, "create Pod db-1 in StatefulSet db failed error: …"
//     (pkg/controller/statefulset/stateful_pod_control.go recordPodEvent).
// So a Job's or StatefulSet's FailedCreate event seen after its newest pod was
// made says its next pods are not coming now.

// failedCreateReason is the reason of the events above.
const failedCreateReason = "FailedCreate"

// creationFailing reports whether one of the owner's FailedCreate events was
// last seen after its newest pod was created: its creates fail now.
func creationFailing(failed []corev1.Event, newestPod time.Time) bool {
	return slices.ContainsFunc(failed, func(e corev1.Event) bool {
		return e.Reason == failedCreateReason && eventLastSeen(&e).After(newestPod)
	})
}

// eventLastSeen is when an event last happened, in whichever field its recorder
// set (core/v1 recorders set lastTimestamp, events.k8s.io ones eventTime and a
// series).
func eventLastSeen(e *corev1.Event) time.Time {
	t := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	if t.IsZero() {
		t = e.FirstTimestamp.Time
	}
	return t
}

// quotaRoom is how many more pods like pod the namespace's quotas admit, as the
// quota admission plugin charges a pod (its requests and limits as the kubelet
// sums them, one pod, one count/pods); ok is false when no quota limits it.
// Quotas of other namespaces, and those whose scopes the pod is outside, do not
// count.
func quotaRoom(quotas []*corev1.ResourceQuota, pod *corev1.Pod) (room int64, ok bool) {
	usage := podQuotaUsage(pod)
	for _, q := range quotas {
		if q.Namespace != pod.Namespace || !quotaApplies(q, pod) {
			continue
		}
		for name, hard := range q.Status.Hard {
			need, charged := usage[name]
			if !charged || need.Sign() <= 0 {
				continue
			}
			left := hard.DeepCopy()
			if used, has := q.Status.Used[name]; has {
				left.Sub(used)
			}
			n := int64(0)
			if left.Sign() > 0 {
				n = left.MilliValue() / need.MilliValue()
			}
			if !ok || n < room {
				room, ok = n, true
			}
		}
	}
	return room, ok
}

// podQuotaUsage is what a pod is charged against a quota's hard limits.
func podQuotaUsage(pod *corev1.Pod) corev1.ResourceList {
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	one := resource.MustParse("1")
	out := corev1.ResourceList{corev1.ResourcePods: one, "count/pods": one}
	for name, q := range requests {
		switch {
		case name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage:
			out[name] = q
			out["requests."+name] = q
		case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
			out[name] = q
			out["requests."+name] = q
		case strings.Contains(string(name), "/") && !strings.HasPrefix(string(name), "kubernetes.io/"):
			out["requests."+name] = q // extended resources
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if q, ok := limits[name]; ok {
			out["limits."+name] = q
		}
	}
	return out
}

// quotaApplies reports whether the quota's scopes take in the pod. A scope it
// does not know is taken to apply: fewer pods expected is the safe side.
func quotaApplies(q *corev1.ResourceQuota, pod *corev1.Pod) bool {
	for _, s := range q.Spec.Scopes {
		if !scopeMatches(corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists}, pod) {
			return false
		}
	}
	if q.Spec.ScopeSelector != nil {
		for _, r := range q.Spec.ScopeSelector.MatchExpressions {
			if !scopeMatches(r, pod) {
				return false
			}
		}
	}
	return true
}

func scopeMatches(r corev1.ScopedResourceSelectorRequirement, pod *corev1.Pod) bool {
	terminating := pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0
	switch r.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return terminating
	case corev1.ResourceQuotaScopeNotTerminating:
		return !terminating
	case corev1.ResourceQuotaScopeBestEffort:
		return bestEffort(pod)
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !bestEffort(pod)
	case corev1.ResourceQuotaScopePriorityClass:
		name := pod.Spec.PriorityClassName
		switch r.Operator {
		case corev1.ScopeSelectorOpExists:
			return name != ""
		case corev1.ScopeSelectorOpDoesNotExist:
			return name == ""
		case corev1.ScopeSelectorOpIn:
			return slices.Contains(r.Values, name)
		case corev1.ScopeSelectorOpNotIn:
			return !slices.Contains(r.Values, name)
		}
	}
	return true
}

// bestEffort is the BestEffort QoS class: no container requests or limits cpu or
// memory.
func bestEffort(pod *corev1.Pod) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for _, rl := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
				for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
					if q, ok := rl[name]; ok && !q.IsZero() {
						return false
					}
				}
			}
		}
	}
	return true
}
