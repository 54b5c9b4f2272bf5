package metrics

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/types"
)

func decisionCount(t *testing.T) (uint64, float64) {
	t.Helper()
	m := &dto.Metric{}
	if err := PodSchedulingDecisionDuration.Write(m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}

// The first decision on an acked pod is timed from its ack; later decisions and
// acks change neither the ack nor the first schedulable time, and a decision of
// no room clears the schedulable time until room is found again.
func TestPodTimes(t *testing.T) {
	p := NewPodTimes()
	pod := types.NamespacedName{Namespace: "shop", Name: "web"}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n0, s0 := decisionCount(t)
	p.Ack(pod, at)
	p.Ack(pod, at.Add(time.Second))
	if got := p.Undecided(); len(got) != 1 || !got[pod].Equal(at) {
		t.Errorf("undecided = %v, want the pod acked at %v", got, at)
	}
	p.Decide(pod, false, at.Add(3*time.Second))
	if n, s := decisionCount(t); n-n0 != 1 || s-s0 != 3 {
		t.Errorf("decision durations: %d observed summing %v, want 1 of 3 s", n-n0, s-s0)
	}
	if got := p.Get(pod); !got.Acked.Equal(at) || !got.Decided.Equal(at.Add(3*time.Second)) || !got.Schedulable.IsZero() {
		t.Errorf("after no room: %+v", got)
	}
	if len(p.Undecided()) != 0 {
		t.Error("a decided pod is still undecided")
	}
	p.Decide(pod, true, at.Add(5*time.Second))
	p.Decide(pod, true, at.Add(9*time.Second))
	if got := p.Get(pod); !got.Schedulable.Equal(at.Add(5 * time.Second)) {
		t.Errorf("schedulable at %v, want the first time room was found", got.Schedulable)
	}
	if n, _ := decisionCount(t); n-n0 != 1 {
		t.Errorf("%d decisions observed, want only the first", n-n0)
	}
	p.Forget(pod)
	if got := p.Get(pod); got != (PodTime{}) {
		t.Errorf("forgotten pod still has %+v", got)
	}
	// A pod decided on without an ack (seen by no trigger) is not timed.
	p.Decide(types.NamespacedName{Namespace: "shop", Name: "other"}, true, at)
	if n, _ := decisionCount(t); n-n0 != 1 {
		t.Error("a decision on a pod never acked was timed")
	}
	var none *PodTimes
	none.Ack(pod, at)
	none.Decide(pod, true, at)
	if none.Get(pod) != (PodTime{}) || len(none.Undecided()) != 0 {
		t.Error("a nil PodTimes records")
	}
}
