package nodeclaim

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// Without the hold, every node of a batch registers as soon as it is up, larger
// ones before the smaller are settled and each before its tier has joined; its
// pods are still told its name first.
func TestReleaseOrderWithoutHold(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	o := NewReleaseOrder(clk).WithoutHold()
	b := o.Batch([]float64{NodeSize(2000, 4<<30), NodeSize(2000, 4<<30), NodeSize(16000, 64<<30)})
	b.NominatePods()
	for i, name := range []string{"s1", "s2", "l"} {
		b.Add(i, name)
	}
	o.Plan(map[string][]types.NamespacedName{"l": {{Namespace: "default", Name: "big"}}})
	for _, name := range []string{"s1", "l"} {
		if h, known := o.Due(name); h != 0 || !known {
			t.Errorf("%s held %v (known %v), want 0 with s2 not booted and nothing settled", name, h, known)
		}
	}
	if o.Waiting() {
		t.Error("waiting, though nothing is held")
	}
	if got := o.Planned("l"); len(got) != 1 || o.Announce("l") != AnnounceLead {
		t.Errorf("l's pods %v, announce %v: want its pod told its name, %v ahead", got, o.Announce("l"), AnnounceLead)
	}
}
