package termination

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

func pod(name string, mutate func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	if mutate != nil {
		mutate(&p)
	}
	return p
}

func names(ps []*corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func TestPlanDrain(t *testing.T) {
	daemon := pod("agent", func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent"}} })
	critical := pod("dns", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" })
	mirror := pod("static", func(p *corev1.Pod) { p.Annotations[corev1.MirrorPodAnnotationKey] = "x" })
	done := pod("job", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
	web := pod("web", nil)
	held := pod("batch", func(p *corev1.Pod) { p.Annotations[v1.DoNotDisruptAnnotationKey] = "true" })

	d := PlanDrain([]corev1.Pod{daemon, critical, mirror, done, web}, false)
	if got := names(d.Evict); len(got) != 1 || got[0] != "web" || d.Done {
		t.Errorf("first pass evicts %v (done %v), want only web", got, d.Done)
	}
	d = PlanDrain([]corev1.Pod{daemon, critical, mirror, done}, false)
	if got := names(d.Evict); len(got) != 2 || d.Done {
		t.Errorf("second pass evicts %v, want the DaemonSet and critical pods", got)
	}
	d = PlanDrain([]corev1.Pod{mirror, done}, false)
	if !d.Done || len(d.Evict) != 0 {
		t.Errorf("only mirror and finished pods left: %+v, want done", d)
	}
	d = PlanDrain([]corev1.Pod{held, daemon}, false)
	if len(d.Evict) != 0 || len(d.Waiting) != 1 || d.Done || d.Why != v1.DoNotDisruptAnnotationKey {
		t.Errorf("do-not-disrupt: %+v, want it waited on and the DaemonSet kept until then", d)
	}
	d = PlanDrain([]corev1.Pod{held, web}, true)
	if len(d.Delete) != 2 || d.Done {
		t.Errorf("grace period up: %+v, want every pod deleted", d)
	}
	terminating := pod("leaving", func(p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now })
	if d := PlanDrain([]corev1.Pod{terminating}, false); d.Done || len(d.Waiting) != 1 {
		t.Errorf("a terminating pod: %+v, want the drain to wait for it", d)
	}
}
