package termination

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// TaintSettle is how long the disrupted taint must have been seen on a node before
// the node may count as drained. The kube-scheduler can bind a pod from a view of
// the node taken just before the taint; that binding has to become visible, and
// the pod be evicted, before the instance goes.
const TaintSettle = 5 * time.Second

// Drain is one pass of draining a node, decided from its pods alone.
type Drain struct {
	// Evict are the pods to evict now; Delete, to delete outright (the grace period
	// is up); Waiting, pods of the current tier held back (do-not-disrupt) or
	// already on their way out.
	Evict, Delete, Waiting []*corev1.Pod
	// Early are pods deleted ahead of their turn, with EarlyGrace as their grace
	// period, because their own terminationGracePeriodSeconds would otherwise run
	// past the node's terminationGracePeriod deadline.
	Early      []*corev1.Pod
	EarlyGrace time.Duration
	// Why Waiting[0] is waited on.
	Why string
	// Done: nothing the drain waits for runs on the node any more.
	Done bool
}

// Drain tiers, in eviction order, as the kubelet's graceful node shutdown orders
// them: a tier is evicted only once every earlier one is gone.
const (
	tierRegular = iota
	tierCritical
	tierDaemon
	tierCriticalDaemon
	tiers
)

// PlanDrain orders a node's pods for eviction at now, tier by tier: ordinary pods,
// then system-critical ones, then DaemonSet pods, then critical DaemonSet pods.
// Pods the drain leaves alone (see Ignored) are neither evicted nor waited for.
// Pods annotated karpenter.sh/do-not-disrupt ("true", or a duration since the pod
// started that has not run out) are waited on, not evicted, until the
// node's terminationGracePeriod deadline (until, nil for none); a pod whose own
// grace period would run past it is deleted early enough to get all of it, as
// Karpenter does; at the deadline everything left is deleted at once and nothing
// is waited for any more.
func PlanDrain(pods []corev1.Pod, now time.Time, until *time.Time) Drain {
	var d Drain
	expired := until != nil && !now.Before(*until)
	var byTier [tiers][]*corev1.Pod
	wait := func(p *corev1.Pod, why string) {
		if len(d.Waiting) == 0 {
			d.Why = why
		}
		d.Waiting = append(d.Waiting, p)
	}
	for i := range pods {
		p := &pods[i]
		switch {
		case Ignored(p, now):
			continue
		case expired && p.DeletionTimestamp != nil:
			// terminationGracePeriod is up: the instance goes whatever its pods are
			// still doing.
			continue
		case expired:
			d.Delete = append(d.Delete, p)
		case until != nil && p.DeletionTimestamp == nil && !now.Before(until.Add(-podGracePeriod(p))):
			d.Early = append(d.Early, p)
			d.EarlyGrace = until.Sub(now)
		default:
			byTier[tierOf(p)] = append(byTier[tierOf(p)], p)
		}
	}
	for _, tier := range byTier {
		if len(tier) == 0 {
			continue
		}
		for _, p := range tier {
			switch {
			case p.DeletionTimestamp != nil:
				wait(p, "terminating")
			case v1.PodDoNotDisrupt(p, now).Active:
				wait(p, v1.DoNotDisruptAnnotationKey)
			default:
				d.Evict = append(d.Evict, p)
			}
		}
		break
	}
	d.Done = len(d.Evict)+len(d.Delete)+len(d.Early)+len(d.Waiting) == 0
	return d
}

// podGracePeriod is the pod's terminationGracePeriodSeconds (the API server
// defaults it to 30).
func podGracePeriod(p *corev1.Pod) time.Duration {
	if s := p.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return 30 * time.Second
}

func tierOf(p *corev1.Pod) int {
	critical, daemon := isCritical(p), scheduling.IsDaemonSetPod(p)
	switch {
	case critical && daemon:
		return tierCriticalDaemon
	case daemon:
		return tierDaemon
	case critical:
		return tierCritical
	}
	return tierRegular
}

func isCritical(p *corev1.Pod) bool {
	return p.Spec.PriorityClassName == "system-node-critical" || p.Spec.PriorityClassName == "system-cluster-critical"
}

// Ignored reports a pod the drain neither evicts nor waits for: a finished pod, or
// one that stays on the node until it is gone (see StaysOnNode).
func Ignored(p *corev1.Pod, now time.Time) bool {
	return scheduling.IsTerminal(p) || StaysOnNode(p, now)
}

// StaysOnNode reports a pod that no drain removes: a mirror pod (the kubelet runs
// its static pod whatever the API says); a pod that tolerates the disrupted taint,
// which its controller would only put back (DaemonSets such as kube-proxy or a CNI
// tolerate every taint); a pod stuck terminating (see StuckTerminating).
func StaysOnNode(p *corev1.Pod, now time.Time) bool {
	return scheduling.IsMirrorPod(p) || toleratesDisrupted(p) || StuckTerminating(p, now)
}

func toleratesDisrupted(p *corev1.Pod) bool {
	return scheduling.Untolerated(p.Spec.Tolerations, []corev1.Taint{v1.DisruptedNoScheduleTaint}, corev1.TaintEffectNoSchedule) == nil
}

// StuckTerminating reports a pod terminating for longer than its grace period: the
// API server sets deletionTimestamp to the deletion plus the grace period, so past
// it the kubelet has had all the time the pod asked for (or is gone with its node),
// and waiting longer would only hold the instance.
func StuckTerminating(p *corev1.Pod, now time.Time) bool {
	return p.DeletionTimestamp != nil && now.After(p.DeletionTimestamp.Time)
}

// settleLeft is how much longer a node whose disrupted taint was first seen at
// tainted must keep it before it can count as drained.
func settleLeft(tainted, now time.Time) time.Duration {
	return max(0, tainted.Add(TaintSettle).Sub(now))
}

// BlockingAttachments are the VolumeAttachments on a drained node that its
// termination waits for, so a volume is detached cleanly before its instance goes:
// those of persistent volumes, except volumes in use by a pod that stays on the
// node (keptPVs), which could not be detached before the node is gone.
func BlockingAttachments(attachments []storagev1.VolumeAttachment, keptPVs map[string]bool) []*storagev1.VolumeAttachment {
	var out []*storagev1.VolumeAttachment
	for i := range attachments {
		va := &attachments[i]
		pv := va.Spec.Source.PersistentVolumeName
		if pv == nil || keptPVs[*pv] {
			continue
		}
		out = append(out, va)
	}
	return out
}
