package aws

import (
	"cmp"
	"strconv"
	"strings"
	"time"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Instance is what the provider reads of an EC2 instance.
type Instance struct {
	ID   string
	Type string
	Zone string
	// ZoneID is the zone's ID (use1-az1).
	ZoneID         string
	CapacityType   string
	ImageID        string
	SubnetID       string
	SecurityGroups []string
	State          ec2types.InstanceStateName
	Tags           map[string]string
	LaunchTime     time.Time
	// PlacementGroupID is the instance's placement group, Partition its partition
	// (from 1) in a partition group.
	PlacementGroupID string
	Partition        int32
	// Tenancy is the instance's tenancy (TenancyDefault or TenancyDedicated).
	Tenancy string
	// CapacityReservationID is the reservation the instance is in, if any;
	// CapacityReservationType its kind.
	CapacityReservationID   string
	CapacityReservationType awsv1.CapacityReservationType
	// CapacityReservationInterruptible: the reservation is an interruptible one.
	CapacityReservationInterruptible bool
}

// InstanceOf reads an EC2 instance.
func InstanceOf(in ec2types.Instance) Instance {
	out := Instance{ID: deref(in.InstanceId), Type: string(in.InstanceType), ImageID: deref(in.ImageId),
		SubnetID: deref(in.SubnetId), CapacityType: CapacityTypeOnDemand, Tags: map[string]string{},
		LaunchTime: deref(in.LaunchTime)}
	if in.Placement != nil {
		out.Zone, out.ZoneID = deref(in.Placement.AvailabilityZone), deref(in.Placement.AvailabilityZoneId)
		out.PlacementGroupID, out.Partition = deref(in.Placement.GroupId), deref(in.Placement.PartitionNumber)
		out.Tenancy = string(in.Placement.Tenancy)
	}
	switch {
	case in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot:
		out.CapacityType = CapacityTypeSpot
	case deref(in.CapacityReservationId) != "":
		out.CapacityType = CapacityTypeReserved
		out.CapacityReservationID = *in.CapacityReservationId
		out.CapacityReservationType = awsv1.CapacityReservationTypeDefault
		switch in.InstanceLifecycle {
		case ec2types.InstanceLifecycleTypeCapacityBlock:
			out.CapacityReservationType = awsv1.CapacityReservationTypeCapacityBlock
		case ec2types.InstanceLifecycleTypeInterruptibleCapacityReservation:
			out.CapacityReservationInterruptible = true
		}
	}
	if in.State != nil {
		out.State = in.State.Name
	}
	for _, g := range in.SecurityGroups {
		out.SecurityGroups = append(out.SecurityGroups, deref(g.GroupId))
	}
	for _, t := range in.Tags {
		out.Tags[deref(t.Key)] = deref(t.Value)
	}
	return out
}

// withoutReservations is the instance as it is read with the ReservedCapacity gate
// off: one in a reservation is on-demand.
func (i Instance) withoutReservations() Instance {
	if i.CapacityType == CapacityTypeReserved {
		i.CapacityType, i.CapacityReservationID, i.CapacityReservationType = CapacityTypeOnDemand, "", ""
		i.CapacityReservationInterruptible = false
	}
	return i
}

// Gone reports a terminated instance (one shutting down still exists).
func (i Instance) Gone() bool {
	return i.State == ec2types.InstanceStateNameTerminated
}

// NodeClaim describes an instance as the NodeClaim a provider returns: named after
// the claim it was launched for, with its NodeClass, the labels of its type and of
// where and how it was bought, and its node's capacity and allocatable when its
// type is known.
func (i Instance) NodeClaim(it *scheduling.InstanceType) *v1.NodeClaim {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: i.Tags[TagNodeClaim], Labels: map[string]string{},
		CreationTimestamp: metav1.NewTime(i.LaunchTime)}}
	if name := i.Tags[TagNodeClass]; name != "" {
		nc.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: name}
		nc.Labels[LabelNodeClass] = name
	}
	if it != nil {
		for k, v := range it.Requirements.Labels() {
			nc.Labels[k] = v
		}
		nc.Status.Capacity = it.Capacity.DeepCopy()
		nc.Status.Allocatable = allocatable.Node{Capacity: it.Capacity, Overhead: it.Overhead}.Allocatable()
	}
	nc.Labels[v1.LabelInstanceType] = i.Type
	nc.Labels[v1.LabelZone] = i.Zone
	if i.ZoneID != "" {
		nc.Labels[LabelTopologyZoneID] = i.ZoneID
	} else {
		// The type's zone IDs are those of all its zones.
		delete(nc.Labels, LabelTopologyZoneID)
	}
	nc.Labels[v1.LabelRegion] = regionOf(i.Zone)
	nc.Labels[v1.CapacityTypeLabelKey] = i.CapacityType
	nc.Labels[LabelInstanceTenancy] = cmp.Or(i.Tenancy, TenancyDefault)
	if i.CapacityType == CapacityTypeReserved {
		nc.Labels[LabelCapacityReservationID] = i.CapacityReservationID
		nc.Labels[LabelCapacityReservationType] = string(i.CapacityReservationType)
		nc.Labels[LabelCapacityReservationInterruptible] = strconv.FormatBool(i.CapacityReservationInterruptible)
	}
	for k, v := range placementLabels(i.PlacementGroupID, i.Partition) {
		nc.Labels[k] = v
	}
	if pool := i.Tags[TagNodePool]; pool != "" {
		nc.Labels[v1.NodePoolLabelKey] = pool
	}
	if h := i.Tags[TagNodeClassHash]; h != "" {
		nc.Annotations = map[string]string{AnnotationNodeClassHash: h, AnnotationNodeClassHashVersion: NodeClassHashVersion}
	}
	nc.Status.ProviderID = ProviderID(i.Zone, i.ID)
	nc.Status.ImageID = i.ImageID
	return nc
}

// regionOf strips the zone letter: us-east-1a → us-east-1.
func regionOf(zone string) string {
	return strings.TrimRight(zone, "abcdefghijklmnopqrstuvwxyz")
}
