package provisioning

import (
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/nodetailor/tailor/pkg/scheduling"
)

// maxLoggedFailures bounds the unschedulable pods a debug log names one by one.
const maxLoggedFailures = 10

// logPlan writes a plan's decisions at debug level (--log-level debug): each new
// node with its cheapest option, and why pods fit nowhere.
func logPlan(logger logr.Logger, plan *scheduling.Plan, repacked bool) {
	logger = logger.V(1)
	if !logger.Enabled() {
		return
	}
	logger.Info("planned", "newNodes", len(plan.NewNodes), "onExistingNodes", len(plan.Bindings),
		"unschedulable", len(plan.Unschedulable), "pricePerHour", plan.Cost(), "repacked", repacked)
	for _, n := range plan.NewNodes {
		logger.Info("planned a new node", "nodepool", n.NodePool, "instanceType", n.InstanceType.Name,
			"capacityType", n.Offering.CapacityType, "zone", n.Offering.Zone, "pricePerHour", n.Offering.Price,
			"options", len(n.InstanceTypes), "pods", len(n.Pods))
	}
	for i, f := range plan.Unschedulable {
		if i == maxLoggedFailures {
			logger.Info("more pods fit nowhere", "count", len(plan.Unschedulable)-i)
			break
		}
		logger.Info("a pod fits nowhere", "pod", klog.KObj(f.Pod), "reason", f.Reason)
	}
}
