package metrics

import "github.com/prometheus/client_golang/prometheus"

// Reasons of karpenter_nodeclaims_created_total and karpenter_nodeclaims_disrupted_total
// that the NodePool API's disruption reasons (lower-cased) do not cover.
const (
	// ReasonProvisioned marks claims made for pending pods (replacements carry
	// their disruption reason).
	ReasonProvisioned = "provisioned"
	ReasonExpired     = "expired"
	ReasonInterrupted = "interrupted"
	ReasonUnhealthy   = "unhealthy" // node repair
)

// The NodeClaim counters several controllers add to (provisioning and disruption
// create; disruption, expiration, interruption and node repair disrupt), kept here
// so that no controller imports another for them.
var (
	NodeClaimsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodeclaims_created_total",
		Help: "NodeClaims created, by reason (provisioned, or the disruption reason of a replacement), NodePool and whether minValues was relaxed.",
	}, []string{"reason", "nodepool", "min_values_relaxed"})
	NodeClaimsDisrupted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodeclaims_disrupted_total",
		Help: "NodeClaims disrupted, by reason, NodePool and capacity type.",
	}, []string{"reason", "nodepool", "capacity_type"})
)

// Collectors are the shared metrics, for the operator to register once.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{NodeClaimsCreated, NodeClaimsDisrupted, PodSchedulingDecisionDuration}
}
