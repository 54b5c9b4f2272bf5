package events

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// Throttled is a record.EventRecorder that passes on at most one event per object
// and reason each window, and drops the rest. A state that holds for a while (a
// NodePool at its limit while pods wait, looked at every second) is then said once
// a window, not on every look, and `kubectl describe` keeps its age current.
type Throttled struct {
	inner  record.EventRecorder
	clock  clock.PassiveClock
	window time.Duration

	mu     sync.Mutex
	last   map[throttleKey]time.Time
	pruned time.Time
}

var _ record.EventRecorder = &Throttled{}

type throttleKey struct {
	object string // UID, or kind/namespace/name for an object without one
	reason string
}

// NewThrottled returns a recorder passing to inner one event per object and
// reason each window.
func NewThrottled(inner record.EventRecorder, clk clock.PassiveClock, window time.Duration) *Throttled {
	return &Throttled{inner: inner, clock: clk, window: window, last: map[throttleKey]time.Time{}}
}

// Event records an event unless one of the reason went out for the object within
// the window.
func (t *Throttled) Event(obj runtime.Object, eventtype, reason, message string) {
	if t.allow(obj, reason) {
		t.inner.Event(obj, eventtype, reason, message)
	}
}

// Eventf records an event with a formatted message, as Event.
func (t *Throttled) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if t.allow(obj, reason) {
		t.inner.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
	}
}

// AnnotatedEventf records an event with annotations and a formatted message, as Event.
func (t *Throttled) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if t.allow(obj, reason) {
		t.inner.AnnotatedEventf(obj, annotations, eventtype, reason, "%s", fmt.Sprintf(messageFmt, args...))
	}
}

// allow reports whether an event of the reason may go out for obj now, and if so
// counts it.
func (t *Throttled) allow(obj runtime.Object, reason string) bool {
	key := throttleKey{object: objectKey(obj), reason: reason}
	now := t.clock.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	// Forget what the window has passed for, so objects long gone are not kept.
	if now.Sub(t.pruned) >= t.window {
		for k, at := range t.last {
			if now.Sub(at) >= t.window {
				delete(t.last, k)
			}
		}
		t.pruned = now
	}
	if at, ok := t.last[key]; ok && now.Sub(at) < t.window {
		return false
	}
	t.last[key] = now
	return true
}

func objectKey(obj runtime.Object) string {
	kind := obj.GetObjectKind().GroupVersionKind().Kind
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	if uid := m.GetUID(); uid != "" {
		return string(uid)
	}
	return fmt.Sprintf("%T %s/%s/%s", obj, kind, m.GetNamespace(), m.GetName())
}
