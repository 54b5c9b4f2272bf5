package nodeclaim

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestWrites(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	w := NewWrites(clk, 2*time.Second)
	if w.Stale("a", "1") {
		t.Fatal("a claim never written is stale")
	}
	w.Wrote("a", "5")
	if !w.Stale("a", "4") {
		t.Error("the copy before the write is not stale")
	}
	if w.Stale("b", "4") {
		t.Error("another claim is stale")
	}
	// The informer delivers version 5: the cache has the write.
	w.Observed("a", "4")
	if !w.Stale("a", "4") {
		t.Error("an older version cleared the write")
	}
	w.Observed("a", "5")
	if w.Stale("a", "4") {
		t.Error("still stale after the informer delivered the write")
	}
	// A copy at the written version clears it too (the event raced the Wrote).
	w.Wrote("a", "7")
	if w.Stale("a", "7") || w.Stale("a", "6") {
		t.Error("the copy at the written version is stale")
	}
	// A write whose event never comes is forgotten after the expiry.
	w.Wrote("a", "9")
	clk.Step(time.Second)
	if !w.Stale("a", "8") {
		t.Error("not stale within the expiry")
	}
	clk.Step(1500 * time.Millisecond)
	if w.Stale("a", "8") {
		t.Error("still stale after the expiry")
	}
	w.Wrote("a", "10")
	w.Forget("a")
	if w.Stale("a", "8") {
		t.Error("stale after Forget")
	}
}
