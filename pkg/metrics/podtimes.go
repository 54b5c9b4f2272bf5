package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// PodSchedulingDecisionDuration is karpenter_pods_scheduling_decision_duration_seconds:
// from the provisioner's first sight of a pending pod to its first decision on it.
var PodSchedulingDecisionDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "karpenter_pods_scheduling_decision_duration_seconds",
	Help:    "The time it takes for the provisioner to first try to schedule a pod after it's been seen.",
	Buckets: DurationBuckets(),
})

// PodTimes remembers, for each pending pod, when the provisioner first saw it
// (acked), first decided on it (planned it somewhere or found it no room) and first
// found it room (schedulable): the provisioner writes them, the pod metrics read
// them, as Karpenter's provisioning_* pod families do. Times live in memory, so a
// restart or a new leader starts again from the pods' next sighting.
type PodTimes struct {
	mu    sync.Mutex
	times map[types.NamespacedName]*PodTime
}

// PodTime is what PodTimes holds of one pod; a zero time is not yet.
type PodTime struct {
	Acked, Decided, Schedulable time.Time
}

// NewPodTimes returns an empty PodTimes.
func NewPodTimes() *PodTimes {
	return &PodTimes{times: map[types.NamespacedName]*PodTime{}}
}

// Ack records that the provisioner saw the pending pod at now, unless it had already.
// A nil PodTimes records nothing (so do the other methods).
func (p *PodTimes) Ack(pod types.NamespacedName, now time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.entry(pod); t.Acked.IsZero() {
		t.Acked = now
	}
}

// Decide records the provisioner's decision on the pod at now: room found
// (schedulable) or not. Room not found clears an earlier schedulable time, as
// Karpenter's does. The first decision on a pod it acked observes
// karpenter_pods_scheduling_decision_duration_seconds.
func (p *PodTimes) Decide(pod types.NamespacedName, schedulable bool, now time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.entry(pod)
	if t.Decided.IsZero() {
		t.Decided = now
		if !t.Acked.IsZero() {
			PodSchedulingDecisionDuration.Observe(now.Sub(t.Acked).Seconds())
		}
	}
	switch {
	case !schedulable:
		t.Schedulable = time.Time{}
	case t.Schedulable.IsZero():
		t.Schedulable = now
	}
}

// Get returns what is recorded of the pod.
func (p *PodTimes) Get(pod types.NamespacedName) PodTime {
	if p == nil {
		return PodTime{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.times[pod]; ok {
		return *t
	}
	return PodTime{}
}

// Forget drops the pod: it started, finished or is gone.
func (p *PodTimes) Forget(pod types.NamespacedName) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.times, pod)
}

// Undecided returns the pods acked and not yet decided on, with when they were acked.
func (p *PodTimes) Undecided() map[types.NamespacedName]time.Time {
	out := map[types.NamespacedName]time.Time{}
	if p == nil {
		return out
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for pod, t := range p.times {
		if !t.Acked.IsZero() && t.Decided.IsZero() {
			out[pod] = t.Acked
		}
	}
	return out
}

func (p *PodTimes) entry(pod types.NamespacedName) *PodTime {
	t, ok := p.times[pod]
	if !ok {
		t = &PodTime{}
		p.times[pod] = t
	}
	return t
}
