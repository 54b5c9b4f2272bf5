package nodeclaim

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Writes remembers the resourceVersion of a controller's last write to each object
// until its informer has delivered that version. A controller that reconciles from
// the cache would otherwise act on a copy older than its own last write; under load
// the cache lags by seconds, and every such write only comes back as a conflict,
// which costs the API server as much as the write would have.
type Writes struct {
	clock clock.Clock
	// Expiry bounds the wait: an informer event can be missed (a relist jumps past
	// it), and then the copy is assumed fresh after this long.
	expiry  time.Duration
	mu      sync.Mutex
	pending map[string]written
}

type written struct {
	version string
	at      time.Time
}

// NewWrites returns an empty tracker; a write not seen within expiry is forgotten.
func NewWrites(clk clock.Clock, expiry time.Duration) *Writes {
	return &Writes{clock: clk, expiry: expiry, pending: map[string]written{}}
}

// Wrote records that the controller wrote object name, which is now at version.
func (w *Writes) Wrote(name, version string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pending[name] = written{version: version, at: w.clock.Now()}
}

// Observed is called by the informer for each version of an object it delivers.
func (w *Writes) Observed(name, version string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p, ok := w.pending[name]; ok && p.version == version {
		delete(w.pending, name)
	}
}

// Forget drops what is known of name (it was deleted).
func (w *Writes) Forget(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.pending, name)
}

// Stale reports whether a cached copy at version predates the controller's last
// write to name: the write is recent and the informer has not delivered it yet.
func (w *Writes) Stale(name, version string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.pending[name]
	if !ok {
		return false
	}
	if p.version == version || w.clock.Since(p.at) > w.expiry {
		delete(w.pending, name)
		return false
	}
	return true
}
