package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SimNodeClass configures nodes of the simulated cloud: which instance-type catalog
// it sells, how long launches and registrations take, and which offerings are out of
// capacity. NodePools point at it with nodeClassRef {group: tailor.sh, kind:
// SimNodeClass}.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=simnodeclasses,scope=Cluster,categories=tailor
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Catalog",type="string",JSONPath=".spec.catalog"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type SimNodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SimNodeClassSpec   `json:"spec,omitempty"`
	Status SimNodeClassStatus `json:"status,omitempty"`
}

// SimNodeClassList is a list of SimNodeClasses.
//
// +kubebuilder:object:root=true
type SimNodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SimNodeClass `json:"items"`
}

// SimNodeClassSpec is the simulated cloud's configuration.
type SimNodeClassSpec struct {
	// Catalog names the embedded instance-type catalog to sell.
	// +kubebuilder:validation:Enum:={aws-us-east-1}
	// +kubebuilder:default:="aws-us-east-1"
	// +optional
	Catalog string `json:"catalog,omitempty"`
	// LaunchDelay is how long a launch takes before the instance exists.
	// +kubebuilder:validation:Pattern=`^([0-9]+(ms|s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:default:="0s"
	// +optional
	LaunchDelay metav1.Duration `json:"launchDelay,omitempty"`
	// RegistrationDelay is how long a launched instance takes to register its Node.
	// +kubebuilder:validation:Pattern=`^([0-9]+(ms|s|m|h))+$`
	// +kubebuilder:validation:Type="string"
	// +kubebuilder:default:="0s"
	// +optional
	RegistrationDelay metav1.Duration `json:"registrationDelay,omitempty"`
	// ImageID is the image new instances boot; changing it drifts existing ones.
	// +kubebuilder:default:="sim-image-1"
	// +kubebuilder:validation:MinLength=1
	// +optional
	ImageID string `json:"imageID,omitempty"`
	// UnavailableOfferings are out of capacity: launching them fails with an
	// insufficient-capacity error. The instance-type list still shows them, as a
	// cloud's price list would; Tailor learns from the failed launch.
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	UnavailableOfferings []Offering `json:"unavailableOfferings,omitempty"`
}

// Offering names an instance type in a zone with a capacity type; an empty field
// matches any.
type Offering struct {
	// +optional
	InstanceType string `json:"instanceType,omitempty"`
	// +optional
	Zone string `json:"zone,omitempty"`
	// +kubebuilder:validation:Enum:={spot,on-demand,""}
	// +optional
	CapacityType string `json:"capacityType,omitempty"`
}

// SimNodeClassStatus reports readiness.
type SimNodeClassStatus struct {
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
