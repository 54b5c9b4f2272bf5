package nodeclaim

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// batch starts a batch of the order with claims of these names and sizes.
func batch(o *ReleaseOrder, names []string, sizes []float64) {
	b := o.Batch(sizes)
	for i, name := range names {
		b.Add(i, name)
	}
}

func TestReleaseOrder(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	o := NewReleaseOrder(clk)
	small, amd64Small, medium, large := NodeSize(2000, 4<<30), NodeSize(2000, 3900<<20), NodeSize(1000, 16<<30), NodeSize(4000, 32<<30)
	if !(small < medium && medium < large) {
		t.Fatalf("sizes %v %v %v, want a memory-optimised node of one core above two general-purpose ones", small, medium, large)
	}
	batch(o, []string{"s1", "s2", "m", "l"}, []float64{small, amd64Small, medium, large})
	batch(o, []string{"same-1", "same-2"}, []float64{small, amd64Small})

	settled := map[string]bool{}
	observe := func(gone ...string) {
		o.Observe(func(n string) bool { return !slices.Contains(gone, n) }, func(n string) bool { return settled[n] }, func(string) bool { return false })
	}
	for _, name := range []string{"same-1", "same-2", "unknown"} {
		if h := o.Hold(name); h != 0 {
			t.Errorf("%s held %v: its batch's nodes are all of a size", name, h)
		}
	}
	// s1 and s2, much the same size, are the smallest: they register together,
	// once both booted, at one moment each of them looks at in time.
	if h := o.Hold("s1"); h == 0 {
		t.Error("s1 released before s2 booted")
	}
	h2 := o.Hold("s2")
	if h2 <= 0 || h2 > 2*releasePoll {
		t.Errorf("s2 held %v, want the moment both register, within %v", h2, 2*releasePoll)
	}
	if h1 := o.Hold("s1"); h1 != h2 {
		t.Errorf("s1 held %v, s2 %v: not released together", h1, h2)
	}
	clk.Step(h2)
	if o.Hold("s1") != 0 || o.Hold("s2") != 0 {
		t.Error("the small nodes still held at their moment")
	}
	// The larger nodes wait for the small ones to settle.
	if o.Hold("m") == 0 || o.Hold("l") == 0 {
		t.Fatal("the larger nodes are not held while the small ones are not up")
	}
	if !o.Waiting() {
		t.Error("not waiting while larger nodes are held")
	}
	settled["s1"] = true
	observe()
	if o.Hold("m") == 0 {
		t.Error("m released with s2 not settled")
	}
	// s2 went: nothing is to land on it. m and l, both larger, go together after
	// the small nodes' pods had time to land.
	observe("s2")
	hm := o.Hold("m")
	if hm <= 0 || hm > ReleaseSettle {
		t.Errorf("m held %v just after the small nodes settled, want up to %v for their pods", hm, ReleaseSettle)
	}
	if hl := o.Hold("l"); hl != hm {
		t.Errorf("l held %v, m %v: the larger nodes are not released together", hl, hm)
	}
	clk.Step(hm)
	if o.Hold("m") != 0 || o.Hold("l") != 0 {
		t.Error("the larger nodes held after the small nodes settled")
	}
	if o.Waiting() {
		t.Error("waiting with nothing held")
	}
}

// A pod still waiting for its small node holds the larger ones back: it may land
// on them otherwise.
func TestReleaseWaitsForThePods(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	o := NewReleaseOrder(clk)
	batch(o, []string{"s", "l"}, []float64{1, 4})
	waiting := true
	observe := func() {
		o.Observe(func(string) bool { return true }, func(string) bool { return true }, func(n string) bool { return n == "s" && waiting })
	}
	observe()
	if o.Hold("l") == 0 {
		t.Fatal("l released while a pod waits for s")
	}
	clk.Step(5 * time.Second)
	waiting = false
	observe()
	clk.Step(o.Hold("l"))
	if h := o.Hold("l"); h != 0 {
		t.Errorf("l held %v once s's pods landed", h)
	}
}

