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
	// Latency draws each launch's and registration's delay from a model of a real
	// cloud, registering nodes out of the order they were launched, failing some
	// launches for insufficient capacity and answering slowly. Unset, or with
	// profile None, launches take launchDelay and registrations registrationDelay
	// exactly, and nothing fails unless unavailableOfferings says so.
	// +optional
	Latency *Latency `json:"latency,omitempty"`
	// Kubelet overrides the kubelet settings that decide a node's allocatable, with
	// the fields and meaning of an EC2NodeClass's spec.kubelet. Unset, a node keeps
	// back what an EKS node does: kube-reserved from its cpu and pods, 100Mi and 10%
	// of its root volume for eviction.
	// +optional
	Kubelet *KubeletConfiguration `json:"kubelet,omitempty"`
	// PerNodeCost is what each node costs per hour besides its instance, as a
	// plain decimal in the catalog's currency ("0.0072": an EC2 node's 20Gi gp3
	// root volume and public IPv4 address, say): the simulated cloud's stand-in
	// for the volumes and addresses a real cloud bills per node. The scheduling
	// engine adds it to every new node's price, as it adds an EC2NodeClass's.
	// +kubebuilder:validation:Pattern:=`^[0-9]{1,4}(\.[0-9]{1,9})?$`
	// +kubebuilder:validation:MaxLength:=14
	// +optional
	PerNodeCost string `json:"perNodeCost,omitempty"`
}

// LatencyProfile names a latency model of the simulated cloud.
//
// +kubebuilder:validation:Enum:={None,Realistic}
type LatencyProfile string

const (
	// LatencyNone: launchDelay and registrationDelay exactly, no failures.
	LatencyNone LatencyProfile = "None"
	// LatencyRealistic: delays drawn from log-normal distributions in the range
	// EC2 shows, insufficient-capacity errors on a share of launches, a slow API.
	LatencyRealistic LatencyProfile = "Realistic"
)

// Latency is how the simulated cloud's launches and API calls are timed.
//
// With profile Realistic each launch draws, from log-normal distributions:
// the launch call (the instance exists after a median of 1.5 s), the instance's
// boot until its Node registers (a median of 25 s, a 95th percentile of about
// 45 s, at most 2 minutes), and whether its offering has just run out of
// capacity (insufficientCapacityPercent of launches); terminating or describing
// an instance takes a median of 200 ms. A nonzero launchDelay or
// registrationDelay replaces the median of its draw.
type Latency struct {
	// Profile is None (the default) or Realistic.
	// +kubebuilder:default:="None"
	// +optional
	Profile LatencyProfile `json:"profile,omitempty"`
	// Seed makes the draws reproducible: under one seed the n-th launch of the
	// NodeClass (counted from the controller's start) draws the same delays in
	// every run, whichever claim it is for.
	// +optional
	Seed int64 `json:"seed,omitempty"`
	// InsufficientCapacityPercent is the share of launches, in percent, that find
	// the offering they would take just run out of capacity: the launch fails with
	// an insufficient-capacity error naming it, and the offering stays out of
	// capacity for three minutes. Unset, 2 with profile Realistic.
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	InsufficientCapacityPercent *int32 `json:"insufficientCapacityPercent,omitempty"`
}

// KubeletConfiguration is the part of an EC2NodeClass's kubelet block that decides
// a node's allocatable.
type KubeletConfiguration struct {
	// MaxPods is the most pods a node runs; unset, its network's limit.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	MaxPods *int32 `json:"maxPods,omitempty"`
	// PodsPerCore caps the pods at this many per vCPU (never above maxPods); 0 is no cap.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	PodsPerCore *int32 `json:"podsPerCore,omitempty"`
	// SystemReserved is kept back for the OS's daemons (none unless set).
	// +kubebuilder:validation:XValidation:message="valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"
	// +kubebuilder:validation:XValidation:message="systemReserved value cannot be a negative resource quantity",rule="self.all(x, !self[x].startsWith('-'))"
	// +kubebuilder:validation:XValidation:message="systemReserved values must be resource quantities",rule="self.all(x, isQuantity(self[x]))"
	// +kubebuilder:validation:MaxProperties:=4
	// +optional
	SystemReserved map[string]string `json:"systemReserved,omitempty"`
	// KubeReserved is kept back for the kubelet and container runtime; each resource
	// set replaces the computed default.
	// +kubebuilder:validation:XValidation:message="valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"
	// +kubebuilder:validation:XValidation:message="kubeReserved value cannot be a negative resource quantity",rule="self.all(x, !self[x].startsWith('-'))"
	// +kubebuilder:validation:XValidation:message="kubeReserved values must be resource quantities",rule="self.all(x, isQuantity(self[x]))"
	// +kubebuilder:validation:MaxProperties:=4
	// +optional
	KubeReserved map[string]string `json:"kubeReserved,omitempty"`
	// EvictionHard are the hard eviction thresholds, each a quantity or a percentage
	// of capacity; memory.available and nodefs.available take room from pods.
	// +kubebuilder:validation:XValidation:message="valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +kubebuilder:validation:MaxProperties:=6
	// +optional
	EvictionHard map[string]EvictionThreshold `json:"evictionHard,omitempty"`
	// EvictionSoft are the soft eviction thresholds; where one is above its hard
	// threshold, it is the room kept.
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoft are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +kubebuilder:validation:MaxProperties:=6
	// +optional
	EvictionSoft map[string]EvictionThreshold `json:"evictionSoft,omitempty"`
}

// EvictionThreshold is a non-negative quantity ("100Mi") or a percentage of the
// signal's capacity from 0% to 100% ("10%"). A pattern, not a CEL rule, checks it:
// a regex over every map value would exceed the API server's CEL cost budget.
//
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:Pattern=`^((100([.]0{1,2})?|[0-9]{1,2}([.][0-9]{1,2})?)%|\+?(([0-9]+([.][0-9]*)?)|([.][0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+([.][0-9]*)?)|([.][0-9]+))))?)$`
type EvictionThreshold string

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
