package events

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/nodetailor/tailor/api/v1"
)

func drain(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

// One event per object and reason each window: others of the same pass, the same
// again once the window has gone by.
func TestThrottledOncePerObjectAndReasonEachWindow(t *testing.T) {
	inner := record.NewFakeRecorder(100)
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	th := NewThrottled(inner, clk, time.Minute)
	pool := func(name string) *v1.NodePool {
		return &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	}
	a, b := pool("a"), pool("b")
	th.Eventf(a, corev1.EventTypeWarning, "LimitReached", "limit cpu=%d reached", 10)
	th.Eventf(a, corev1.EventTypeWarning, "LimitReached", "limit cpu=%d reached", 12) // within the window
	th.Event(a, corev1.EventTypeWarning, "NotReady", "not Ready")                     // another reason
	th.Event(b, corev1.EventTypeWarning, "LimitReached", "limit nodes=2 reached")     // another object
	clk.Step(59 * time.Second)
	th.Event(a, corev1.EventTypeWarning, "LimitReached", "still")
	want := []string{"Warning LimitReached limit cpu=10 reached", "Warning NotReady not Ready", "Warning LimitReached limit nodes=2 reached"}
	if got := drain(inner); !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
	clk.Step(time.Second)
	th.Event(a, corev1.EventTypeWarning, "LimitReached", "a window later")
	if got := drain(inner); !slices.Equal(got, []string{"Warning LimitReached a window later"}) {
		t.Errorf("a window later: %q", got)
	}
	// What the window has passed for is forgotten.
	clk.Step(2 * time.Minute)
	th.Event(b, corev1.EventTypeNormal, "Other", "x")
	th.mu.Lock()
	kept := len(th.last)
	th.mu.Unlock()
	if kept != 1 {
		t.Errorf("%d objects and reasons remembered, want only the last", kept)
	}
}
