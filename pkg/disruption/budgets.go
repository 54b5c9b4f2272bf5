package disruption

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// DefaultBudget applies to a NodePool that lists no budgets (the API defaults it too).
var DefaultBudget = v1.Budget{Nodes: "10%"}

// Allowed is how many more of a NodePool's nodes may be disrupted now for reason:
// the most restrictive budget active at now that covers reason, less the nodes
// already disrupting. total is the NodePool's node count. With no budget active the
// NodePool is not limited (math.MaxInt).
func Allowed(budgets []v1.Budget, reason v1.DisruptionReason, now time.Time, total, disrupting int) int {
	if len(budgets) == 0 {
		budgets = []v1.Budget{DefaultBudget}
	}
	limit := math.MaxInt
	for _, b := range budgets {
		if len(b.Reasons) > 0 && !slices.Contains(b.Reasons, reason) {
			continue
		}
		if !Active(b, now) {
			continue
		}
		limit = min(limit, BudgetNodes(b.Nodes, total))
	}
	if limit == math.MaxInt {
		return limit
	}
	return max(0, limit-disrupting)
}

// BudgetNodes resolves a budget's nodes field ("5" or "20%") against total nodes;
// percentages round up, so "10%" of 5 nodes still lets one go. A malformed value
// (the API rejects them) allows nothing.
func BudgetNodes(nodes string, total int) int {
	if pct, ok := strings.CutSuffix(nodes, "%"); ok {
		p, err := strconv.Atoi(pct)
		if err != nil || p < 0 {
			return 0
		}
		return int(math.Ceil(float64(p) * float64(total) / 100))
	}
	n, err := strconv.Atoi(nodes)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Active reports whether a budget applies at now: always without a schedule, else
// for Duration after each firing of its cron schedule (UTC). An unparsable schedule
// counts as active, the restrictive reading.
func Active(b v1.Budget, now time.Time) bool {
	if b.Schedule == nil {
		return true
	}
	sched, err := ParseSchedule(*b.Schedule)
	if err != nil {
		return true
	}
	var d time.Duration
	if b.Duration != nil {
		d = b.Duration.Duration
	}
	now = now.UTC()
	// Active iff the schedule fired within (now-d, now].
	return !sched.Next(now.Add(-d)).After(now)
}

// ParseSchedule parses a budget's cron schedule: five fields or a macro such as
// @daily, in UTC.
func ParseSchedule(s string) (cron.Schedule, error) {
	sched, err := cron.ParseStandard(s)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", s, err)
	}
	return sched, nil
}
