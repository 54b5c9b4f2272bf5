package provisioning

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// CapacityBuffers (autoscaling.x-k8s.io) are kept as placeholder pods planned
// beside the pending pods (see state.Buffer): the new nodes that take only
// placeholders are created too, unlike those of expected pods, since their room
// is the point. They come after the pods that exist: a plan whose placeholders
// leave a real pod without a node at a NodePool limit is dropped for one without
// them (see planWithExpected), and the claims of real pods take the limits'
// headroom before the claims of placeholders do (see create).

// +kubebuilder:rbac:groups=autoscaling.x-k8s.io,resources=capacitybuffers/status,verbs=get;patch;update

// BufferRecheck is how often the provisioner plans again while any
// CapacityBuffer exists, though nothing triggers it: a pod that takes a buffer's
// room tells nothing the provisioner watches, and the buffer's room is to be
// made again.
const BufferRecheck = 5 * time.Second

// Reasons of a buffer's Provisioning condition.
const (
	BufferReasonProvisioned     = "CapacityProvisioned"
	BufferReasonPartial         = "CapacityPartiallyProvisioned"
	BufferReasonNoCapacity      = "NoCapacity"
	BufferReasonEmpty           = "BufferIsEmpty"
	BufferReasonNotReady        = "NotReadyForProvisioning"
	BufferReasonReady           = "Resolved"
	bufferReasonPendingPodsWait = "pending pods are planned first at a NodePool limit"
)

// bufferOutcome is what one pass did for one buffer's placeholders: how many
// have room (on a node up, launching, or created now), and why the others have
// none.
type bufferOutcome struct {
	placed int
	why    string
}

// bufferOutcomes counts, by buffer (namespace/name), the placeholders of plan
// that have room: bound to a node or on a new node created (created[i] != nil),
// and why the others have none.
func bufferOutcomes(plan *scheduling.Plan, created []bool, refused []string) map[string]*bufferOutcome {
	out := map[string]*bufferOutcome{}
	of := func(p *corev1.Pod) *bufferOutcome {
		key := p.Annotations[v1alpha1.CapacityBufferPodAnnotationKey]
		if out[key] == nil {
			out[key] = &bufferOutcome{}
		}
		return out[key]
	}
	for _, b := range plan.Bindings {
		if state.IsBufferPod(b.Pod) {
			of(b.Pod).placed++
		}
	}
	for i, n := range plan.NewNodes {
		for _, p := range n.Pods {
			if !state.IsBufferPod(p) {
				continue
			}
			switch o := of(p); {
			case created[i]:
				o.placed++
			case refused[i] != "":
				o.why = fmt.Sprintf("NodePool %s: %s", n.NodePool, refused[i])
			case o.why == "":
				o.why = "creating its NodeClaim failed"
			}
		}
	}
	for _, f := range plan.Unschedulable {
		if state.IsBufferPod(f.Pod) {
			of(f.Pod).why = f.Reason
		}
	}
	return out
}

