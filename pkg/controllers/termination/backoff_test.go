package termination

import (
	"testing"
	"time"
)

func TestEvictionBackoffDoublesUpToTheLimit(t *testing.T) {
	b := newEvictionBackoff()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if !b.due("web", now) {
		t.Fatal("a pod never refused is not due")
	}
	var delays []time.Duration
	for range 6 {
		next := b.refused("web", now)
		delays = append(delays, next.Sub(now))
		if b.due("web", next.Add(-time.Millisecond)) {
			t.Fatalf("due before its retry time %s", next)
		}
		if !b.due("web", next) {
			t.Fatalf("not due at its retry time %s", next)
		}
		now = next
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i := range want {
		if delays[i] != want[i] {
			t.Fatalf("delays %v, want %v", delays, want)
		}
	}
	if !b.due("other", now) {
		t.Error("one pod's refusals hold back another")
	}
	b.forget("web")
	if next := b.refused("web", now); next.Sub(now) != time.Second {
		t.Errorf("after forget the delay is %s, want the base again", next.Sub(now))
	}
}
