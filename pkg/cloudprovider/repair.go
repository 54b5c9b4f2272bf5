package cloudprovider

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// RepairPolicy says a node is broken: its condition has held the status for
// longer than the toleration. Node repair (pkg/disruption.DecideRepairs) replaces
// such nodes; each provider names the conditions it trusts.
type RepairPolicy struct {
	ConditionType   corev1.NodeConditionType
	ConditionStatus corev1.ConditionStatus
	Toleration      time.Duration
}

// KubeletRepairPolicies are Karpenter's policies for the condition every kubelet
// reports: Ready False or Unknown (the kubelet stopped reporting) for 30 minutes.
var KubeletRepairPolicies = []RepairPolicy{
	{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, Toleration: 30 * time.Minute},
	{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, Toleration: 30 * time.Minute},
}

// NodeHealthSource is a provider's own view of its instances' health, beside what
// the kubelet reports: conditions, by the provider ID of the instance, that node
// repair reads as if the Node carried them (an EC2 status check failing, say).
type NodeHealthSource interface {
	NodeConditions(ctx context.Context) (map[string][]corev1.NodeCondition, error)
}
