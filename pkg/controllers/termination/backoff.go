package termination

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Eviction retries of a pod whose eviction was refused (its PodDisruptionBudget
// allows no disruption now) start at evictionBaseDelay and double up to
// evictionMaxDelay, so a drain held by a PDB does not ask the API server, and
// record an event, every pass.
const (
	evictionBaseDelay = time.Second
	evictionMaxDelay  = 10 * time.Second
)

// evictionBackoff remembers, per pod, when its eviction may be asked for again.
type evictionBackoff struct {
	mu   sync.Mutex
	pods map[types.UID]retry
}

type retry struct {
	refusals int
	next     time.Time
}

func newEvictionBackoff() *evictionBackoff {
	return &evictionBackoff{pods: map[types.UID]retry{}}
}

// due reports whether the pod's eviction may be asked for at now.
func (b *evictionBackoff) due(uid types.UID, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.pods[uid]
	return !ok || !now.Before(r.next)
}

// refused records a refusal at now and returns when to ask again.
func (b *evictionBackoff) refused(uid types.UID, now time.Time) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.pods[uid]
	delay := min(evictionBaseDelay<<min(r.refusals, 10), evictionMaxDelay)
	r.refusals++
	r.next = now.Add(delay)
	b.pods[uid] = r
	// Forget pods not asked about for a while: they were deleted some other way.
	for id, old := range b.pods {
		if now.Sub(old.next) > 10*evictionMaxDelay {
			delete(b.pods, id)
		}
	}
	return r.next
}

// forget drops the pod: it was evicted, or is gone.
func (b *evictionBackoff) forget(uid types.UID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.pods, uid)
}
