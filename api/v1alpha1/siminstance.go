package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SimInstance is one instance of the simulated cloud. The cloud, not Tailor, owns
// it: it exists from launch until termination, whatever happens to the NodeClaim
// that asked for it.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=siminstances,scope=Cluster,categories=tailor
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".spec.instanceType"
// +kubebuilder:printcolumn:name="Zone",type="string",JSONPath=".spec.zone"
// +kubebuilder:printcolumn:name="Capacity",type="string",JSONPath=".spec.capacityType"
// +kubebuilder:printcolumn:name="NodeClaim",type="string",JSONPath=".spec.nodeClaim"
// +kubebuilder:printcolumn:name="State",type="string",JSONPath=".status.state"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type SimInstance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SimInstanceSpec   `json:"spec"`
	Status SimInstanceStatus `json:"status,omitempty"`
}

// SimInstanceList is a list of SimInstances.
//
// +kubebuilder:object:root=true
type SimInstanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimInstance `json:"items"`
}

// SimInstanceSpec is what was launched.
type SimInstanceSpec struct {
	// NodeClaim is the claim the instance was launched for.
	NodeClaim string `json:"nodeClaim"`
	// NodeClass is the SimNodeClass it was launched with.
	NodeClass    string `json:"nodeClass"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
	ImageID      string `json:"imageID"`
	// Price is the hourly price in USD, as a decimal string.
	Price string `json:"price"`
	// RegisterAfter is when the instance's Node appears.
	RegisterAfter metav1.Time `json:"registerAfter"`
	// InterruptAt, when set, is when a spot instance will be reclaimed: its notice.
	// +optional
	InterruptAt *metav1.Time `json:"interruptAt,omitempty"`
}

// SimInstanceStatus is where the instance is in its life.
type SimInstanceStatus struct {
	// State is Running once the instance's Node registered, and empty while it
	// boots (a write saved per instance).
	// +kubebuilder:validation:Enum:={Running}
	// +optional
	State string `json:"state,omitempty"`
	// NodeName is the Node the instance registered as.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
}
