package simulate

import (
	"strings"
	"testing"

	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// tailor simulate reads CapacityBuffers (v1beta1, and v1alpha1 as the API
// server serves it): a buffer of 20% of a Deployment of ten pods plans room for
// two more, shown as the buffer's pods in the plan; a buffer of a kind Tailor
// cannot read is refused in a note; and consolidation keeps the room.
func TestSimulateBuffers(t *testing.T) {
	w, err := Load(t.Context(), []string{"testdata/buffers.yaml"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(w.CapacityBuffers) != 2 || len(w.Refused) != 0 {
		t.Fatalf("%d buffers read, refused %v; want both", len(w.CapacityBuffers), w.Refused)
	}
	if !strings.Contains(strings.Join(w.Notes, "\n"), "CapacityBuffer rollout is refused (UnsupportedScalableRef)") {
		t.Errorf("notes %q, want the Rollout buffer refused", w.Notes)
	}
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(w, types, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var real, placeholders int
	for _, n := range res.Plan.NewNodes {
		for _, p := range n.Pods {
			if state.IsBufferPod(p) {
				placeholders++
			} else {
				real++
			}
		}
	}
	if real != 10 || placeholders != 2 || len(res.Plan.Unschedulable) != 0 {
		t.Fatalf("%d pods and %d buffer pods on new nodes, %d unschedulable; want 10 and 2, none", real, placeholders, len(res.Plan.Unschedulable))
	}
	report := NewReport(res, "test")
	shown := 0
	for _, workload := range report.workloads {
		if workload == "buffer web-headroom" {
			shown++
		}
	}
	if shown != 2 || report.Summary.Pods != 12 || report.Summary.Scheduled != 12 {
		t.Errorf("%d pods shown as the buffer's, summary %+v; want the two, 12 pods of 12 scheduled", shown, report.Summary)
	}
}
