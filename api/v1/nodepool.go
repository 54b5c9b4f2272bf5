package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePool is an operator's description of the nodes Tailor may launch: what they look
// like (template), how many resources they may add up to (limits), which pool is tried
// first (weight) and when they may be taken away (disruption). Its scale subresource
// (spec.replicas, status.nodes) lets `kubectl scale nodepool` size a static pool.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodepools,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.nodes
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.template.spec.nodeClassRef.name"
// +kubebuilder:printcolumn:name="Nodes",type="string",JSONPath=".status.resources.nodes"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.resources.cpu",priority=1
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.resources.memory",priority=1
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   NodePoolSpec   `json:"spec"`
	Status NodePoolStatus `json:"status,omitempty"`
}

// NodePoolList is a list of NodePools.
//
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodePool `json:"items"`
}

// NodePoolSpec is the operator's intent for a NodePool.
//
// +kubebuilder:validation:XValidation:message="spec.replicas cannot be added or removed: a NodePool cannot switch between static (replicas set) and dynamic (replicas unset)",rule="has(self.replicas) == has(oldSelf.replicas)"
// +kubebuilder:validation:XValidation:message="spec.limits: only 'limits.nodes' is supported on static NodePools (spec.replicas set)",rule="!has(self.replicas) || !has(self.limits) || self.limits.all(k, k == 'nodes')"
// +kubebuilder:validation:XValidation:message="spec.weight is not supported on static NodePools (spec.replicas set)",rule="!has(self.replicas) || !has(self.weight)"
type NodePoolSpec struct {
	// Template describes the NodeClaims this NodePool creates.
	// +required
	Template NodeClaimTemplate `json:"template"`
	// Disruption says when nodes of this NodePool may be removed or replaced.
	// +kubebuilder:default={consolidateAfter: "0s"}
	// +optional
	Disruption Disruption `json:"disruption"`
	// Limits cap the total resources of all nodes of this NodePool; a launch that
	// would exceed one is not made.
	// +optional
	Limits Limits `json:"limits,omitempty"`
	// Weight orders NodePools: higher weights are tried first.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`
	// Replicas makes the NodePool static: exactly this many nodes are kept, whatever
	// the pending pods, and they are never consolidated (drift and expiration still
	// replace them). Once set it cannot be removed. Needs the StaticCapacity feature
	// gate.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	Replicas *int64 `json:"replicas,omitempty"`
}

// IsStatic reports a static NodePool: one with spec.replicas, kept at a fixed
// number of nodes rather than provisioned for pending pods.
func (np *NodePool) IsStatic() bool { return np.Spec.Replicas != nil }

// Limits are resource totals (cpu, memory, nodes, nvidia.com/gpu, …) a NodePool may
// not exceed.
type Limits corev1.ResourceList

// ConsolidationPolicy says which nodes consolidation may remove.
// +kubebuilder:validation:Enum:={WhenEmpty,WhenEmptyOrUnderutilized,Balanced}
type ConsolidationPolicy string

const (
	ConsolidationPolicyWhenEmpty                ConsolidationPolicy = "WhenEmpty"
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
	// ConsolidationPolicyBalanced consolidates underutilized nodes only when the
	// move's share of the NodePool's cost saved outweighs its share of the
	// NodePool's disruption (see ConsolidationThreshold), as Karpenter 1.14.
	ConsolidationPolicyBalanced ConsolidationPolicy = "Balanced"
)

// DefaultConsolidationThreshold is Balanced's threshold when none is set.
const DefaultConsolidationThreshold = 2

// DisruptionReason names a voluntary disruption method a budget applies to.
// +kubebuilder:validation:Enum:={Underutilized,Empty,Drifted}
type DisruptionReason string

const (
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	DisruptionReasonEmpty         DisruptionReason = "Empty"
	DisruptionReasonDrifted       DisruptionReason = "Drifted"
)

