package nodeclaim

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/nodetailor/tailor/api/v1"
)

func claim(name, version, providerID string) *v1.NodeClaim {
	return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: version},
		Status: v1.NodeClaimStatus{ProviderID: providerID}}
}

func TestWritesReadsOwnWrites(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	w := NewWrites[*v1.NodeClaim](clk, 2*time.Second)
	stale := claim("a", "4", "")
	if got := w.Fresh(stale); got != stale {
		t.Fatal("a claim never written did not come from the cache")
	}
	w.Wrote(claim("a", "5", "sim:///a"))
	if got := w.Fresh(stale); got.ResourceVersion != "5" || got.Status.ProviderID != "sim:///a" {
		t.Errorf("the copy before the write was used: %+v", got)
	}
	if got := w.Fresh(claim("b", "4", "")); got.ResourceVersion != "4" {
		t.Error("another claim got the write")
	}
	// An older version delivered changes nothing; the written one clears it.
	w.Observed("a", "4")
	if got := w.Fresh(stale); got.ResourceVersion != "5" {
		t.Error("an older version cleared the write")
	}
	w.Observed("a", "5")
	if got := w.Fresh(stale); got != stale {
		t.Error("the write was preferred after the informer delivered it")
	}
	// A copy at the written version is the write (its event raced Wrote).
	w.Wrote(claim("a", "7", "x"))
	if cached := claim("a", "7", "x"); w.Fresh(cached) != cached {
		t.Error("the cached copy at the written version was not used")
	}
	// A write whose event never comes is forgotten after the expiry.
	w.Wrote(claim("a", "9", "x"))
	clk.Step(time.Second)
	if got := w.Fresh(claim("a", "8", "")); got.ResourceVersion != "9" {
		t.Error("the write was not used within the expiry")
	}
	clk.Step(1500 * time.Millisecond)
	if got := w.Fresh(claim("a", "8", "")); got.ResourceVersion != "8" {
		t.Error("the write was still used after the expiry")
	}
	w.Wrote(claim("a", "10", "x"))
	w.Forget("a")
	if got := w.Fresh(claim("a", "8", "")); got.ResourceVersion != "8" {
		t.Error("the write was used after Forget")
	}
	// What Fresh hands out is a copy: changing it leaves the record alone.
	w.Wrote(claim("a", "11", "x"))
	w.Fresh(claim("a", "8", "")).Status.ProviderID = "changed"
	if got := w.Fresh(claim("a", "8", "")); got.Status.ProviderID != "x" {
		t.Error("a caller's change reached the recorded write")
	}
}
