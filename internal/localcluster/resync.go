package localcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ResyncAnnotation records when ResyncKwokPods last touched a pod.
const ResyncAnnotation = "localcluster.tailor.sh/kwok-resync"

// ResyncKwokPods stands in for a kubelet's periodic pod sync, which kwok lacks.
// kwok ignores a pod bound to a node in the moment between creating the node's
// Lease and seeing that Lease in its cache (it takes the node for another
// holder's), and it lists the node's pods only once, just before; such a pod —
// typically a DaemonSet pod, bound as its node registers — stays Pending for
// good. Every KwokResyncInterval, a pod bound to a kwok node and still Pending
// that long after its binding (or its last touch) gets an annotation, an update
// kwok does act on. It returns when ctx ends; an API error waits for the next
// round.
func ResyncKwokPods(ctx context.Context, cfg *rest.Config) error {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ticker := time.NewTicker(KwokResyncInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		_ = resyncOnce(ctx, kube, KwokResyncInterval)
	}
}

func resyncOnce(ctx context.Context, kube kubernetes.Interface, after time.Duration) error {
	pods, err := kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector:   "status.phase=Pending,spec.nodeName!=",
		ResourceVersion: "0", // the watch cache: this runs often and may lag a little
	})
	if err != nil || len(pods.Items) == 0 {
		return err
	}
	kwokNodes := map[string]bool{}
	for _, p := range pods.Items {
		name := p.Spec.NodeName
		if _, seen := kwokNodes[name]; seen {
			continue
		}
		node, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
		kwokNodes[name] = err == nil && node.Annotations[KwokNodeAnnotation] == "fake"
	}
	now := time.Now()
	for _, p := range stalledOnKwok(pods.Items, kwokNodes, now, after) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, ResyncAnnotation, now.UTC().Format(time.RFC3339))
		if _, err := kube.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// stalledOnKwok picks the pods bound to a kwok node that kwok has not started
// `after` their binding or their last touch. A pod created with its node already
// named has no PodScheduled condition; its creation is its binding.
func stalledOnKwok(pods []corev1.Pod, kwokNodes map[string]bool, now time.Time, after time.Duration) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		if !kwokNodes[p.Spec.NodeName] || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodPending {
			continue
		}
		if ready := podCondition(p, corev1.PodReady); ready != nil && ready.Status == corev1.ConditionTrue {
			continue
		}
		since := p.CreationTimestamp.Time
		if scheduled := podCondition(p, corev1.PodScheduled); scheduled != nil && scheduled.LastTransitionTime.After(since) {
			since = scheduled.LastTransitionTime.Time
		}
		if touched, err := time.Parse(time.RFC3339, p.Annotations[ResyncAnnotation]); err == nil && touched.After(since) {
			since = touched
		}
		if now.Sub(since) >= after {
			out = append(out, p)
		}
	}
	return out
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