// Disruption configures voluntary disruption of a NodePool's nodes.
// +kubebuilder:validation:XValidation:message="consolidationThreshold may only be set with consolidationPolicy Balanced",rule="!has(self.consolidationThreshold) || (has(self.consolidationPolicy) && self.consolidationPolicy == 'Balanced')"
type Disruption struct {
	// ConsolidateAfter is how long a node must be empty or underutilized, with no pod
	// arriving or leaving, before consolidation considers it. "Never" turns it off.
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:default:="0s"
	// +required
	ConsolidateAfter NillableDuration `json:"consolidateAfter,omitzero"`
	// ConsolidationPolicy says which nodes consolidation may remove.
	// +kubebuilder:default:="WhenEmptyOrUnderutilized"
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	// ConsolidationThreshold (Balanced only; 1 to 3, default 2) is how much
	// disruption a move may cause for what it saves: it is approved when its share
	// of the NodePool's disruption is at most this many times its share of the
	// NodePool's cost saved.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3
	// +optional
	ConsolidationThreshold *int32 `json:"consolidationThreshold,omitempty"`
	// Budgets limit how many nodes may be disrupted at once. The most restrictive
	// active budget wins.
	// +kubebuilder:validation:XValidation:message="'schedule' must be set with 'duration'",rule="self.all(x, has(x.schedule) == has(x.duration))"
	// +kubebuilder:default:={{nodes: "10%"}}
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Budgets []Budget `json:"budgets,omitempty"`
}

