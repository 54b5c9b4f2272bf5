// Package events paces the Kubernetes Events a controller records about many
// objects at once (Paced), and thins out those it would record about one object
// again and again while a state lasts (Throttled).
//
// client-go's broadcaster holds at most 1,000 events on their way to the API
// server and drops the rest, with an error line each. A batch of a thousand
// pending pods gets a Nominated event per pod at once: without pacing, most were
// dropped, and the thousand writes landed on the API server in the very seconds the
// new nodes' launches and registrations needed it.
package events

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Paced is a record.EventRecorder that hands events to another one at a steady
// rate, in order, keeping up to a backlog of them; beyond it, events are dropped
// and counted.
type Paced struct {
	inner   record.EventRecorder
	limiter *rate.Limiter
	backlog int

	mu      sync.Mutex
	queue   []func()
	dropped int
	wake    chan struct{}
}

var _ record.EventRecorder = &Paced{}

// NewPaced returns a recorder passing events to inner at perSecond (burst at
// once), with room for backlog events waiting; Run does the passing.
func NewPaced(inner record.EventRecorder, perSecond float64, burst, backlog int) *Paced {
	return &Paced{inner: inner, limiter: rate.NewLimiter(rate.Limit(perSecond), burst), backlog: backlog,
		wake: make(chan struct{}, 1)}
}

// Event records an event. The object is copied as it is now: the caller may go on
// changing it (a NodeClaim's status) before the event goes out.
func (p *Paced) Event(obj runtime.Object, eventtype, reason, message string) {
	obj = obj.DeepCopyObject()
	p.add(func() { p.inner.Event(obj, eventtype, reason, message) })
}

// Eventf records an event with a formatted message.
func (p *Paced) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	p.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// AnnotatedEventf records an event with annotations and a formatted message.
func (p *Paced) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	message := fmt.Sprintf(messageFmt, args...)
	obj = obj.DeepCopyObject()
	p.add(func() { p.inner.AnnotatedEventf(obj, annotations, eventtype, reason, "%s", message) })
}

func (p *Paced) add(emit func()) {
	p.mu.Lock()
	if len(p.queue) >= p.backlog {
		p.dropped++
	} else {
		p.queue = append(p.queue, emit)
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Run passes the waiting events on until ctx ends; it logs how many were dropped,
// once per backlog drained.
func (p *Paced) Run(ctx context.Context) error {
	for {
		p.mu.Lock()
		if len(p.queue) == 0 {
			if p.dropped > 0 {
				log.FromContext(ctx).Info("dropped events beyond the backlog", "dropped", p.dropped, "backlog", p.backlog)
				p.dropped = 0
			}
			p.mu.Unlock()
			select {
			case <-ctx.Done():
				return nil
			case <-p.wake:
			}
			continue
		}
		emit := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		p.mu.Unlock()
		if err := p.limiter.Wait(ctx); err != nil {
			return nil
		}
		emit()
	}
}

// pending is how many events wait to be passed on.
func (p *Paced) pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}
