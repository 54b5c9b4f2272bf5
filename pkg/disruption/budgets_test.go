package disruption

import (
	"math"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

func TestAllowed(t *testing.T) {
	nineToFive := func(nodes string, reasons ...v1.DisruptionReason) v1.Budget {
		s := "0 9 * * mon-fri"
		return v1.Budget{Nodes: nodes, Schedule: &s, Duration: &metav1.Duration{Duration: 8 * time.Hour}, Reasons: reasons}
	}
	monday := func(h, m int) time.Time { return time.Date(2026, 11, 23, h, m, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name       string
		budgets    []v1.Budget
		reason     v1.DisruptionReason
		at         time.Time
		total, out int
		want       int
	}{
		{"default 10% rounds up", nil, v1.DisruptionReasonEmpty, monday(12, 0), 5, 0, 1},
		{"default 10% of 30", nil, v1.DisruptionReasonEmpty, monday(12, 0), 30, 0, 3},
		{"disrupting nodes count", []v1.Budget{{Nodes: "3"}}, v1.DisruptionReasonDrifted, monday(12, 0), 30, 2, 1},
		{"never below zero", []v1.Budget{{Nodes: "1"}}, v1.DisruptionReasonDrifted, monday(12, 0), 30, 4, 0},
		{"most restrictive wins", []v1.Budget{{Nodes: "50%"}, {Nodes: "2"}}, v1.DisruptionReasonEmpty, monday(12, 0), 30, 0, 2},
		{"scheduled zero inside the window", []v1.Budget{{Nodes: "10"}, nineToFive("0")}, v1.DisruptionReasonEmpty, monday(9, 0), 30, 0, 0},
		{"scheduled zero late in the window", []v1.Budget{{Nodes: "10"}, nineToFive("0")}, v1.DisruptionReasonEmpty, monday(16, 59), 30, 0, 0},
		{"scheduled zero after the window", []v1.Budget{{Nodes: "10"}, nineToFive("0")}, v1.DisruptionReasonEmpty, monday(17, 0), 30, 0, 10},
		{"scheduled zero before the window", []v1.Budget{{Nodes: "10"}, nineToFive("0")}, v1.DisruptionReasonEmpty, monday(8, 59), 30, 0, 10},
		{"reasons select the budget", []v1.Budget{{Nodes: "10"}, {Nodes: "0", Reasons: []v1.DisruptionReason{v1.DisruptionReasonDrifted}}}, v1.DisruptionReasonEmpty, monday(12, 0), 30, 0, 10},
		{"reasons select the budget (drift)", []v1.Budget{{Nodes: "10"}, {Nodes: "0", Reasons: []v1.DisruptionReason{v1.DisruptionReasonDrifted}}}, v1.DisruptionReasonDrifted, monday(12, 0), 30, 0, 0},
		{"no active budget: unlimited", []v1.Budget{nineToFive("0")}, v1.DisruptionReasonEmpty, monday(20, 0), 30, 0, math.MaxInt},
		{"macro", []v1.Budget{{Nodes: "0", Schedule: ptr("@daily"), Duration: &metav1.Duration{Duration: time.Hour}}}, v1.DisruptionReasonEmpty, monday(0, 30), 30, 0, 0},
		{"100%", []v1.Budget{{Nodes: "100%"}}, v1.DisruptionReasonEmpty, monday(0, 30), 7, 2, 5},
	} {
		if got := Allowed(tc.budgets, tc.reason, tc.at, tc.total, tc.out); got != tc.want {
			t.Errorf("%s: allowed = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
