package nodeclaim

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Writes lets a controller read its own writes. It keeps the object each write
// returned until the informer delivers that version. A controller that reads from
// the cache would otherwise act on a copy older than its own last write: under load
// the cache lags by seconds, and a write from the older copy only comes back as a
// conflict, while waiting for the cache holds every next step back by the lag.
type Writes[T client.Object] struct {
	clock clock.Clock
	// expiry bounds how long a write is preferred to the cache: an informer event
	// can be missed (a relist jumps past it).
	expiry  time.Duration
	mu      sync.Mutex
	pending map[string]written[T]
}

type written[T client.Object] struct {
	obj T
	at  time.Time
}

// NewWrites returns an empty tracker; a write not seen within expiry is forgotten.
func NewWrites[T client.Object](clk clock.Clock, expiry time.Duration) *Writes[T] {
	return &Writes[T]{clock: clk, expiry: expiry, pending: map[string]written[T]{}}
}

// Wrote records obj as the controller's last write, as the API server returned it.
func (w *Writes[T]) Wrote(obj T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending[obj.GetName()] = written[T]{obj: obj.DeepCopyObject().(T), at: w.clock.Now()}
}

// Observed is called by the informer for each version of an object it delivers.
func (w *Writes[T]) Observed(name, version string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.pending[name]; ok && p.obj.GetResourceVersion() == version {
		delete(w.pending, name)
	}
}

// Forget drops what is known of name (it was deleted).
func (w *Writes[T]) Forget(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pending, name)
}

// Fresh returns cached, or a copy of the controller's last write to the object when
// the cache has not delivered that write yet.
func (w *Writes[T]) Fresh(cached T) T {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.pending[cached.GetName()]
	if !ok {
		return cached
	}
	if p.obj.GetResourceVersion() == cached.GetResourceVersion() || w.clock.Since(p.at) > w.expiry {
		delete(w.pending, cached.GetName())
		return cached
	}
	return p.obj.DeepCopyObject().(T)
}

// Find returns the name of an object whose last write, not yet delivered by the
// informer, matches; "" when none does.
func (w *Writes[T]) Find(match func(T) bool) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, p := range w.pending {
		if w.clock.Since(p.at) <= w.expiry && match(p.obj) {
			return name
		}
	}
	return ""
}
