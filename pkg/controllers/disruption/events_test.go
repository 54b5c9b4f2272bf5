package disruption

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// A NodePool whose budget allows no disruption for a reason gets Karpenter's
// DisruptionBlocked event, once while that lasts.
func TestBudgetBlockedEvents(t *testing.T) {
	events := record.NewFakeRecorder(10)
	c := &Controller{recorder: events, budgetBlocked: map[string]string{}}
	pools := []*scheduling.NodePool{{NodePool: &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}}
	allowed := func(empty, drifted, underutilized int) map[string]map[v1.DisruptionReason]int {
		return map[string]map[v1.DisruptionReason]int{"default": {v1.DisruptionReasonEmpty: empty, v1.DisruptionReasonDrifted: drifted,
			v1.DisruptionReasonUnderutilized: underutilized}}
	}
	drain := func() []string {
		var out []string
		for len(events.Events) > 0 {
			out = append(out, <-events.Events)
		}
		return out
	}
	c.reportBudgets(pools, allowed(1, 0, 0))
	want := []string{
		"Normal DisruptionBlocked No allowed disruptions for disruption reason Drifted due to blocking budget",
		"Normal DisruptionBlocked No allowed disruptions for disruption reason Underutilized due to blocking budget",
	}
	if diff := cmp.Diff(want, drain()); diff != "" {
		t.Errorf("first pass (-want +got):\n%s", diff)
	}
	c.reportBudgets(pools, allowed(1, 0, 0))
	if got := drain(); len(got) != 0 {
		t.Errorf("repeated while it lasts: %v", got)
	}
	c.reportBudgets(pools, allowed(0, 0, 1))
	want = []string{"Normal DisruptionBlocked No allowed disruptions for disruption reason Empty due to blocking budget"}
	if diff := cmp.Diff(want, drain()); diff != "" {
		t.Errorf("budget moved (-want +got):\n%s", diff)
	}
}