// BufferStatus is the status a buffer should have after a pass: the chunks
// resolved, ReadyForProvisioning (or why not), Provisioning (how many
// placeholders have room, or why none). outcome is nil when the pass planned
// none of its placeholders (see bufferReasonPendingPodsWait). Conditions keep
// their transition times where their status does not change.
func BufferStatus(b *state.Buffer, outcome *bufferOutcome, now time.Time) cb.CapacityBufferStatus {
	st := *b.Buffer.Status.DeepCopy()
	gen := b.Buffer.Generation
	set := func(typ string, status metav1.ConditionStatus, reason, message string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message,
			ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now)})
	}
	strategy := cb.ActiveCapacityStrategy
	if s := b.Buffer.Spec.ProvisioningStrategy; s != nil {
		strategy = *s
	}
	st.ProvisioningStrategy = &strategy
	if b.Refused != "" {
		st.Replicas, st.PodTemplateRef, st.PodTemplateGeneration = nil, nil, nil
		set(cb.ConditionReadyForProvisioning, metav1.ConditionFalse, b.Refused, b.Message)
		set(cb.ConditionProvisioning, metav1.ConditionFalse, BufferReasonNotReady, "Tailor keeps no room for this buffer: "+b.Message)
		return st
	}
	replicas := b.Replicas
	st.Replicas, st.PodTemplateRef, st.PodTemplateGeneration = &replicas, b.PodTemplate, b.TemplateGeneration
	set(cb.ConditionReadyForProvisioning, metav1.ConditionTrue, BufferReasonReady, fmt.Sprintf("%d chunks", replicas))
	want := len(b.Pods)
	capped := ""
	if int(replicas) > want {
		capped = fmt.Sprintf(" (Tailor plans at most %d placeholder pods per buffer)", state.MaxBufferPods)
	}
	switch {
	case want == 0:
		set(cb.ConditionProvisioning, metav1.ConditionFalse, BufferReasonEmpty, "the buffer asks for no room")
	case outcome == nil:
		set(cb.ConditionProvisioning, metav1.ConditionFalse, BufferReasonNoCapacity, fmt.Sprintf("0 of %d placeholder pods have room: %s%s", want, bufferReasonPendingPodsWait, capped))
	case outcome.placed >= want:
		set(cb.ConditionProvisioning, metav1.ConditionTrue, BufferReasonProvisioned, fmt.Sprintf("%d of %d placeholder pods have room on nodes up or launching%s", want, want, capped))
	case outcome.placed > 0:
		set(cb.ConditionProvisioning, metav1.ConditionTrue, BufferReasonPartial, fmt.Sprintf("%d of %d placeholder pods have room; the others: %s%s", outcome.placed, want, outcome.why, capped))
	default:
		set(cb.ConditionProvisioning, metav1.ConditionFalse, BufferReasonNoCapacity, fmt.Sprintf("0 of %d placeholder pods have room: %s%s", want, outcome.why, capped))
	}
	return st
}

// updateBuffers writes each buffer's status where it changed. outcomes are by
// namespace/name; planned says the pass planned the placeholders at all.
func (p *Provisioner) updateBuffers(ctx context.Context, buffers []*state.Buffer, outcomes map[string]*bufferOutcome, planned bool) {
	now := p.clock.Now()
	for _, b := range buffers {
		var o *bufferOutcome
		if planned {
			o = outcomes[b.Buffer.Namespace+"/"+b.Buffer.Name]
			if o == nil {
				o = &bufferOutcome{}
			}
		}
		st := BufferStatus(b, o, now)
		if equality.Semantic.DeepEqual(st, b.Buffer.Status) {
			continue
		}
		updated := b.Buffer.DeepCopy()
		updated.Status = st
		if err := p.kube.Status().Patch(ctx, updated, client.MergeFrom(b.Buffer)); client.IgnoreNotFound(err) != nil {
			log.FromContext(ctx).Error(err, "writing a CapacityBuffer's status", "capacitybuffer", client.ObjectKeyFromObject(b.Buffer))
		}
	}
}

// BuffersServed reports whether the API server serves CapacityBuffers
// (autoscaling.x-k8s.io/v1beta1): reading a kind it does not serve would keep the
// cluster view from ever syncing, and no plan would be made.
func BuffersServed(mapper meta.RESTMapper) bool {
	_, err := mapper.RESTMapping(schema.GroupKind{Group: cb.Group, Kind: "CapacityBuffer"}, cb.SchemeGroupVersion.Version)
	return err == nil
}

// onlyBuffers reports a new node that holds placeholder pods alone.
func onlyBuffers(n *scheduling.NewNode) bool {
	return !slices.ContainsFunc(n.Pods, func(p *corev1.Pod) bool { return !state.IsBufferPod(p) })
}

// virtual reports a pod that does not exist: expected or a placeholder.
func virtual(p *corev1.Pod) bool { return isExpected(p) || state.IsBufferPod(p) }