// Budget limits the nodes of a NodePool that may be disrupted at once, always or
// within a recurring window.
type Budget struct {
	// Reasons are the disruption methods this budget applies to; empty means all.
	// +kubebuilder:validation:MaxItems=50
	// +listType=set
	// +optional
	Reasons []DisruptionReason `json:"reasons,omitempty"`
	// Nodes is the number ("5") or the percentage of the NodePool's nodes ("10%")
	// that may be disrupted at once.
	// +kubebuilder:validation:Pattern:="^((100|[0-9]{1,2})%|[0-9]+)$"
	// +kubebuilder:default:="10%"
	Nodes string `json:"nodes"`
	// Schedule is a cron expression (UTC) for when the budget becomes active; it is
	// active for Duration from each firing. Without it the budget is always active.
	// +kubebuilder:validation:Pattern:=`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
	// +optional
	Schedule *string `json:"schedule,omitempty"`
	// Duration is how long the budget stays active after each firing of Schedule.
	// +kubebuilder:validation:Pattern=`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`
	// +kubebuilder:validation:Type="string"
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// NodeClaimTemplate is the shape of the NodeClaims a NodePool creates.
type NodeClaimTemplate struct {
	ObjectMeta `json:"metadata,omitempty"`
	// +required
	Spec NodeClaimTemplateSpec `json:"spec"`
}

// ObjectMeta is the part of object metadata a NodePool may set on its nodes.
type ObjectMeta struct {
	// Labels are put on every NodeClaim and Node of the NodePool. Their values are
	// label values (hack/crdpatch adds the pattern and length to the CRD).
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule="self.all(x, x in ['karpenter.sh/capacity-type', 'karpenter.sh/nodepool'] || !x.find('^([^/]+)').endsWith('karpenter.sh'))"
	// +kubebuilder:validation:XValidation:message="label \"karpenter.sh/nodepool\" is restricted",rule="self.all(x, x != 'karpenter.sh/nodepool')"
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule="self.all(x, x != 'kubernetes.io/hostname')"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.k8s.aws\" is restricted",rule="self.all(x, x in ['karpenter.k8s.aws/instance-tenancy', 'karpenter.k8s.aws/capacity-reservation-type', 'karpenter.k8s.aws/capacity-reservation-id', 'karpenter.k8s.aws/capacity-reservation-interruptible', 'karpenter.k8s.aws/ec2nodeclass', 'karpenter.k8s.aws/instance-encryption-in-transit-supported', 'karpenter.k8s.aws/instance-category', 'karpenter.k8s.aws/instance-hypervisor', 'karpenter.k8s.aws/instance-family', 'karpenter.k8s.aws/instance-generation', 'karpenter.k8s.aws/instance-local-nvme', 'karpenter.k8s.aws/instance-size', 'karpenter.k8s.aws/instance-cpu', 'karpenter.k8s.aws/instance-cpu-manufacturer', 'karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz', 'karpenter.k8s.aws/instance-memory', 'karpenter.k8s.aws/instance-ebs-bandwidth', 'karpenter.k8s.aws/instance-network-bandwidth', 'karpenter.k8s.aws/instance-gpu-name', 'karpenter.k8s.aws/instance-gpu-manufacturer', 'karpenter.k8s.aws/instance-gpu-count', 'karpenter.k8s.aws/instance-gpu-memory', 'karpenter.k8s.aws/instance-accelerator-name', 'karpenter.k8s.aws/instance-accelerator-manufacturer', 'karpenter.k8s.aws/instance-accelerator-count', 'karpenter.k8s.aws/instance-capability-flex', 'karpenter.k8s.aws/placement-group-id', 'karpenter.k8s.aws/placement-group-partition'] || !x.find('^([^/]+)').endsWith('karpenter.k8s.aws'))"
	// +kubebuilder:validation:MaxProperties:=100
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are put on every NodeClaim and Node of the NodePool.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimTemplateSpec is the spec of the NodeClaims a NodePool creates.
type NodeClaimTemplateSpec struct {
	// Taints are put on every node; pods must tolerate them to land there.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	// +kubebuilder:validation:XValidation:message="taint effect must be one of NoSchedule, PreferNoSchedule or NoExecute",rule="self.all(t, t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are expected on a new node until a daemon removes them; they do
	// not stop pods from being provisioned for the node.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	// +kubebuilder:validation:XValidation:message="taint effect must be one of NoSchedule, PreferNoSchedule or NoExecute",rule="self.all(t, t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements constrain the nodes' labels: instance type, zone, capacity type,
	// architecture, or any label.
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value",rule="self.all(x, (x.operator in ['Gt', 'Lt', 'Gte', 'Lte']) ? (x.values.size() == 1 && x.values[0].matches('^[0-9]+$')) : true)"
	// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)"
	// +kubebuilder:validation:XValidation:message="label \"karpenter.sh/nodepool\" is restricted",rule="self.all(x, x.key != 'karpenter.sh/nodepool')"
	// +kubebuilder:validation:MaxItems:=100
	// +optional
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements,omitempty"`
	// NodeClassRef points at the cloud-specific configuration of the nodes.
	// +kubebuilder:validation:XValidation:rule="self.group == oldSelf.group",message="nodeClassRef.group is immutable"
	// +kubebuilder:validation:XValidation:rule="self.kind == oldSelf.kind",message="nodeClassRef.kind is immutable"
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// TerminationGracePeriod caps how long a node's drain may take once its deletion
	// starts; pods still running then are deleted. Unset waits for the drain.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is the age at which a node is replaced, or "Never".
	// +kubebuilder:default:="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitzero"`
}

// NodePoolStatus is what Tailor observed of a NodePool.
type NodePoolStatus struct {
	// Resources sums the capacity of the NodePool's nodes, with "nodes" their count.
	// +optional
	Resources corev1.ResourceList `json:"resources,omitempty"`
	// Nodes is the number of nodes (NodeClaims) the NodePool has.
	// +optional
	Nodes *int64 `json:"nodes,omitempty"`
	// NodeClassObservedGeneration is the NodeClass generation the Ready condition saw.
	// +optional
	NodeClassObservedGeneration int64 `json:"nodeClassObservedGeneration,omitempty"`
	// Conditions: Ready, NodeClassReady, ValidationSucceeded.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NodePool condition types.
const (
	ConditionTypeValidationSucceeded     = "ValidationSucceeded"
	ConditionTypeNodeClassReady          = "NodeClassReady"
	ConditionTypeNodeRegistrationHealthy = "NodeRegistrationHealthy"
	// ConditionTypeStaticCapacity is False on a static NodePool (spec.replicas)
	// while the StaticCapacity feature gate is off, and absent otherwise.
	ConditionTypeStaticCapacity = "StaticCapacity"
)
