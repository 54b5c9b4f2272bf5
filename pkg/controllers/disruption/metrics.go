package disruption

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/nodetailor/tailor/api/v1"
	disrupt "github.com/nodetailor/tailor/pkg/disruption"
	"github.com/nodetailor/tailor/pkg/metrics"
)

// ControllerName is the disruption loop's controller label value, as Karpenter's.
const ControllerName = "disruption"

// metricReason is a disruption reason as Karpenter's metrics spell it: lower case.
func metricReason(r v1.DisruptionReason) string { return strings.ToLower(string(r)) }

// Metrics, named as Karpenter names them.
var (
	Decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_voluntary_disruption_decisions_total",
		Help: "Disruption commands carried out, by decision (delete or replace), reason and consolidation type.",
	}, []string{"decision", "reason", "consolidation_type"})
	// DecisionsByNodePool counts each command carried out once for every NodePool
	// its candidates belong to, as Karpenter does: a multi-node command over two
	// NodePools is one decision in each.
	DecisionsByNodePool = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_voluntary_disruption_decisions_by_nodepool_total",
		Help: "Disruption commands carried out, by the NodePool of their candidates, decision (delete or replace), reason and consolidation type.",
	}, []string{"nodepool", "decision", "reason", "consolidation_type"})
	// FailedValidations counts the commands dropped because they no longer held
	// when validated again, on fresh state, after the validation delay.
	FailedValidations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_voluntary_disruption_failed_validations_total",
		Help: "Disruption commands decided but dropped because they no longer held after the validation delay, by consolidation type.",
	}, []string{"consolidation_type"})
	EligibleNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_voluntary_disruption_eligible_nodes",
		Help: "Nodes that are candidates for disruption, by reason.",
	}, []string{"reason"})
	AllowedDisruptions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_nodepools_allowed_disruptions",
		Help: "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time, by its budgets, by reason; the nodes already disrupting count against it (nodes_consuming_budgets).",
	}, []string{"nodepool", "reason"})
	// NodesConsumingBudgets is, per NodePool, the nodes counted against its
	// budgets in the last pass; Karpenter sets it for every reason, the count being
	// the same for each.
	NodesConsumingBudgets = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_nodepools_nodes_consuming_budgets",
		Help: "The number of nodes consuming the budget of a nodepool at a point in time (being deleted or disrupted, or NotReady), by NodePool and reason.",
	}, []string{"nodepool", "reason"})
	EvaluationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
		Help:    "Time one disruption pass spends deciding, by the reason and consolidation type of the command it decided on (empty when none).",
		Buckets: metrics.DurationBuckets(),
	}, []string{"reason", "consolidation_type"})
	QueueFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_voluntary_disruption_queue_failures_total",
		Help: "Disruption commands rolled back (their replacements did not come up, or a write failed), by decision, reason and consolidation type.",
	}, []string{"decision", "reason", "consolidation_type"})
)

// Collectors are the package's metrics, for the operator to register.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{Decisions, DecisionsByNodePool, FailedValidations, EligibleNodes, AllowedDisruptions, NodesConsumingBudgets, EvaluationDuration, QueueFailures}
}

// countDecision counts a command carried out: once in all, and once for each
// NodePool of its candidates.
func countDecision(cmd *disrupt.Command) {
	decision, reason, kind := cmd.Decision(), metricReason(cmd.Reason), consolidationType(cmd)
	Decisions.WithLabelValues(decision, reason, kind).Inc()
	seen := map[string]bool{}
	for _, cand := range cmd.Candidates {
		pool := cand.Pool.NodePool.Name
		if !seen[pool] {
			seen[pool] = true
			DecisionsByNodePool.WithLabelValues(pool, decision, reason, kind).Inc()
		}
	}
}
