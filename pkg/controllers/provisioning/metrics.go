package provisioning

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics under Karpenter's names, so its dashboards read Tailor too.
var (
	SchedulingDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "karpenter_provisioner_scheduling_duration_seconds",
		Help:    "Duration of one scheduling simulation.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
	})
	NodeClaimsCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodeclaims_created_total",
		Help: "NodeClaims created, by NodePool and reason.",
	}, []string{"nodepool", "reason"})
)

// RegisterMetrics registers the collectors (the operator passes controller-runtime's
// registry).
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{SchedulingDuration, NodeClaimsCreated} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
