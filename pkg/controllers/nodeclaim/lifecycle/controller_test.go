package lifecycle

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// A node's heartbeats reconcile its claim again and again; only a change of the
// initialization conditions may cause a write.
func TestSetInitializedReportsOnlyNews(t *testing.T) {
	c := &Controller{clock: clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	nc := &v1.NodeClaim{}
	steps := []struct {
		why  string
		news bool
	}{
		{"node is not ready", true},
		{"node is not ready", false},
		{"startup taint example.com/init is still there", true},
		{"", true},
		{"", false},
	}
	for i, s := range steps {
		if got := c.setInitialized(nc, s.why); got != s.news {
			t.Errorf("step %d (%q): news = %v, want %v", i, s.why, got, s.news)
		}
	}
	if !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeReady) {
		t.Errorf("want Initialized and Ready, got %+v", nc.Status.Conditions)
	}
}

func TestNotInitialized(t *testing.T) {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue}
	startup := corev1.Taint{Key: "example.com/init", Effect: corev1.TaintEffectNoSchedule}
	nc := &v1.NodeClaim{Spec: v1.NodeClaimSpec{StartupTaints: []corev1.Taint{startup}}}
	tests := []struct {
		name string
		node corev1.Node
		want string
	}{
		{"not ready", corev1.Node{}, "node is not ready"},
		{"startup taint", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{startup}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, "startup taint example.com/init is still there"},
		{"initialized", corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, ""},
	}
	for _, tt := range tests {
		if got := notInitialized(nc, &tt.node); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}