// A smaller node that never comes up holds the others MaxReleaseHold at most,
// from when they first asked.
func TestReleaseHoldIsBounded(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	o := NewReleaseOrder(clk)
	batch(o, []string{"s", "l"}, []float64{1, 4})
	clk.Step(time.Minute) // l's node took a while to boot: the bound runs from its first ask
	if o.Hold("l") == 0 {
		t.Fatal("l not held")
	}
	clk.Step(MaxReleaseHold - time.Second)
	if h := o.Hold("l"); h <= 0 || h > time.Second {
		t.Errorf("l held %v a second before the bound", h)
	}
	clk.Step(time.Second)
	if h := o.Hold("l"); h != 0 {
		t.Errorf("l held %v past the bound", h)
	}
	if o.Waiting() {
		t.Error("waiting past the bound")
	}
	var none *ReleaseOrder
	batch(none, []string{"a", "b"}, []float64{1, 4})
	if none.Hold("b") != 0 || none.Waiting() {
		t.Error("a nil order holds")
	}
}

// Batches are forgotten once old: the order does not grow with every batch.
func TestReleaseOrderForgetsOldBatches(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	o := NewReleaseOrder(clk)
	batch(o, []string{"s", "l"}, []float64{1, 4})
	clk.Step(forgetBatchAfter + time.Second)
	batch(o, []string{"s2", "l2"}, []float64{1, 4})
	if _, ok := o.claims["l"]; ok || len(o.claims) != 2 {
		t.Errorf("claims %v, want only the new batch's", len(o.claims))
	}
}

func TestReleaseAnnouncesNodesToTheirPods(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	o := NewReleaseOrder(clk)
	b := o.Batch([]float64{NodeSize(2000, 4<<30), NodeSize(2000, 4<<30), NodeSize(8000, 64<<30)})
	b.NominatePods()
	for i, name := range []string{"s1", "s2", "l"} {
		b.Add(i, name)
	}
	batch(o, []string{"one-size"}, []float64{NodeSize(2000, 4<<30)})
	batch(o, []string{"one-shape", "one-shape-large"}, []float64{NodeSize(2000, 4<<30), NodeSize(8000, 64<<30)})
	web := types.NamespacedName{Namespace: "default", Name: "web-1"}
	o.Plan(map[string][]types.NamespacedName{"s1": {web}, "s2": {{Namespace: "default", Name: "web-2"}},
		"one-size": {{Namespace: "default", Name: "web-3"}}, "one-shape": {{Namespace: "default", Name: "web-4"}}})
	if got := o.Planned("s1"); !slices.Equal(got, []types.NamespacedName{web}) {
		t.Errorf("planned for s1: %v, want %v", got, web)
	}
	if got := o.Planned("one-size"); got != nil {
		t.Errorf("planned for a claim of a batch of one size: %v, want none kept", got)
	}
	if got := o.Planned("one-shape"); got != nil {
		t.Errorf("planned for a claim of a batch whose pods are of one shape: %v, want none kept", got)
	}
	if o.Planned("l") != nil || o.Closed("l") != 0 || o.Announce("l") != 0 || o.Keep("l") != 0 {
		t.Error("a claim with no pod waiting for it is held for its pods")
	}

	// A node not open to pods yet is looked at again soon, for MaxReleaseHold.
	if w := o.Closed("s1"); w <= 0 || w > releasePoll {
		t.Errorf("closed s1 to look at again in %v, want within %v", w, releasePoll)
	}
	clk.Step(MaxReleaseHold)
	if w := o.Closed("s1"); w != 0 {
		t.Errorf("closed s1 still held %v after MaxReleaseHold", w)
	}

	// The moment is known once both joined; the pods are told AnnounceLead before.
	if _, known := o.Due("s1"); known {
		t.Error("s1's moment known before s2 joined")
	}
	hold, known := o.Due("s2")
	if !known || hold <= AnnounceLead {
		t.Fatalf("s2 due in %v (known %v), want a known moment more than %v ahead", hold, known, AnnounceLead)
	}
	if o.Keep("s1") != 0 {
		t.Error("nominations kept before they were made")
	}
	clk.Step(hold - AnnounceLead)
	if w := o.Announce("s1"); w != AnnounceLead {
		t.Errorf("announced s1 to wait %v more, want %v", w, AnnounceLead)
	}
	clk.Step(AnnounceLead / 2)
	if w := o.Announce("s1"); w != AnnounceLead/2 {
		t.Errorf("announced s1 again to wait %v, want the first announcement's lead, %v left", w, AnnounceLead/2)
	}
	clk.Step(AnnounceLead / 2)
	if h := o.Hold("s1"); h != 0 {
		t.Errorf("s1 held %v at its moment", h)
	}
	if o.Announce("s1") != 0 {
		t.Error("s1 waits for its pods after the lead")
	}
	// Registered, its pods' nominations are kept for KeepNominations.
	if k := o.Keep("s1"); k != releasePoll {
		t.Errorf("keep s1's nominations: look again in %v, want %v", k, releasePoll)
	}
	clk.Step(KeepNominations)
	if k := o.Keep("s1"); k != 0 {
		t.Errorf("s1's nominations still kept after %v", KeepNominations)
	}
	// The pods landed: nothing is planned any more, and nothing remembered.
	o.Plan(map[string][]types.NamespacedName{})
	if len(o.announced) != 0 || len(o.closed) != 0 {
		t.Errorf("claims with no pods still remembered: announced %v, closed %v", o.announced, o.closed)
	}
}

