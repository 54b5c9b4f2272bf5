package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CapacityBuffer asks an autoscaler to keep spare room in the cluster: room for a
// number of pods of one shape that no pod runs in yet, so that new pods start at
// once instead of waiting for a node.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=capacitybuffers,scope=Namespaced,shortName=cb
// +kubebuilder:printcolumn:name="Strategy",type="string",JSONPath=".spec.provisioningStrategy",description="The strategy to be used."
// +kubebuilder:printcolumn:name="PodTemplate",type="string",JSONPath=".status.podTemplateRef.name",description="The name of the PodTemplate used."
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas",description="The actual number of buffer chunks."
// +kubebuilder:printcolumn:name="ConditionsType",type="string",JSONPath=".status.conditions[*].type",description="List of all condition types."
// +kubebuilder:printcolumn:name="ConditionsStatus",type="string",JSONPath=".status.conditions[*].status",description="List of all condition statuses."
// +kubebuilder:printcolumn:name="ConditionsReason",type="string",JSONPath=".status.conditions[*].reason",description="List of all condition reasons."
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description="The age of the CapacityBuffer."
// +kubebuilder:deprecatedversion:warning="autoscaling.x-k8s.io/v1alpha1 CapacityBuffer is deprecated; use autoscaling.x-k8s.io/v1beta1"
type CapacityBuffer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says what room to keep.
	// +kubebuilder:validation:Required
	Spec CapacityBufferSpec `json:"spec"`

	// Status says what the autoscaler made of the spec.
	// +optional
	Status CapacityBufferStatus `json:"status,omitempty"`
}

// LocalObjectRef names an object in the buffer's namespace.
type LocalObjectRef struct {
	// Name of the object.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// ResourceName names a resource, as core/v1's ResourceName does.
type ResourceName string

// ResourceList maps resource names to quantities, as core/v1's ResourceList does.
type ResourceList map[ResourceName]resource.Quantity

// ScalableRef names a workload that has a scale subresource.
type ScalableRef struct {
	// APIGroup of the workload; empty for the core group.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Kind of the workload (Deployment, StatefulSet, ...).
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Name of the workload.
	// +kubebuilder:validation:Required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// CapacityBufferSpec is the room to keep: chunks of the shape of one pod, from a
// PodTemplate or a workload's pods, as many as replicas or a percentage of the
// workload's replicas say (the larger), at most as many as limits allow.
//
// +kubebuilder:object:generate=false
// +kubebuilder:validation:XValidation:rule="!has(self.podTemplateRef) || has(self.replicas) || has(self.limits)",message="If X is set, replicas or limits must also be set"
// +kubebuilder:validation:XValidation:rule="!(has(self.podTemplateRef) && has(self.scalableRef))",message="You must define either PodTemplateRef or ScalableRef, but not both"
type CapacityBufferSpec struct {
	// ProvisioningStrategy says how the room is kept; the default,
	// "buffer.x-k8s.io/active-capacity", has the autoscaler launch nodes for
	// placeholder pods that exist only in its plans.
	// +kubebuilder:default="buffer.x-k8s.io/active-capacity"
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`

	// PodTemplateRef names a PodTemplate in the buffer's namespace: the shape of
	// one chunk. Exactly one of podTemplateRef and scalableRef is set.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`

	// ScalableRef names a workload whose pods give the shape of one chunk, and
	// whose replicas a percentage is of. Exactly one of podTemplateRef and
	// scalableRef is set.
	// +optional
	ScalableRef *ScalableRef `json:"scalableRef,omitempty"`

	// Replicas is the number of chunks to keep. With percentage, the larger of
	// the two; limits cap it. Without replicas and percentage, as many chunks as
	// limits hold.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:ExclusiveMinimum=false
	Replicas *int32 `json:"replicas,omitempty"`

	// Percentage of the scalableRef workload's replicas to keep as chunks,
	// rounded up (only with scalableRef).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:ExclusiveMinimum=false
	Percentage *int32 `json:"percentage,omitempty"`

	// Limits cap the chunks by their summed requests (cpu, memory, ...); alone,
	// they ask for as many chunks as fit in them.
	// +optional
	Limits *ResourceList `json:"limits,omitempty"`
}

// DeepCopyInto copies the spec into out. It is written by hand: controller-gen
// copies a pointer to a named map type (Limits) into a value of the unnamed type.
func (in *CapacityBufferSpec) DeepCopyInto(out *CapacityBufferSpec) {
	*out = *in
	if in.ProvisioningStrategy != nil {
		s := *in.ProvisioningStrategy
		out.ProvisioningStrategy = &s
	}
	if in.PodTemplateRef != nil {
		r := *in.PodTemplateRef
		out.PodTemplateRef = &r
	}
	if in.ScalableRef != nil {
		r := *in.ScalableRef
		out.ScalableRef = &r
	}
	if in.Replicas != nil {
		n := *in.Replicas
		out.Replicas = &n
	}
	if in.Percentage != nil {
		n := *in.Percentage
		out.Percentage = &n
	}
	if in.Limits != nil {
		l := in.Limits.DeepCopy()
		out.Limits = &l
	}
}

// DeepCopy copies the spec.
func (in *CapacityBufferSpec) DeepCopy() *CapacityBufferSpec {
	if in == nil {
		return nil
	}
	out := new(CapacityBufferSpec)
	in.DeepCopyInto(out)
	return out
}

// CapacityBufferStatus is what the autoscaler made of the spec.
type CapacityBufferStatus struct {
	// PodTemplateRef names the PodTemplate the chunks were made from.
	// +optional
	PodTemplateRef *LocalObjectRef `json:"podTemplateRef,omitempty"`

	// Replicas is the number of chunks the autoscaler keeps room for.
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// PodTemplateGeneration is the generation of the PodTemplate read.
	// +optional
	PodTemplateGeneration *int64 `json:"podTemplateGeneration,omitempty"`

	// Conditions: ReadyForProvisioning (the spec was resolved into chunks),
	// Provisioning (the autoscaler keeps room for them), LimitedByQuotas.
	// +optional
	// +patchMergeKey=type
	// +patchStrategy=merge
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`

	// ProvisioningStrategy is the strategy the autoscaler applied.
	// +optional
	ProvisioningStrategy *string `json:"provisioningStrategy,omitempty"`
}

// CapacityBufferList is a list of CapacityBuffers.
//
// +kubebuilder:object:root=true
type CapacityBufferList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CapacityBuffer `json:"items"`
}
