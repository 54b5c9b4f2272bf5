package termination

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/metrics"
)

// ControllerName is the termination controller's controller label value.
const ControllerName = "node.termination"

// day is a day in seconds, for the lifetime buckets.
const day = 24 * 60 * 60

// Metrics under Karpenter's names, labels and buckets.
var (
	NodeClaimsTerminated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodeclaims_terminated_total",
		Help: "NodeClaims terminated, by NodePool, capacity type and zone.",
	}, []string{"nodepool", "capacity_type", "zone"})
	NodeClaimTerminationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "karpenter_nodeclaims_termination_duration_seconds",
		Help:    "Time from a NodeClaim's deletion to the removal of its finalizer, by NodePool.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	}, []string{"nodepool"})
	InstanceTerminationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "karpenter_nodeclaims_instance_termination_duration_seconds",
		Help:    "Time from asking the cloud provider to terminate an instance to its being gone, by NodePool.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 11),
	}, []string{"nodepool"})
	NodesTerminated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodes_terminated_total",
		Help: "Nodes terminated, by NodePool and zone.",
	}, []string{"nodepool", "zone"})
	NodeTerminationDuration = prometheus.NewSummaryVec(prometheus.SummaryOpts{
		Name:       "karpenter_nodes_termination_duration_seconds",
		Help:       "Time from a Node's deletion to the removal of its finalizer, by NodePool.",
		Objectives: metrics.SummaryObjectives(),
	}, []string{"nodepool"})
	NodeLifetime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "karpenter_nodes_lifetime_duration_seconds",
		Help: "Lifetime of terminated nodes, from creation to the removal of their finalizer, by NodePool.",
		Buckets: []float64{15 * 60, 30 * 60, 45 * 60, 3600, 2 * 3600, 4 * 3600, 6 * 3600, 8 * 3600, 10 * 3600, 12 * 3600, 16 * 3600, 20 * 3600,
			day, 2 * day, 3 * day, 5 * day, 10 * day, 15 * day, 20 * day, 25 * day, 30 * day},
	}, []string{"nodepool"})
	NodesDrained = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_nodes_drained_total",
		Help: "Nodes whose drain finished, by NodePool.",
	}, []string{"nodepool"})
	PodsDrained = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_pods_drained_total",
		Help: "Pods evicted to drain nodes, by the reason the node was disrupted (its NodeClaim's DisruptionReason; empty when none was recorded).",
	}, []string{"reason"})
	// PodsEvictionRequests is Karpenter v1.12+'s name; v1.5 called it
	// karpenter_nodes_eviction_requests_total.
	PodsEvictionRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "karpenter_pods_eviction_requests_total",
		Help: "Eviction API requests made to drain nodes, by the HTTP code of the answer (200 when the pod was evicted).",
	}, []string{"code"})
)

// Collectors are the package's metrics, for the operator to register.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{NodeClaimsTerminated, NodeClaimTerminationDuration, InstanceTerminationDuration,
		NodesTerminated, NodeTerminationDuration, NodeLifetime, NodesDrained, PodsEvictionRequests, PodsDrained}
}

// evictionRequested counts an Eviction API request by the HTTP code it was
// answered with; a request that got no answer (a timeout, a broken connection) has
// no code and is not counted.
func evictionRequested(err error) {
	if code, ok := evictionCode(err); ok {
		PodsEvictionRequests.WithLabelValues(code).Inc()
	}
}

// evictionCode is the code label of an Eviction API request that returned err:
// "200" for a granted eviction, as Karpenter labels every success.
func evictionCode(err error) (string, bool) {
	if err == nil {
		return "200", true
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Code != 0 {
		return strconv.Itoa(int(status.Status().Code)), true
	}
	return "", false
}

// nodeDrained records a node whose drain just finished.
func nodeDrained(node *corev1.Node) {
	NodesDrained.WithLabelValues(node.Labels[v1.NodePoolLabelKey]).Inc()
}

// nodeReleased records a terminated node, its finalizer just removed.
func nodeReleased(node *corev1.Node, now time.Time) {
	pool := node.Labels[v1.NodePoolLabelKey]
	NodesTerminated.WithLabelValues(pool, node.Labels[corev1.LabelTopologyZone]).Inc()
	if node.DeletionTimestamp != nil {
		NodeTerminationDuration.WithLabelValues(pool).Observe(now.Sub(node.DeletionTimestamp.Time).Seconds())
	}
	NodeLifetime.WithLabelValues(pool).Observe(now.Sub(node.CreationTimestamp.Time).Seconds())
}

// claimReleased records a terminated claim, its finalizer just removed.
func claimReleased(nc *v1.NodeClaim, now time.Time) {
	pool := nc.Labels[v1.NodePoolLabelKey]
	NodeClaimsTerminated.WithLabelValues(pool, nc.Labels[v1.CapacityTypeLabelKey], nc.Labels[corev1.LabelTopologyZone]).Inc()
	if nc.DeletionTimestamp != nil {
		NodeClaimTerminationDuration.WithLabelValues(pool).Observe(now.Sub(nc.DeletionTimestamp.Time).Seconds())
	}
	if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeInstanceTerminating); c != nil && c.Status == metav1.ConditionTrue {
		InstanceTerminationDuration.WithLabelValues(pool).Observe(now.Sub(c.LastTransitionTime.Time).Seconds())
	}
}

// disruptionReason is why the claim is disrupted, as the disruption controller
// recorded it (the DisruptionReason condition), or "".
func disruptionReason(nc *v1.NodeClaim) string {
	if c := meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDisruptionReason); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	return ""
}
