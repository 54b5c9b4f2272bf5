package disruption

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// The events a do-not-disrupt duration calls for are Karpenter's, each said once.
func TestDoNotDisruptEvents(t *testing.T) {
	start := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	annotated := func(name, value string, started bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name),
			Annotations: map[string]string{v1.DoNotDisruptAnnotationKey: value}}}
		if started {
			p.Status.StartTime = &metav1.Time{Time: start}
		}
		return p
	}
	held, bad, forever, waiting := annotated("held", "30m", true), annotated("bad", "soon", true), annotated("forever", "true", true), annotated("waiting", "30m", false)
	managed := &scheduling.Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{v1.NodePoolLabelKey: "default"}}},
		Pods: []*corev1.Pod{held, bad, forever, waiting}}
	unmanaged := &scheduling.Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}, Pods: []*corev1.Pod{annotated("other", "soon", true)}}
	nodes := []*scheduling.Node{managed, unmanaged}
	type ev struct{ Pod, Type, Reason, Message string }
	collect := func(now time.Time, said map[types.UID]string) []ev {
		var out []ev
		for _, e := range doNotDisruptEvents(nodes, now, said) {
			out = append(out, ev{e.pod.Name, e.eventtype, e.reason, e.message})
		}
		return out
	}
	said := map[types.UID]string{}
	want := []ev{
		{"held", "Normal", "DoNotDisruptUntil", "The karpenter.sh/do-not-disrupt grace period will elapse at 2026-11-22T12:30:00Z"},
		{"bad", "Warning", "InvalidDoNotDisruptAnnotation", `Invalid karpenter.sh/do-not-disrupt annotation: "soon" is neither "true" nor a duration, ignoring annotation`},
	}
	if diff := cmp.Diff(want, collect(start.Add(time.Minute), said)); diff != "" {
		t.Errorf("first pass (-want +got):\n%s", diff)
	}
	if got := collect(start.Add(2*time.Minute), said); len(got) != 0 {
		t.Errorf("a second pass repeats %v", got)
	}
	want = []ev{{"held", "Normal", "DoNotDisruptGracePeriodElapsed", "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable"}}
	if diff := cmp.Diff(want, collect(start.Add(30*time.Minute), said)); diff != "" {
		t.Errorf("after 30m (-want +got):\n%s", diff)
	}
	managed.Pods = nil
	collect(start.Add(31*time.Minute), said)
	if len(said) != 0 {
		t.Errorf("pods gone are remembered: %v", said)
	}
}
