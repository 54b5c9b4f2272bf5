package provisioning

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/nodetailor/tailor/pkg/metrics"
)

// ControllerName is the provisioner's controller label value, as Karpenter's.
const ControllerName = "provisioner"

// Metrics under Karpenter's names and labels, so its dashboards read Tailor too.
var (
	SchedulingDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "karpenter_scheduler_scheduling_duration_seconds",
		Help:    "Duration of scheduling simulations used for deprovisioning and provisioning in seconds, by controller.",
		Buckets: metrics.DurationBuckets(),
	}, []string{"controller"})
	QueueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_scheduler_queue_depth",
		Help: "The number of pods the scheduling round under way is placing, by controller and round.",
	}, []string{"controller", "scheduling_id"})
	UnschedulablePods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_scheduler_unschedulable_pods_count",
		Help: "The number of pods the last scheduling round found no room for, by controller.",
	}, []string{"controller"})
)

// Collectors are the package's metrics, for the operator to register.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{SchedulingDuration, QueueDepth, UnschedulablePods}
}