// The small nodes planned for pods placed after others (a zone spread) register
// after the large nodes when some of those pods are planned on the large ones, so
// that the zone the large nodes are in is not empty of the spread's pods while the
// small nodes open; when all of them are on small nodes, nothing changes.
func TestPodsPlacedAfterOthersOpenLast(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	o := NewReleaseOrder(clk)
	small, large := NodeSize(2000, 4<<30), NodeSize(4000, 16<<30)
	b := o.Batch([]float64{small, small, large})
	b.AfterOthers([]bool{false, true, true})
	for i, name := range []string{"plain", "spread", "gpu"} {
		b.Add(i, name)
	}
	up := map[string]bool{}
	observe := func() {
		o.Observe(func(string) bool { return true }, func(n string) bool { return up[n] }, func(string) bool { return false })
	}
	for _, name := range []string{"plain", "spread", "gpu"} {
		o.Hold(name)
	}
	if _, known := o.Due("spread"); known {
		t.Fatal("the small node planned for a spread pod has its moment before the large node opened")
	}
	up["plain"] = true
	observe()
	hold, known := o.Due("gpu")
	if !known {
		t.Fatal("the large node waits for more than the small node without spread pods")
	}
	clk.Step(hold)
	if h := o.Hold("gpu"); h != 0 {
		t.Fatalf("the large node still held %v", h)
	}
	if h, known := o.Due("spread"); known || h == 0 {
		t.Fatalf("the spread pod's small node due in %v (known %v) before the large node settled", h, known)
	}
	up["gpu"] = true
	observe()
	hold, known = o.Due("spread")
	if !known {
		t.Fatal("the spread pod's small node has no moment once the large node settled")
	}
	clk.Step(hold)
	if h := o.Hold("spread"); h != 0 {
		t.Errorf("the spread pod's small node still held %v", h)
	}

	// Spread pods on small nodes only: the small nodes open together, first.
	o = NewReleaseOrder(clk)
	b = o.Batch([]float64{small, small, large})
	b.AfterOthers([]bool{false, true, false})
	for i, name := range []string{"plain", "spread", "large"} {
		b.Add(i, name)
	}
	o.Hold("plain")
	if _, known := o.Due("spread"); !known {
		t.Error("a spread pod's small node waits though no spread pod is on a large node")
	}
}

// Nodes of one size started together (pods of several shapes, or spread over
// zones) register at one moment once every one of them joined, and a node that
// joined first is held for MaxReleaseHold at most.
func TestReleaseTogether(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	o := NewReleaseOrder(clk)
	b := o.Together(3)
	for i, name := range []string{"a", "b", "c"} {
		b.Add(i, name)
	}
	if h := o.Hold("a"); h == 0 {
		t.Fatal("a released while b and c still boot")
	}
	clk.Step(5 * time.Second)
	if h := o.Hold("b"); h == 0 {
		t.Fatal("b released while c still boots")
	}
	clk.Step(time.Second)
	hc := o.Hold("c")
	if hc <= 0 || hc > 2*releasePoll {
		t.Fatalf("c held %v, want the moment all three register, within %v", hc, 2*releasePoll)
	}
	for _, name := range []string{"a", "b"} {
		if h := o.Hold(name); h != hc {
			t.Errorf("%s held %v, c %v: not released together", name, h, hc)
		}
	}

	// A node whose peers never come is held MaxReleaseHold at most.
	b = o.Together(2)
	b.Add(0, "early")
	b.Add(1, "never")
	o.Hold("early")
	clk.Step(MaxReleaseHold)
	if h := o.Hold("early"); h != 0 {
		t.Errorf("early held %v after MaxReleaseHold", h)
	}
}
