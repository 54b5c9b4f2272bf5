package termination

import "github.com/prometheus/client_golang/prometheus"

// NodeClaimsTerminated counts terminations under Karpenter's name.
var NodeClaimsTerminated = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "karpenter_nodeclaims_terminated_total",
	Help: "NodeClaims terminated, by NodePool.",
}, []string{"nodepool"})

// RegisterMetrics registers the collectors.
func RegisterMetrics(reg prometheus.Registerer) error { return reg.Register(NodeClaimsTerminated) }
