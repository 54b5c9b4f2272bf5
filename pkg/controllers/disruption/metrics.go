package disruption

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// metricReason is a disruption reason as Karpenter's metrics spell it: lower case.
func metricReason(r v1.DisruptionReason) string { return strings.ToLower(string(r)) }

// Reasons outside the NodePool API, for karpenter_nodeclaims_disrupted_total.
const (
	ReasonExpired     = "expired"
	ReasonInterrupted = "interrupted"
	ReasonUnhealthy   = "unhealthy" // node repair
)

// Metrics, named as Karpenter names them.
var (
	Decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_voluntary_disruption_decisions_total",
		Help: "Disruption commands carried out, by decision (delete or replace), reason and consolidation type.",
	}, []string{"decision", "reason", "consolidation_type"})
	EligibleNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_voluntary_disruption_eligible_nodes",
		Help: "Nodes that are candidates for disruption, by reason.",
	}, []string{"reason"})
	AllowedDisruptions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_nodepools_allowed_disruptions",
		Help: "How many more nodes each NodePool's budgets allow to be disrupted now, by reason.",
	}, []string{"nodepool", "reason"})
	EvaluationDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
		Help:    "Time one disruption pass spends deciding.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	})
	NodeClaimsDisrupted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodeclaims_disrupted_total",
		Help: "NodeClaims disrupted, by reason, NodePool and capacity type.",
	}, []string{"reason", "nodepool", "capacity_type"})
	Failures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tailor_disruption_failures_total",
		Help: "Disruption commands rolled back because their replacements did not come up, by reason.",
	}, []string{"reason"})
)

// RegisterMetrics registers the metrics with reg.
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{Decisions, EligibleNodes, AllowedDisruptions, EvaluationDuration, NodeClaimsDisrupted, Failures} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
