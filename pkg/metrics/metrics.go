// Package metrics holds the conventions Tailor's metrics share with Karpenter's, so
// that a Karpenter dashboard reads Tailor unchanged: the bucket boundaries of its
// duration histograms, the quantiles of its summaries, and how a resource name
// becomes a resource_type label value. It also holds the metrics more than one
// controller reports to (see nodeclaims.go).
package metrics

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DurationBuckets are the bucket boundaries, in seconds, of Karpenter's duration
// histograms (controller-runtime's, extended to ten minutes). A new slice each call.
func DurationBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1,
		1.25, 1.5, 1.75, 2, 2.5, 3, 3.5, 4, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60, 120, 150, 300, 450, 600}
}

// SummaryObjectives are the quantiles of Karpenter's summaries (min, median, p90,
// p99, max), each within 0.01.
func SummaryObjectives() map[float64]float64 {
	return map[float64]float64{0: 0.01, 0.5: 0.01, 0.9: 0.01, 0.99: 0.01, 1: 0.01}
}

// ResourceType is a resource name as a resource_type label value: lower case,
// dashes as underscores ("ephemeral-storage" is "ephemeral_storage").
func ResourceType(name corev1.ResourceName) string {
	return strings.ReplaceAll(strings.ToLower(string(name)), "-", "_")
}

// Value is a quantity as a metric value: cpu in cores, everything else in units
// (bytes, pods, devices).
func Value(name corev1.ResourceName, q resource.Quantity) float64 {
	if name == corev1.ResourceCPU {
		return float64(q.MilliValue()) / 1000
	}
	return float64(q.Value())
}

// Bool is a boolean label value as Karpenter spells it.
func Bool(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
