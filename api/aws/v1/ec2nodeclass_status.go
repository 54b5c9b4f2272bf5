package v1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClassStatus is what the selectors of an EC2NodeClass resolved to, and
// whether nodes can be launched with it.
type EC2NodeClassStatus struct {
	// Subnets are the subnets the subnet selector terms found.
	// +optional
	Subnets []Subnet `json:"subnets,omitempty"`
	// SecurityGroups are the security groups the security group selector terms found.
	// +optional
	SecurityGroups []SecurityGroup `json:"securityGroups,omitempty"`
	// CapacityReservations are the capacity reservations the capacity reservation
	// selector terms found.
	// +optional
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`
	// AMIs are the images the AMI selector terms found, each with the instance-type
	// requirements it can boot.
	// +optional
	AMIs []AMI `json:"amis,omitempty"`
	// InstanceProfile is the instance profile nodes launch with: the one made for
	// spec.role, or spec.instanceProfile.
	// +optional
	InstanceProfile string `json:"instanceProfile,omitempty"`
	// Conditions: Ready, and what it is made of — SubnetsReady, SecurityGroupsReady,
	// AMIsReady, InstanceProfileReady, ValidationSucceeded, CapacityReservationsReady,
	// PlacementGroupReady. Like Karpenter, the resolved placement group itself is
	// not in the status: only whether it was found and is available.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Subnet is a subnet nodes may launch into.
type Subnet struct {
	// ID is the subnet's id.
	// +required
	ID string `json:"id"`
	// Zone is the subnet's availability zone.
	// +required
	Zone string `json:"zone"`
	// ZoneID is the availability zone's id (the same across accounts).
	// +optional
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is a security group nodes get.
type SecurityGroup struct {
	// ID is the group's id.
	// +required
	ID string `json:"id"`
	// Name is the group's name.
	// +optional
	Name string `json:"name,omitempty"`
}

// AMI is an image nodes may boot.
type AMI struct {
	// ID is the image's id.
	// +required
	ID string `json:"id"`
	// Deprecated is true when the image is past its deprecation time; it is used only
	// when no other image fits.
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`
	// Name is the image's name.
	// +optional
	Name string `json:"name,omitempty"`
	// Requirements are what an instance type must satisfy to boot the image
	// (architecture, accelerators, …).
	// +required
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
}

// CapacityReservation is a capacity reservation nodes may launch into.
type CapacityReservation struct {
	// AvailabilityZone is where the reserved capacity is.
	// +required
	AvailabilityZone string `json:"availabilityZone"`
	// EndTime is when the reservation ends and its capacity is released.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// ID is the reservation's id.
	// +kubebuilder:validation:Pattern:="^cr-[0-9a-z]+$"
	// +required
	ID string `json:"id"`
	// InstanceMatchCriteria is "open" when any matching launch may use the
	// reservation, "targeted" when only launches naming it may.
	// +kubebuilder:validation:Enum:={open,targeted}
	// +required
	InstanceMatchCriteria string `json:"instanceMatchCriteria"`
	// InstanceType is the instance type reserved.
	// +required
	InstanceType string `json:"instanceType"`
	// OwnerID is the AWS account that owns the reservation.
	// +kubebuilder:validation:Pattern:="^[0-9]{12}$"
	// +required
	OwnerID string `json:"ownerID"`
	// ReservationType is an on-demand capacity reservation ("default") or a
	// capacity block ("capacity-block"). Left empty, the API server defaults it.
	// +kubebuilder:validation:Enum:={default,capacity-block}
	// +kubebuilder:default=default
	// +optional
	ReservationType CapacityReservationType `json:"reservationType,omitempty"`
	// Interruptible reservations are lent out of another reservation, whose owner
	// may take the capacity back with two minutes' warning.
	// +optional
	Interruptible bool `json:"interruptible,omitempty"`
	// State is "expiring" once a capacity block is close enough to its end that EC2
	// may reclaim its instances, "active" before. Left empty, the API server defaults
	// it.
	// +kubebuilder:validation:Enum:={active,expiring}
	// +kubebuilder:default=active
	// +optional
	State CapacityReservationState `json:"state,omitempty"`
}

// CapacityReservationType is the kind of a capacity reservation.
type CapacityReservationType string

