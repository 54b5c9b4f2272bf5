package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeClaim is one node Tailor asked a cloud for: what it must look like (spec) and
// what became of it (status). Its spec is immutable once created.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodeclaims,scope=Cluster,categories=karpenter
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".metadata.labels.node\\.kubernetes\\.io/instance-type"
// +kubebuilder:printcolumn:name="Capacity",type="string",JSONPath=".metadata.labels.karpenter\\.sh/capacity-type"
// +kubebuilder:printcolumn:name="Zone",type="string",JSONPath=".metadata.labels.topology\\.kubernetes\\.io/zone"
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=".status.nodeName"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="ImageID",type="string",JSONPath=".status.imageID",priority=1
// +kubebuilder:printcolumn:name="ID",type="string",JSONPath=".status.providerID",priority=1
// +kubebuilder:printcolumn:name="NodePool",type="string",JSONPath=".metadata.labels.karpenter\\.sh/nodepool",priority=1
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.nodeClassRef.name",priority=1
// +kubebuilder:printcolumn:name="Drifted",type="string",JSONPath=".status.conditions[?(@.type==\"Drifted\")].status",priority=1
type NodeClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
	// +required
	Spec   NodeClaimSpec   `json:"spec"`
	Status NodeClaimStatus `json:"status,omitempty"`
}

// NodeClaimList is a list of NodeClaims.
//
// +kubebuilder:object:root=true
type NodeClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeClaim `json:"items"`
}

// NodeClaimSpec is what the node must be.
type NodeClaimSpec struct {
	// Taints are put on the node.
	// +kubebuilder:validation:XValidation:message="taint effect must be one of NoSchedule, PreferNoSchedule or NoExecute",rule="self.all(t, t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
	// +kubebuilder:validation:MaxItems=100
	// +optional
	Taints []corev1.Taint `json:"taints,omitempty"`
	// StartupTaints are expected on the node until a daemon removes them.
	// +kubebuilder:validation:XValidation:message="taint effect must be one of NoSchedule, PreferNoSchedule or NoExecute",rule="self.all(t, t.effect in ['NoSchedule', 'PreferNoSchedule', 'NoExecute'])"
	// +kubebuilder:validation:MaxItems=100
	// +optional
	StartupTaints []corev1.Taint `json:"startupTaints,omitempty"`
	// Requirements the node's labels must meet, narrowed to the instance types that
	// fit the pods it was launched for.
	// +kubebuilder:validation:XValidation:message="requirements with operator 'In' must have a value defined",rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)"
	// +kubebuilder:validation:XValidation:message="requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single non-negative integer value",rule="self.all(x, (x.operator in ['Gt', 'Lt', 'Gte', 'Lte']) ? (x.values.size() == 1 && x.values[0].matches('^[0-9]+$')) : true)"
	// +kubebuilder:validation:XValidation:message="requirements with 'minValues' must have at least that many values specified in the 'values' field",rule="self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)"
	// +kubebuilder:validation:MaxItems:=100
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`
	// Resources are the requests of the pods the node was launched for.
	// +optional
	Resources ResourceRequirements `json:"resources,omitempty"`
	// NodeClassRef points at the cloud-specific configuration of the node.
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`
	// TerminationGracePeriod caps how long the node's drain may take.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`
	// ExpireAfter is the age at which the node is replaced, or "Never".
	// +kubebuilder:default:="720h"
	// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:validation:Schemaless
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitzero"`
}

// ResourceRequirements holds the resources a NodeClaim was sized for.
type ResourceRequirements struct {
	// Requests are the summed requests of the pods the node was launched for.
	// +optional
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// NodeClaimStatus is what became of a NodeClaim.
type NodeClaimStatus struct {
	// NodeName is the name of the Node the instance registered as.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// ProviderID is the cloud's identifier of the instance.
	// +optional
	ProviderID string `json:"providerID,omitempty"`
	// ImageID is the image the instance booted from.
	// +optional
	ImageID string `json:"imageID,omitempty"`
	// Capacity is the instance's capacity.
	// +optional
	Capacity corev1.ResourceList `json:"capacity,omitempty"`
	// Allocatable is what pods may use of the capacity.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Conditions: Launched, Registered, Initialized, Ready, Drifted, Consolidatable, …
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastPodEventTime is when a pod last arrived on or left the node; consolidation
	// waits consolidateAfter from it.
	// +optional
	LastPodEventTime metav1.Time `json:"lastPodEventTime,omitempty"`
}

// NodeClaim condition types.
const (
	ConditionTypeLaunched            = "Launched"
	ConditionTypeRegistered          = "Registered"
	ConditionTypeInitialized         = "Initialized"
	ConditionTypeReady               = "Ready"
	ConditionTypeDrifted             = "Drifted"
	ConditionTypeConsolidatable      = "Consolidatable"
	ConditionTypeDisruptionReason    = "DisruptionReason"
	ConditionTypeInstanceTerminating = "InstanceTerminating"
)
