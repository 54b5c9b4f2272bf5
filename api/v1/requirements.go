package v1

import (
	"encoding/json"
	"fmt"
	"time"
)

// NodeSelectorOperator relates a label key to values. Beyond the Kubernetes operators
// it has Gte and Lte, so "at least 4 cpus" needs no off-by-one.
// +kubebuilder:validation:Enum:={In,NotIn,Exists,DoesNotExist,Gt,Lt,Gte,Lte}
type NodeSelectorOperator string

const (
	NodeSelectorOpIn           NodeSelectorOperator = "In"
	NodeSelectorOpNotIn        NodeSelectorOperator = "NotIn"
	NodeSelectorOpExists       NodeSelectorOperator = "Exists"
	NodeSelectorOpDoesNotExist NodeSelectorOperator = "DoesNotExist"
	NodeSelectorOpGt           NodeSelectorOperator = "Gt"
	NodeSelectorOpLt           NodeSelectorOperator = "Lt"
	NodeSelectorOpGte          NodeSelectorOperator = "Gte"
	NodeSelectorOpLte          NodeSelectorOperator = "Lte"
)

// NodeSelectorRequirementWithMinValues is a node selector requirement that can also
// ask for flexibility: MinValues distinct values of Key must remain among a new node's
// instance-type options.
type NodeSelectorRequirementWithMinValues struct {
	// Key is a label key.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.sh\" is restricted",rule="self in ['karpenter.sh/capacity-type', 'karpenter.sh/nodepool'] || !self.find('^([^/]+)').endsWith('karpenter.sh')"
	// +kubebuilder:validation:XValidation:message="label \"kubernetes.io/hostname\" is restricted",rule="self != 'kubernetes.io/hostname'"
	// +kubebuilder:validation:XValidation:message="label domain \"karpenter.k8s.aws\" is restricted",rule="self in ['karpenter.k8s.aws/instance-tenancy', 'karpenter.k8s.aws/capacity-reservation-type', 'karpenter.k8s.aws/capacity-reservation-id', 'karpenter.k8s.aws/capacity-reservation-interruptible', 'karpenter.k8s.aws/ec2nodeclass', 'karpenter.k8s.aws/instance-encryption-in-transit-supported', 'karpenter.k8s.aws/instance-category', 'karpenter.k8s.aws/instance-hypervisor', 'karpenter.k8s.aws/instance-family', 'karpenter.k8s.aws/instance-generation', 'karpenter.k8s.aws/instance-local-nvme', 'karpenter.k8s.aws/instance-size', 'karpenter.k8s.aws/instance-cpu', 'karpenter.k8s.aws/instance-cpu-manufacturer', 'karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz', 'karpenter.k8s.aws/instance-memory', 'karpenter.k8s.aws/instance-ebs-bandwidth', 'karpenter.k8s.aws/instance-network-bandwidth', 'karpenter.k8s.aws/instance-gpu-name', 'karpenter.k8s.aws/instance-gpu-manufacturer', 'karpenter.k8s.aws/instance-gpu-count', 'karpenter.k8s.aws/instance-gpu-memory', 'karpenter.k8s.aws/instance-accelerator-name', 'karpenter.k8s.aws/instance-accelerator-manufacturer', 'karpenter.k8s.aws/instance-accelerator-count', 'karpenter.k8s.aws/instance-capability-flex', 'karpenter.k8s.aws/placement-group-id', 'karpenter.k8s.aws/placement-group-partition'] || !self.find('^([^/]+)').endsWith('karpenter.k8s.aws')"
	// +required
	Key string `json:"key"`
	// Operator relates the key to the values.
	// +required
	Operator NodeSelectorOperator `json:"operator"`
	// Values: several for In and NotIn, one integer for Gt, Lt, Gte and Lte, none for
	// Exists and DoesNotExist.
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +optional
	Values []string `json:"values,omitempty"`
	// MinValues is the least number of distinct values of Key a new node's
	// instance-type options must keep.
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=50
	// +optional
	MinValues *int `json:"minValues,omitempty"`
}

// NodeClassReference points at a cloud provider's NodeClass object.
type NodeClassReference struct {
	// Kind of the NodeClass, e.g. SimNodeClass or EC2NodeClass.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="kind may not be empty"
	// +required
	Kind string `json:"kind"`
	// Name of the NodeClass.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="name may not be empty"
	// +required
	Name string `json:"name"`
	// Group of the NodeClass's API, e.g. karpenter.k8s.aws.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="group may not be empty"
	// +kubebuilder:validation:Pattern=`^[^/]*$`
	// +required
	Group string `json:"group"`
}

// Never is the value of a NillableDuration that never elapses.
const Never = "Never"

// NillableDuration is a duration that may also be "Never". The zero value is unset,
// which the API server replaces with the field's default.
type NillableDuration struct {
	Duration *time.Duration `json:"-"`
	Never    bool           `json:"-"`
}

// MustParseNillableDuration parses "Never" or a Go duration; it panics on bad input
// and is meant for constants and tests.
func MustParseNillableDuration(s string) NillableDuration {
	d, err := ParseNillableDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// ParseNillableDuration parses "Never" or a Go duration such as "720h".
func ParseNillableDuration(s string) (NillableDuration, error) {
	if s == Never {
		return NillableDuration{Never: true}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return NillableDuration{}, fmt.Errorf("duration %q: want a duration such as 30s, 5m or 720h, or %q", s, Never)
	}
	return NillableDuration{Duration: &d}, nil
}

// IsZero reports an unset duration, so that `omitzero` leaves it to the default.
func (d NillableDuration) IsZero() bool { return d.Duration == nil && !d.Never }

// Get returns the duration and true, or false when it is "Never" or unset.
func (d NillableDuration) Get() (time.Duration, bool) {
	if d.Never || d.Duration == nil {
		return 0, false
	}
	return *d.Duration, true
}

// String is "Never", the duration, or "" when unset.
func (d NillableDuration) String() string {
	switch {
	case d.Never:
		return Never
	case d.Duration != nil:
		return d.Duration.String()
	}
	return ""
}

// MarshalJSON writes "Never", the duration as a string, or null when unset.
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	if d.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(d.String())
}

// UnmarshalJSON reads "Never" or a duration string.
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = NillableDuration{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string, got %s", b)
	}
	parsed, err := ParseNillableDuration(s)
	if err != nil {
		return err
	}
	*d = parsed
	return nil
}
