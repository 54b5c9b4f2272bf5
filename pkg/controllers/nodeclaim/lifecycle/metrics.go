package lifecycle

import (
	"github.com/prometheus/client_golang/prometheus"
)

// ControllerName is the lifecycle controller's controller label value, as
// Karpenter's.
const ControllerName = "nodeclaim.lifecycle"

// NodesCreated counts Nodes registered for a claim, under Karpenter's name (it
// counts a node when it registers).
var NodesCreated = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "karpenter_nodes_created_total",
	Help: "Nodes created (registered for a NodeClaim), by NodePool and zone.",
}, []string{"nodepool", "zone"})

// Collectors are the package's metrics, for the operator to register.
func Collectors() []prometheus.Collector { return []prometheus.Collector{NodesCreated} }
