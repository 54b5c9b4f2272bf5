package events

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/nodetailor/tailor/internal/testobj"
)

func pod(i int) *corev1.Pod { return testobj.Pod(fmt.Sprint("p", i), "", "") }

// Events pass on in order; those beyond the backlog are dropped, not blocked on.
func TestPacedPassesEventsInOrderAndDropsBeyondTheBacklog(t *testing.T) {
	inner := record.NewFakeRecorder(100)
	p := NewPaced(inner, 1000, 10, 5)
	for i := range 8 {
		p.Eventf(pod(i), corev1.EventTypeNormal, "Nominated", "Pod should schedule on: nodeclaim/c%d", i)
	}
	if got := p.pending(); got != 5 {
		t.Fatalf("%d events wait, want the backlog of 5", got)
	}
	go func() { _ = p.Run(t.Context()) }()
	for i := range 5 {
		select {
		case e := <-inner.Events:
			if want := fmt.Sprintf("Normal Nominated Pod should schedule on: nodeclaim/c%d", i); e != want {
				t.Errorf("event %d: %q, want %q", i, e, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d never came", i)
		}
	}
	select {
	case e := <-inner.Events:
		t.Errorf("an event beyond the backlog came: %q", e)
	case <-time.After(100 * time.Millisecond):
	}
}

// At one event a second after a burst of two, five events leave three waiting.
func TestPacedHoldsEventsBeyondTheRate(t *testing.T) {
	inner := record.NewFakeRecorder(100)
	p := NewPaced(inner, 1, 2, 100)
	go func() { _ = p.Run(t.Context()) }()
	for i := range 5 {
		p.Event(pod(i), corev1.EventTypeNormal, "Nominated", "x")
	}
	for range 2 {
		select {
		case <-inner.Events:
		case <-time.After(10 * time.Second):
			t.Fatal("the burst did not pass")
		}
	}
	if got := p.pending(); got < 2 {
		t.Errorf("%d events wait beyond the burst, want at least 2 (one a second)", got)
	}
}

// An event carries the object as it was when recorded, though the caller changes it
// before the event goes out.
func TestPacedKeepsTheObjectAsRecorded(t *testing.T) {
	var got []string
	inner := recorderFunc(func(obj runtime.Object, reason string) {
		got = append(got, reason+" "+obj.(*corev1.Pod).Spec.NodeName)
	})
	p := NewPaced(inner, 1000, 10, 10)
	pd := pod(0)
	pd.Spec.NodeName = "before"
	p.Event(pd, corev1.EventTypeNormal, "Bound", "x")
	pd.Spec.NodeName = "after"
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for p.pending() > 0 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(10 * time.Millisecond)
		cancel()
	}()
	_ = p.Run(ctx)
	if len(got) != 1 || got[0] != "Bound before" {
		t.Errorf("events %q, want the pod as it was: Bound before", got)
	}
}

// recorderFunc hands each event's object and reason to a function.
type recorderFunc func(obj runtime.Object, reason string)

func (f recorderFunc) Event(obj runtime.Object, _, reason, _ string) { f(obj, reason) }
func (f recorderFunc) Eventf(obj runtime.Object, _, reason, _ string, _ ...any) {
	f(obj, reason)
}
func (f recorderFunc) AnnotatedEventf(obj runtime.Object, _ map[string]string, _, reason, _ string, _ ...any) {
	f(obj, reason)
}
