package provisioning

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

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
	PendingPodsByEffectiveZone = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_scheduler_pending_pods_by_effective_zone_count",
		Help: "Pending pods of the last scheduling round by effective zone constraint, the intersection of the pod's zone requirements, volume zones and zone topology constraints: a zone's name, 'flexible' (several zones or any), or 'none' (no valid intersection).",
	}, []string{"controller", "zone"})
)

// setEffectiveZones sets PendingPodsByEffectiveZone to the round's count of the
// pods by effective zone: those of pods the round planned, the zones the plan
// found for them (a pod it planned nothing for is left out).
func setEffectiveZones(pods []*corev1.Pod, zones map[*corev1.Pod]string) {
	PendingPodsByEffectiveZone.DeletePartialMatch(prometheus.Labels{"controller": ControllerName})
	for zone, n := range countEffectiveZones(pods, zones) {
		PendingPodsByEffectiveZone.WithLabelValues(ControllerName, zone).Set(float64(n))
	}
}

// countEffectiveZones counts pods by the zone zones gives a pod of the same
// namespace and name: the plan's pods may be copies of the round's.
func countEffectiveZones(pods []*corev1.Pod, zones map[*corev1.Pod]string) map[string]int {
	byKey := make(map[types.NamespacedName]string, len(zones))
	for p, z := range zones {
		byKey[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = z
	}
	out := map[string]int{}
	for _, p := range pods {
		if z, ok := byKey[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}]; ok {
			out[z]++
		}
	}
	return out
}

// UnfinishedWork reports karpenter_scheduler_unfinished_work_seconds: how long the
// scheduling round under way has been running, by controller and round, read at
// scrape time (a round's series is there only while it runs).
var UnfinishedWork = &unfinishedWork{clock: clock.RealClock{}, started: map[[2]string]time.Time{}}

var unfinishedWorkDesc = prometheus.NewDesc("karpenter_scheduler_unfinished_work_seconds",
	"How many seconds of work the scheduling round under way has done, by controller and round.",
	[]string{"controller", "scheduling_id"}, nil)

type unfinishedWork struct {
	clock   clock.PassiveClock
	mu      sync.Mutex
	started map[[2]string]time.Time
}

// start records that round began; the returned func ends it.
func (u *unfinishedWork) start(controller, round string) func() {
	key := [2]string{controller, round}
	u.mu.Lock()
	u.started[key] = u.clock.Now()
	u.mu.Unlock()
	return func() {
		u.mu.Lock()
		delete(u.started, key)
		u.mu.Unlock()
	}
}

func (u *unfinishedWork) Describe(ch chan<- *prometheus.Desc) { ch <- unfinishedWorkDesc }

func (u *unfinishedWork) Collect(ch chan<- prometheus.Metric) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock.Now()
	for key, at := range u.started {
		ch <- prometheus.MustNewConstMetric(unfinishedWorkDesc, prometheus.GaugeValue, now.Sub(at).Seconds(), key[0], key[1])
	}
}

// Collectors are the package's metrics, for the operator to register.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{SchedulingDuration, QueueDepth, UnschedulablePods, PendingPodsByEffectiveZone, UnfinishedWork}
}
