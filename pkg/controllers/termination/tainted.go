package termination

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// taintedNodes remembers, per node, when this process first saw the disrupted taint
// on it: the drain's settle time counts from there. Kept in memory: after a restart
// the clock starts again, which only makes the wait longer.
type taintedNodes struct {
	mu    sync.Mutex
	nodes map[types.UID]sighting
}

type sighting struct {
	first, last time.Time
	// drained: the node's drain was seen to finish (counted once).
	drained bool
}

// taintedForget is how long a node not looked at stays remembered: long past any
// drain pass interval, so only nodes that went some other way are dropped.
const taintedForget = 10 * time.Minute

func newTaintedNodes() *taintedNodes {
	return &taintedNodes{nodes: map[types.UID]sighting{}}
}

// seen records that the node carries the taint at now and returns when it was
// first seen with it.
func (t *taintedNodes) seen(uid types.UID, now time.Time) time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.touch(uid, now)
	for id, old := range t.nodes {
		if now.Sub(old.last) > taintedForget {
			delete(t.nodes, id)
		}
	}
	return s.first
}

// drained records that the node's drain finished at now and reports whether it
// is the first time: later passes (waiting for volumes, or for the instance to go)
// find it drained again.
func (t *taintedNodes) drained(uid types.UID, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.touch(uid, now)
	first := !s.drained
	s.drained = true
	t.nodes[uid] = s
	return first
}

// touch records the node as looked at now (first seen now if new) and returns
// its sighting; t.mu is held.
func (t *taintedNodes) touch(uid types.UID, now time.Time) sighting {
	s, ok := t.nodes[uid]
	if !ok {
		s.first = now
	}
	s.last = now
	t.nodes[uid] = s
	return s
}

// forget drops the node: it is terminated.
func (t *taintedNodes) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.nodes, uid)
}
