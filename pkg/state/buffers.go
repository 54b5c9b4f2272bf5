package state

import (
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// A CapacityBuffer (autoscaling.x-k8s.io) asks for room for pods that do not
// exist: Tailor plans placeholder pods of the buffer's shape beside the pending
// pods, so nodes are launched for them, and keeps them in place when it
// consolidates. Real pods take that room as soon as they come, since it is free
// room on real nodes; the next plan finds room for the placeholders again.

// Buffer is a CapacityBuffer as Tailor resolved it.
type Buffer struct {
	Buffer *cb.CapacityBuffer
	// Pods are the buffer's placeholder pods (see PlaceholderPod); none when the
	// buffer is refused or asks for none.
	Pods []*corev1.Pod
	// Replicas is how many chunks the spec asks for, after its limits; Pods may
	// hold fewer (MaxBufferPods).
	Replicas int32
	// PodTemplate and TemplateGeneration name the PodTemplate read, for a buffer
	// of a podTemplateRef.
	PodTemplate        *cb.LocalObjectRef
	TemplateGeneration *int64
	// Refused, when set, is why Tailor keeps no room for the buffer (the
	// reason of its ReadyForProvisioning condition, False), and Message says it
	// in words.
	Refused string
	Message string
}

// Reasons a buffer is refused.
const (
	BufferUnsupportedStrategy    = "UnsupportedProvisioningStrategy"
	BufferNoShape                = "NoPodShape"
	BufferPodTemplateNotFound    = "PodTemplateNotFound"
	BufferUnsupportedScalableRef = "UnsupportedScalableRef"
	BufferScalableRefNotFound    = "ScalableRefNotFound"
	BufferInvalidSpec            = "InvalidSpec"
)

// MaxBufferPods bounds the placeholder pods of one buffer, so that a buffer of
// limits alone over a tiny pod cannot make every plan huge.
const MaxBufferPods = 10000

// bufferUIDPrefix begins the UID of every placeholder pod.
const bufferUIDPrefix = "capacitybuffer/"

// bufferPrefix starts a placeholder pod's name: '~' sorts after every character a
// pod name may hold, so the engine places the real pods of a shape first.
const bufferPrefix = "~buffer-"

// IsBufferPod reports a placeholder pod of a CapacityBuffer.
func IsBufferPod(p *corev1.Pod) bool {
	return strings.HasPrefix(string(p.UID), bufferUIDPrefix) || v1alpha1.IsCapacityBufferPod(p)
}

// ScalableKinds are the workloads a buffer's scalableRef may name: those whose pod
// template and replicas Tailor reads. Any other kind is refused.
var ScalableKinds = []string{"apps/Deployment", "apps/ReplicaSet", "apps/StatefulSet"}

// ResolveBuffers resolves every buffer of objs, in namespace/name order.
func ResolveBuffers(objs *Objects) []*Buffer {
	if len(objs.CapacityBuffers) == 0 {
		return nil
	}
	templates := map[types.NamespacedName]*corev1.PodTemplate{}
	for _, t := range objs.PodTemplates {
		templates[types.NamespacedName{Namespace: t.Namespace, Name: t.Name}] = t
	}
	workloads := map[string]workload{}
	key := func(kind, ns, name string) string { return kind + "/" + ns + "/" + name }
	for _, d := range objs.Deployments {
		workloads[key("apps/Deployment", d.Namespace, d.Name)] = workload{&d.Spec.Template, d.Status.Replicas}
	}
	for _, rs := range objs.ReplicaSets {
		workloads[key("apps/ReplicaSet", rs.Namespace, rs.Name)] = workload{&rs.Spec.Template, rs.Status.Replicas}
	}
	for _, ss := range objs.StatefulSets {
		workloads[key("apps/StatefulSet", ss.Namespace, ss.Name)] = workload{&ss.Spec.Template, ss.Status.Replicas}
	}
	var out []*Buffer
	for _, b := range objs.CapacityBuffers {
		if b.DeletionTimestamp != nil {
			continue
		}
		var tmpl *corev1.PodTemplate
		if ref := b.Spec.PodTemplateRef; ref != nil {
			tmpl = templates[types.NamespacedName{Namespace: b.Namespace, Name: ref.Name}]
		}
		var wl *workload
		if ref := b.Spec.ScalableRef; ref != nil {
			if w, ok := workloads[key(ref.APIGroup+"/"+ref.Kind, b.Namespace, ref.Name)]; ok {
				wl = &w
			}
		}
		out = append(out, resolveBuffer(b, tmpl, wl))
	}
	slices.SortFunc(out, func(a, b *Buffer) int {
		return strings.Compare(a.Buffer.Namespace+"/"+a.Buffer.Name, b.Buffer.Namespace+"/"+b.Buffer.Name)
	})
	return out
}

// workload is what a buffer reads of the workload its scalableRef names.
type workload struct {
	template *corev1.PodTemplateSpec
	replicas int32
}

// resolveBuffer turns a buffer into its placeholder pods, given the PodTemplate
// its podTemplateRef names or the workload its scalableRef names (nil when not
// found). Whatever Tailor cannot honour fully it refuses, saying why, rather than
// keep some other room than the buffer asks for.
func resolveBuffer(b *cb.CapacityBuffer, tmpl *corev1.PodTemplate, wl *workload) *Buffer {
	out := &Buffer{Buffer: b}
	refuse := func(reason, format string, args ...any) *Buffer {
		out.Refused, out.Message = reason, fmt.Sprintf(format, args...)
		return out
	}
	spec := b.Spec
	if s := spec.ProvisioningStrategy; s != nil && *s != cb.ActiveCapacityStrategy {
		return refuse(BufferUnsupportedStrategy, "provisioning strategy %q is not supported: Tailor keeps only %q", *s, cb.ActiveCapacityStrategy)
	}
	var shape *corev1.PodTemplateSpec
	current := int32(0)
	switch {
	case spec.PodTemplateRef != nil && spec.ScalableRef != nil:
		return refuse(BufferInvalidSpec, "set either podTemplateRef or scalableRef, not both")
	case spec.PodTemplateRef != nil:
		if spec.Percentage != nil {
			return refuse(BufferInvalidSpec, "percentage applies only to a scalableRef, and this buffer has a podTemplateRef")
		}
		if tmpl == nil {
			return refuse(BufferPodTemplateNotFound, "PodTemplate %s/%s not found", b.Namespace, spec.PodTemplateRef.Name)
		}
		shape = &tmpl.Template
		out.PodTemplate = &cb.LocalObjectRef{Name: tmpl.Name}
		gen := tmpl.Generation
		out.TemplateGeneration = &gen
	case spec.ScalableRef != nil:
		ref := spec.ScalableRef
		kind := ref.APIGroup + "/" + ref.Kind
		if !slices.Contains(ScalableKinds, kind) {
			return refuse(BufferUnsupportedScalableRef, "scalableRef %s %s: Tailor reads the pods of %s only", groupKind(ref), ref.Name, strings.Join(ScalableKinds, ", "))
		}
		if wl == nil {
			return refuse(BufferScalableRefNotFound, "%s %s/%s not found", groupKind(ref), b.Namespace, ref.Name)
		}
		shape, current = wl.template, wl.replicas
	default:
		return refuse(BufferNoShape, "neither podTemplateRef nor scalableRef is set: the buffer has no pod shape")
	}
	pod := PlaceholderPod(b, shape, 0)
	byLimits, limited := int64(-1), spec.Limits != nil
	if limited {
		var ok bool
		if byLimits, ok = chunksWithin(*spec.Limits, scheduling.PodRequests(pod)); !ok {
			if spec.Replicas == nil && spec.Percentage == nil {
				return refuse(BufferInvalidSpec, "limits name no resource the pod requests, and neither replicas nor percentage is set: the buffer has no size")
			}
			limited = false
		}
	}
	var want int64
	switch {
	case spec.Replicas != nil || spec.Percentage != nil:
		if spec.Replicas != nil {
			want = int64(*spec.Replicas)
		}
		if spec.Percentage != nil {
			want = max(want, (int64(*spec.Percentage)*int64(current)+99)/100)
		}
		if limited {
			want = min(want, byLimits)
		}
	case limited:
		want = byLimits
	default:
		return refuse(BufferInvalidSpec, "none of replicas, percentage and limits is set: the buffer has no size")
	}
	want = min(want, math.MaxInt32)
	out.Replicas = int32(want)
	for i := range min(want, MaxBufferPods) {
		out.Pods = append(out.Pods, PlaceholderPod(b, shape, int(i)))
	}
	return out
}

func groupKind(ref *cb.ScalableRef) string {
	if ref.APIGroup == "" {
		return ref.Kind
	}
	return ref.Kind + "." + ref.APIGroup
}

// chunksWithin is how many pods of requests fit within limits, by every resource
// the limits name that the pod requests; false when the pod requests none of them.
func chunksWithin(limits cb.ResourceList, requests corev1.ResourceList) (int64, bool) {
	n, bounded := int64(math.MaxInt64), false
	for name, limit := range limits {
		req, ok := requests[corev1.ResourceName(name)]
		if !ok || req.Sign() <= 0 {
			continue
		}
		bounded = true
		n = min(n, limit.MilliValue()/req.MilliValue())
	}
	return n, bounded
}

// PlaceholderPod is the i-th placeholder pod of buffer b, of the shape tmpl: its
// labels (for affinity and spread) and spec, unbound, pending, in b's namespace,
// annotated v1alpha1.CapacityBufferPodAnnotationKey and nothing else.
func PlaceholderPod(b *cb.CapacityBuffer, tmpl *corev1.PodTemplateSpec, i int) *corev1.Pod {
	p := &corev1.Pod{Spec: *tmpl.Spec.DeepCopy(), Status: corev1.PodStatus{Phase: corev1.PodPending}}
	p.Spec.NodeName = ""
	p.Namespace = b.Namespace
	p.Name = fmt.Sprintf("%s%s-%d", bufferPrefix, b.Name, i)
	p.UID = types.UID(fmt.Sprintf("%s%s/%d", bufferUIDPrefix, b.UID, i))
	p.Labels = tmpl.Labels
	p.Annotations = map[string]string{v1alpha1.CapacityBufferPodAnnotationKey: b.Namespace + "/" + b.Name}
	return p
}

// BufferPods are the placeholder pods of every buffer, in order.
func BufferPods(buffers []*Buffer) []*corev1.Pod {
	var out []*corev1.Pod
	for _, b := range buffers {
		out = append(out, b.Pods...)
	}
	return out
}
