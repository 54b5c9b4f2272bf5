package health

import (
	"strings"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
)

// UnhealthyDisrupted breaks node repairs down by the condition that caused them,
// which karpenter_nodeclaims_disrupted_total{reason="unhealthy"} does not; named as
// Karpenter names it.
var UnhealthyDisrupted = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "karpenter_nodeclaims_unhealthy_disrupted_total",
	Help: "NodeClaims deleted by node repair, by the node condition that caused it, NodePool, capacity type and image.",
}, []string{"condition", "nodepool", "capacity_type", "image_id"})

// Collectors are the package's metrics, for the operator to register.
func Collectors() []prometheus.Collector { return []prometheus.Collector{UnhealthyDisrupted} }

// snakeCase spells a condition type as Karpenter's metric labels do: Ready is
// "ready", AcceleratedHardwareReady "accelerated_hardware_ready".
func snakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