const (
	CapacityReservationTypeDefault       CapacityReservationType = "default"
	CapacityReservationTypeCapacityBlock CapacityReservationType = "capacity-block"
)

// CapacityReservationState is whether a reservation can still be launched into.
type CapacityReservationState string

const (
	CapacityReservationStateActive   CapacityReservationState = "active"
	CapacityReservationStateExpiring CapacityReservationState = "expiring"
)

// EC2NodeClass condition types. Ready is the conjunction of the others (see
// ReadyDependents); NodePools read only Ready.
const (
	ConditionTypeReady                     = "Ready"
	ConditionTypeSubnetsReady              = "SubnetsReady"
	ConditionTypeSecurityGroupsReady       = "SecurityGroupsReady"
	ConditionTypeAMIsReady                 = "AMIsReady"
	ConditionTypeInstanceProfileReady      = "InstanceProfileReady"
	ConditionTypeCapacityReservationsReady = "CapacityReservationsReady"
	ConditionTypePlacementGroupReady       = "PlacementGroupReady"
	ConditionTypeValidationSucceeded       = "ValidationSucceeded"
)

// Reasons of a derived Ready condition.
const (
	// ReasonDependenciesReady: every dependent condition is True.
	ReasonDependenciesReady = "Ready"
	// ReasonDependenciesUnknown: some dependent condition is not reported yet, or
	// was reported for an older generation.
	ReasonDependenciesUnknown = "ReconcilingDependents"
)

// ReadyDependents are the condition types that together make the EC2NodeClass Ready.
// CapacityReservationsReady and PlacementGroupReady count only when the spec selects
// capacity reservations or a placement group: a NodeClass that asks for none does not
// wait on them.
func (in *EC2NodeClass) ReadyDependents() []string {
	deps := []string{
		ConditionTypeAMIsReady,
		ConditionTypeSubnetsReady,
		ConditionTypeSecurityGroupsReady,
		ConditionTypeInstanceProfileReady,
		ConditionTypeValidationSucceeded,
	}
	if len(in.Spec.CapacityReservationSelectorTerms) > 0 {
		deps = append(deps, ConditionTypeCapacityReservationsReady)
	}
	if in.Spec.PlacementGroupSelector != nil {
		deps = append(deps, ConditionTypePlacementGroupReady)
	}
	return deps
}

// SetCondition records c, stamped with the object's generation (a zero
// LastTransitionTime is set by meta.SetStatusCondition, as everywhere in Tailor),
// and then derives Ready from ReadyDependents. It reports whether the conditions
// changed, so a reconciler writes status only when they did.
func (in *EC2NodeClass) SetCondition(c metav1.Condition) bool {
	c.ObservedGeneration = in.Generation
	changed := meta.SetStatusCondition(&in.Status.Conditions, c)
	return in.deriveReady() || changed
}

// deriveReady sets Ready: False with the first False dependent's reason and message,
// else Unknown while a dependent is missing or stale, else True.
func (in *EC2NodeClass) deriveReady() bool {
	ready := metav1.Condition{Type: ConditionTypeReady, Status: metav1.ConditionTrue,
		Reason: ReasonDependenciesReady, ObservedGeneration: in.Generation}
	var unknown []string
	for _, t := range in.ReadyDependents() {
		dep := meta.FindStatusCondition(in.Status.Conditions, t)
		switch {
		case dep != nil && dep.Status == metav1.ConditionFalse && dep.ObservedGeneration == in.Generation:
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, dep.Reason, dep.Message
			return meta.SetStatusCondition(&in.Status.Conditions, ready)
		case dep == nil || dep.Status != metav1.ConditionTrue || dep.ObservedGeneration != in.Generation:
			unknown = append(unknown, t)
		}
	}
	if len(unknown) > 0 {
		ready.Status, ready.Reason = metav1.ConditionUnknown, ReasonDependenciesUnknown
		ready.Message = "waiting for " + strings.Join(unknown, ", ")
	}
	return meta.SetStatusCondition(&in.Status.Conditions, ready)
}

// IsReady reports whether nodes can be launched with the EC2NodeClass as it is now:
// Ready is True and was derived for the current generation.
func (in *EC2NodeClass) IsReady() bool {
	c := meta.FindStatusCondition(in.Status.Conditions, ConditionTypeReady)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == in.Generation
}
