package aws

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Tags Tailor puts on what it launches, as Karpenter names them.
const (
	TagNodeClaim = v1.Group + "/nodeclaim"
	TagNodePool  = v1.NodePoolLabelKey
	TagNodeClass = awsv1.Group + "/ec2nodeclass"
	// TagNodeClassHash records the NodeClass hash an instance launched with, for
	// drift when the claim does not carry the annotation.
	TagNodeClassHash = AnnotationNodeClassHash
	TagEKSCluster    = "eks:eks-cluster-name"
)

// ClusterTag is the tag that marks an instance as the cluster's (value "owned").
func ClusterTag(cluster string) string { return "kubernetes.io/cluster/" + cluster }

// maxFleetTypes caps the instance types of one fleet request, as EC2 limits its
// overrides; the cheapest are kept.
const maxFleetTypes = 60

// ProviderID is an instance's provider ID: aws:///<zone>/<instance-id>.
func ProviderID(zone, instanceID string) string { return "aws:///" + zone + "/" + instanceID }

// ParseProviderID returns the instance ID of a provider ID.
func ParseProviderID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, "aws:///")
	i := strings.LastIndex(rest, "/")
	if !ok || i < 0 || !strings.HasPrefix(rest[i+1:], "i-") {
		return "", fmt.Errorf("provider ID %q is not of the form aws:///<zone>/<instance-id>", providerID)
	}
	return rest[i+1:], nil
}

// InstanceTags are the tags of a claim's instance and its volumes: the NodeClass's
// tags, then Tailor's, which the user's cannot replace.
func InstanceTags(claim *v1.NodeClaim, nc *awsv1.EC2NodeClass, cluster string) map[string]string {
	tags := maps.Clone(nc.Spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[TagNodeClaim] = claim.Name
	tags[TagNodePool] = claim.Labels[v1.NodePoolLabelKey]
	tags[TagNodeClass] = nc.Name
	tags[TagNodeClassHash] = NodeClassHash(nc)
	tags[ClusterTag(cluster)] = "owned"
	tags[TagEKSCluster] = cluster
	return tags
}

// TemplateTags are the tags a launch template gives what it makes besides the
// instance and its volumes (its network interfaces): the instance's, less the
// claim's name, since one template serves every claim of its configuration.
func TemplateTags(instanceTags map[string]string) map[string]string {
	out := maps.Clone(instanceTags)
	delete(out, TagNodeClaim)
	return out
}

// Override is one way the fleet may fill the request: an instance type in a subnet.
type Override struct {
	InstanceType string
	SubnetID     string
	Zone         string
	Price        float64
}

// LaunchGroup is the overrides that share a launch template: one AMI, one max
// pods (the kubelet's setting differs by instance type) and, for a reserved
// launch, one capacity reservation the template targets.
type LaunchGroup struct {
	AMI           awsv1.AMI
	MaxPods       int32
	ReservationID string
	// EFA is how many EFA interfaces the group's instances get (see EFAInterfaces).
	EFA       int
	Overrides []Override
	// TemplateID is the group's launch template, once made.
	TemplateID string
}

// FleetPlan is a launch: the capacity type and the overrides by launch template.
type FleetPlan struct {
	CapacityType string
	// ReservationType is the kind of the reservations a reserved launch targets
	// (one kind per launch: a capacity block launches as its own market type).
	ReservationType awsv1.CapacityReservationType
	// ReservationInterruptible: the reservations are interruptible ones, bought
	// as reserved capacity of that reservation type.
	ReservationInterruptible bool
	Groups                   []LaunchGroup
	// Types are the instance types planned, by name, to describe what launched.
	Types map[string]*scheduling.InstanceType
}

// PlanFleet chooses how to launch a claim: every instance type its requirements
// admit, with an available offering in a zone of the NodeClass's subnets, the
// claim's zones and capacity types; reserved when allowed and one of reservations
// (see Reservations) has room, spot when allowed and offered, on-demand otherwise;
// one subnet per zone (the first in the status, the one with the most free
// addresses); the cheapest maxFleetTypes types. InsufficientCapacityError when
// nothing is left.
func PlanFleet(claim *v1.NodeClaim, types []*scheduling.InstanceType, subnets []awsv1.Subnet, amis []awsv1.AMI, reservations []Reservation) (FleetPlan, error) {
	reqs, err := scheduling.FromNodePool(claim.Spec.Requirements, nil)
	if err != nil {
		return FleetPlan{}, fmt.Errorf("nodeclaim %s: %w", claim.Name, err)
	}
	subnetOf := map[string]string{}
	for _, s := range subnets {
		if !allows(reqs, LabelTopologyZoneID, s.ZoneID) {
			continue
		}
		if _, ok := subnetOf[s.Zone]; !ok {
			subnetOf[s.Zone] = s.ID
		}
	}
	// roomIn are the reservations a reserved offering of the type may launch into.
	roomIn := func(name, zone string, kind *reservationKind) []Reservation {
		var out []Reservation
		for _, r := range reservations {
			if r.InstanceType == name && r.Zone == zone && r.Available > 0 && (kind == nil || r.kind() == *kind) && reservationAllowed(reqs, r) {
				out = append(out, r)
			}
		}
		return out
	}
	var kind *reservationKind
	usable := func(name string, o scheduling.Offering, captype string) bool {
		_, hasSubnet := subnetOf[o.Zone]
		ok := o.Available && o.CapacityType == captype && hasSubnet &&
			allows(reqs, v1.LabelZone, o.Zone) && allows(reqs, v1.CapacityTypeLabelKey, o.CapacityType)
		if captype == CapacityTypeReserved {
			return ok && len(roomIn(name, o.Zone, kind)) > 0
		}
		// Spot and on-demand nodes carry no reservation labels.
		return ok && !needsReservation(reqs)
	}
	var admitted []*scheduling.InstanceType
	for _, it := range types {
		if _, ok := reqs.Intersects(it.Requirements); ok {
			admitted = append(admitted, it)
		}
	}
	offered := func(captype string) bool {
		return slices.ContainsFunc(admitted, func(it *scheduling.InstanceType) bool {
			return slices.ContainsFunc(it.Offerings, func(o scheduling.Offering) bool { return usable(it.Name, o, captype) })
		})
	}
	captype := CapacityTypeOnDemand
	switch {
	case offered(CapacityTypeReserved):
		captype = CapacityTypeReserved
		// One kind per launch (capacity blocks and interruptible reservations are
		// markets of their own), in the order of preference.
		for _, k := range reservationKinds {
			if kind = &k; offered(CapacityTypeReserved) {
				break
			}
		}
	case offered(CapacityTypeSpot):
		captype = CapacityTypeSpot
	}
	type candidate struct {
		it        *scheduling.InstanceType
		overrides []Override
		reserved  []string // the reservation of each override
		cheapest  float64
	}
	var candidates []candidate
	for _, it := range admitted {
		c := candidate{it: it}
		for _, o := range it.Offerings {
			if !usable(it.Name, o, captype) {
				continue
			}
			ov := Override{InstanceType: it.Name, SubnetID: subnetOf[o.Zone], Zone: o.Zone, Price: o.Price}
			if captype == CapacityTypeReserved {
				for _, r := range roomIn(it.Name, o.Zone, kind) {
					c.overrides = append(c.overrides, ov)
					c.reserved = append(c.reserved, r.ID)
				}
			} else {
				c.overrides = append(c.overrides, ov)
				c.reserved = append(c.reserved, "")
			}
			if len(c.overrides) == 1 || o.Price < c.cheapest {
				c.cheapest = o.Price
			}
		}
		if len(c.overrides) > 0 {
			candidates = append(candidates, c)
		}
	}
	if len(candidates) == 0 {
		return FleetPlan{}, &cloudprovider.InsufficientCapacityError{}
	}
	slices.SortFunc(candidates, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.cheapest, b.cheapest), strings.Compare(a.it.Name, b.it.Name))
	})
	candidates = candidates[:min(len(candidates), maxFleetTypes)]

	plan := FleetPlan{CapacityType: captype, Types: map[string]*scheduling.InstanceType{}}
	if kind != nil {
		plan.ReservationType, plan.ReservationInterruptible = kind.Type, kind.Interruptible
	}
	type groupKey struct {
		ami         string
		maxPods     int32
		reservation string
	}
	groups := map[groupKey]*LaunchGroup{}
	var order []groupKey
	var noAMI []string
	for _, c := range candidates {
		ami, ok := AMIFor(amis, c.it.Requirements.Labels())
		if !ok {
			noAMI = append(noAMI, c.it.Name)
			continue
		}
		pods := c.it.Capacity[corev1.ResourcePods]
		for i, ov := range c.overrides {
			key := groupKey{ami.ID, int32(pods.Value()), c.reserved[i]}
			g, ok := groups[key]
			if !ok {
				g = &LaunchGroup{AMI: ami, MaxPods: key.maxPods, ReservationID: key.reservation}
				groups[key] = g
				order = append(order, key)
			}
			g.Overrides = append(g.Overrides, ov)
		}
		plan.Types[c.it.Name] = c.it
	}
	if len(order) == 0 {
		return FleetPlan{}, fmt.Errorf("nodeclaim %s: no AMI of its NodeClass fits any of its instance types (%s)", claim.Name, strings.Join(noAMI, ", "))
	}
	for _, k := range order {
		plan.Groups = append(plan.Groups, *groups[k])
	}
	return plan, nil
}

func allows(reqs scheduling.Requirements, key, value string) bool {
	r, ok := reqs.Get(key)
	return !ok || r.Has(value)
}

// RootVolumeSize is the size of the volume the kubelet's root directory is on: the
// block device mapping marked rootVolume, or the family's default (Bottlerocket
// keeps it on its data volume).
func RootVolumeSize(nc *awsv1.EC2NodeClass) resource.Quantity {
	mappings := BlockDeviceMappings(nc)
	for _, m := range mappings {
		if m.RootVolume && m.EBS != nil && m.EBS.VolumeSize != nil {
			return *m.EBS.VolumeSize
		}
	}
	want := "/dev/xvda"
	switch {
	case nc.AMIFamily() == awsv1.AMIFamilyBottlerocket:
		want = "/dev/xvdb"
	case windowsBuilds[nc.AMIFamily()] != "":
		want = "/dev/sda1"
	}
	for _, m := range mappings {
		if deref(m.DeviceName) == want && m.EBS != nil && m.EBS.VolumeSize != nil {
			return *m.EBS.VolumeSize
		}
	}
	return resource.Quantity{}
}

// BlockDeviceMappings are the NodeClass's, or its family's defaults: a 20Gi gp3
// root volume (Bottlerocket: a 4Gi OS volume and a 20Gi data volume; Windows, whose
// images boot from /dev/sda1: 50Gi), encrypted.
func BlockDeviceMappings(nc *awsv1.EC2NodeClass) []*awsv1.BlockDeviceMapping {
	if len(nc.Spec.BlockDeviceMappings) > 0 {
		return nc.Spec.BlockDeviceMappings
	}
	volume := func(device, size string, root bool) *awsv1.BlockDeviceMapping {
		q := resource.MustParse(size)
		return &awsv1.BlockDeviceMapping{DeviceName: aws.String(device), RootVolume: root,
			EBS: &awsv1.BlockDevice{VolumeSize: &q, VolumeType: aws.String("gp3"), Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true)}}
	}
	switch nc.AMIFamily() {
	case awsv1.AMIFamilyBottlerocket:
		return []*awsv1.BlockDeviceMapping{volume("/dev/xvda", "4Gi", false), volume("/dev/xvdb", "20Gi", true)}
	case awsv1.AMIFamilyCustom:
		return nil
	case awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025:
		return []*awsv1.BlockDeviceMapping{volume("/dev/sda1", "50Gi", true)}
	}
	return []*awsv1.BlockDeviceMapping{volume("/dev/xvda", "20Gi", true)}
}

// LaunchTemplateInput is what one launch template holds.
type LaunchTemplateInput struct {
	Cluster         string
	NodeClass       *awsv1.EC2NodeClass
	ImageID         string
	UserData        string
	SecurityGroups  []string
	InstanceProfile string
	// CapacityReservationID, when set, is the reservation the template launches
	// into (a capacity block's when CapacityBlock). Otherwise, when
	// AvoidOpenReservations, the template keeps instances out of open reservations,
	// so that what is launched as spot or on-demand is that.
	CapacityReservationID string
	CapacityBlock         bool
	AvoidOpenReservations bool
	// InterruptibleReservation: the reservation is an interruptible one, which
	// instances enter through its own market type.
	InterruptibleReservation bool
	// InterfaceTags tag the network interfaces of the instances (see
	// TemplateTags).
	InterfaceTags map[string]string
	// PlacementGroupID is the placement group the instances launch into.
	PlacementGroupID string
	// IPv6 says the cluster is IPv6: the NodeClass's ipPrefixCount is then a count
	// of IPv6 prefixes, as the VPC CNI hands pods addresses of the cluster's family.
	IPv6 bool
	// EFA is how many EFA interfaces the instances get (see templateNetwork).
	EFA int
	// Tenancy is the instances' tenancy; empty or default is shared hardware.
	Tenancy string
}

// LaunchTemplate returns the template's name and data. The name hashes the data,
// so a change to any of it makes a new template and templates are shared by every
// launch that needs the same.
func LaunchTemplate(in LaunchTemplateInput) (string, *ec2types.RequestLaunchTemplateData) {
	nc := in.NodeClass
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:            aws.String(in.ImageID),
		IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(in.InstanceProfile)},
		Monitoring:         &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(deref(nc.Spec.DetailedMonitoring))},
		MetadataOptions:    metadataOptions(nc.Spec.MetadataOptions),
		BlockDeviceMappings: func() []ec2types.LaunchTemplateBlockDeviceMappingRequest {
			var out []ec2types.LaunchTemplateBlockDeviceMappingRequest
			for _, m := range BlockDeviceMappings(nc) {
				out = append(out, blockDevice(m))
			}
			return out
		}(),
	}
	if in.UserData != "" {
		data.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(in.UserData)))
	}
	if len(in.InterfaceTags) > 0 {
		// A fleet tags instances and volumes, not network interfaces: the template does.
		data.TagSpecifications = []ec2types.LaunchTemplateTagSpecificationRequest{{
			ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: ec2Tags(in.InterfaceTags)}}
	}
	switch {
	case in.CapacityReservationID != "":
		data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(in.CapacityReservationID)}}
		switch {
		case in.CapacityBlock:
			data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
		case in.InterruptibleReservation:
			data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeInterruptibleCapacityReservation}
		}
	case in.AvoidOpenReservations:
		data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationPreference: ec2types.CapacityReservationPreferenceNone}
	}
	if in.PlacementGroupID != "" || (in.Tenancy != "" && in.Tenancy != TenancyDefault) {
		// By ID, which also names a group shared from another account.
		data.Placement = &ec2types.LaunchTemplatePlacementRequest{Tenancy: ec2types.Tenancy(in.Tenancy)}
		if in.PlacementGroupID != "" {
			data.Placement.GroupId = aws.String(in.PlacementGroupID)
		}
	}
	data.CpuOptions = cpuOptions(nc.Spec.CPUOptions)
	// A public address, prefixes, connection tracking and EFA are set per network
	// interface, which then carries the groups.
	if data.NetworkInterfaces = templateNetwork(in); data.NetworkInterfaces == nil {
		data.SecurityGroupIds = in.SecurityGroups
	}
	raw, _ := json.Marshal(struct {
		Data    *ec2types.RequestLaunchTemplateData
		Context *string
	}{data, nc.Spec.Context})
	h := fnv.New64a()
	_, _ = h.Write(raw)
	return fmt.Sprintf("tailor.sh/%s/%d", in.Cluster, h.Sum64()), data
}

// metadataOptions are the NodeClass's, with Karpenter's defaults: IMDSv2 required,
// one hop, IPv6 endpoint off.
func metadataOptions(m *awsv1.MetadataOptions) *ec2types.LaunchTemplateInstanceMetadataOptionsRequest {
	out := &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
		HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
		HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6Disabled,
		HttpPutResponseHopLimit: aws.Int32(1),
		HttpTokens:              ec2types.LaunchTemplateHttpTokensStateRequired,
	}
	if m == nil {
		return out
	}
	if m.HTTPEndpoint != nil {
		out.HttpEndpoint = ec2types.LaunchTemplateInstanceMetadataEndpointState(*m.HTTPEndpoint)
	}
	if m.HTTPProtocolIPv6 != nil {
		out.HttpProtocolIpv6 = ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(*m.HTTPProtocolIPv6)
	}
	if m.HTTPPutResponseHopLimit != nil {
		out.HttpPutResponseHopLimit = aws.Int32(int32(*m.HTTPPutResponseHopLimit))
	}
	if m.HTTPTokens != nil {
		out.HttpTokens = ec2types.LaunchTemplateHttpTokensState(*m.HTTPTokens)
	}
	return out
}

func blockDevice(m *awsv1.BlockDeviceMapping) ec2types.LaunchTemplateBlockDeviceMappingRequest {
	out := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: m.DeviceName}
	if e := m.EBS; e != nil {
		ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{
			DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, KmsKeyId: e.KMSKeyID,
			SnapshotId: e.SnapshotID, VolumeType: ec2types.VolumeType(deref(e.VolumeType)),
			VolumeInitializationRate: e.VolumeInitializationRate,
		}
		if e.IOPS != nil {
			ebs.Iops = aws.Int32(int32(*e.IOPS))
		}
		if e.Throughput != nil {
			ebs.Throughput = aws.Int32(int32(*e.Throughput))
		}
		if e.VolumeSize != nil {
			// EBS sizes are whole GiB.
			gib := (e.VolumeSize.Value() + (1<<30 - 1)) >> 30
			ebs.VolumeSize = aws.Int32(int32(gib))
		}
		out.Ebs = ebs
	}
	return out
}

// FleetInput is the CreateFleet request of a plan whose launch groups have
// templates (IDs in the groups' order).
func FleetInput(plan FleetPlan, templateIDs []string, clientToken string, tags map[string]string) *ec2.CreateFleetInput {
	var configs []ec2types.FleetLaunchTemplateConfigRequest
	for i, g := range plan.Groups {
		c := ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
				LaunchTemplateId: aws.String(templateIDs[i]), Version: aws.String("$Latest"),
			},
		}
		for _, o := range g.Overrides {
			c.Overrides = append(c.Overrides, ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType: ec2types.InstanceType(o.InstanceType), SubnetId: aws.String(o.SubnetID),
				AvailabilityZone: aws.String(o.Zone),
			})
		}
		configs = append(configs, c)
	}
	tagged := ec2Tags(tags)
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		ClientToken:           aws.String(clientToken),
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(1),
			DefaultTargetCapacityType: targetCapacityType(plan),
		},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tagged},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tagged},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: tagged},
		},
	}
	switch in.TargetCapacitySpecification.DefaultTargetCapacityType {
	case ec2types.DefaultTargetCapacityTypeSpot:
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	case ec2types.DefaultTargetCapacityTypeReservedCapacity:
		in.ReservedCapacityOptions = &ec2types.ReservedCapacityOptionsRequest{
			ReservationTypes: []ec2types.FleetReservationType{ec2types.FleetReservationTypeInterruptibleCapacityReservation}}
	case ec2types.DefaultTargetCapacityTypeOnDemand:
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	return in
}

// targetCapacityType is what the fleet buys: a reserved launch is on-demand
// capacity whose launch templates target the reservations, the capacity-block
// market for capacity blocks, reserved capacity for interruptible reservations.
func targetCapacityType(plan FleetPlan) ec2types.DefaultTargetCapacityType {
	switch {
	case plan.CapacityType == CapacityTypeSpot:
		return ec2types.DefaultTargetCapacityTypeSpot
	case plan.CapacityType == CapacityTypeReserved && plan.ReservationType == awsv1.CapacityReservationTypeCapacityBlock:
		return ec2types.DefaultTargetCapacityTypeCapacityBlock
	case plan.CapacityType == CapacityTypeReserved && plan.ReservationInterruptible:
		return ec2types.DefaultTargetCapacityTypeReservedCapacity
	}
	return ec2types.DefaultTargetCapacityTypeOnDemand
}

// unfulfillable are the fleet error codes that mean an offering cannot be had now,
// as Karpenter reads them: the offering is avoided for a while and the claim's
// pods are planned again on others. MaxFleetCountExceeded (the account's quota of
// fleet requests) is one: instant fleets go as soon as they launch, so the quota
// frees up.
var unfulfillable = []string{
	"InsufficientInstanceCapacity", "MaxSpotInstanceCountExceeded", "VcpuLimitExceeded",
	"UnfulfillableCapacity", "Unsupported", "InsufficientFreeAddressesInSubnet", "ReservationCapacityExceeded",
	"MaxFleetCountExceeded",
}

// codeSpotRoleMissing is the fleet error of a spot launch in an account without
// the EC2 Spot service-linked role, which the caller may not create: no spot
// instance launches until someone creates it, so all of spot is avoided for a
// while (and on-demand launched, where allowed), as Karpenter does.
const codeSpotRoleMissing = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"

// SpotRoleMissing reports a fleet answer that says the account lacks the EC2 Spot
// service-linked role.
func SpotRoleMissing(out *ec2.CreateFleetOutput) bool {
	return slices.ContainsFunc(out.Errors, func(e ec2types.CreateFleetError) bool { return deref(e.ErrorCode) == codeSpotRoleMissing })
}

// Launched is the instance a fleet request launched.
type Launched struct {
	InstanceID, InstanceType, Zone, CapacityType, ImageID string
	// ReservationID, ReservationType and ReservationInterruptible are the
	// reservation a reserved launch took.
	ReservationID            string
	ReservationType          awsv1.CapacityReservationType
	ReservationInterruptible bool
}

// ReadFleet reads a fleet answer: the instance it launched, and the offerings it
// found without capacity (to be marked unavailable even when an instance launched).
// With no instance, the error is an InsufficientCapacityError when capacity was
// what lacked.
func ReadFleet(out *ec2.CreateFleetOutput, plan FleetPlan) (Launched, []cloudprovider.UnavailableOffering, error) {
	zoneOfSubnet := map[string]string{}
	for _, g := range plan.Groups {
		for _, o := range g.Overrides {
			zoneOfSubnet[o.SubnetID] = o.Zone
		}
	}
	zone := func(o *ec2types.FleetLaunchTemplateOverrides) string {
		if o == nil {
			return ""
		}
		if z := deref(o.AvailabilityZone); z != "" {
			return z
		}
		return zoneOfSubnet[deref(o.SubnetId)]
	}
	var ice []cloudprovider.UnavailableOffering
	var errs []error
	// capacity are the codes of the errors that mean capacity lacked, once each.
	var capacity []string
	for _, e := range out.Errors {
		code := deref(e.ErrorCode)
		var o *ec2types.FleetLaunchTemplateOverrides
		if e.LaunchTemplateAndOverrides != nil {
			o = e.LaunchTemplateAndOverrides.Overrides
		}
		switch {
		case slices.Contains(unfulfillable, code) && o != nil:
			ice = append(ice, cloudprovider.UnavailableOffering{InstanceType: string(o.InstanceType), Zone: zone(o), CapacityType: plan.CapacityType})
		case code == codeSpotRoleMissing:
			// All of spot is short (see SpotRoleMissing), not this offering.
		default:
			errs = append(errs, fmt.Errorf("%s: %s", code, deref(e.ErrorMessage)))
			continue
		}
		if msg := code + ": " + deref(e.ErrorMessage); !slices.Contains(capacity, msg) {
			capacity = append(capacity, msg)
		}
	}
	for _, inst := range out.Instances {
		if len(inst.InstanceIds) == 0 {
			continue
		}
		var o *ec2types.FleetLaunchTemplateOverrides
		if inst.LaunchTemplateAndOverrides != nil {
			o = inst.LaunchTemplateAndOverrides.Overrides
		}
		l := Launched{InstanceID: inst.InstanceIds[0], InstanceType: string(inst.InstanceType), Zone: zone(o), CapacityType: plan.CapacityType}
		// A reserved instance is on-demand to the fleet.
		if plan.CapacityType != CapacityTypeReserved {
			if inst.Lifecycle == ec2types.InstanceLifecycleSpot {
				l.CapacityType = CapacityTypeSpot
			} else if inst.Lifecycle == ec2types.InstanceLifecycleOnDemand {
				l.CapacityType = CapacityTypeOnDemand
			}
		}
		if l.InstanceType == "" && o != nil {
			l.InstanceType = string(o.InstanceType)
		}
		var template string
		if lt := inst.LaunchTemplateAndOverrides; lt != nil && lt.LaunchTemplateSpecification != nil {
			template = deref(lt.LaunchTemplateSpecification.LaunchTemplateId)
		}
		// The group is the one of the instance's launch template, else the first
		// with its type and zone.
		for _, g := range plan.Groups {
			if template != "" && g.TemplateID != "" && g.TemplateID != template {
				continue
			}
			if slices.ContainsFunc(g.Overrides, func(ov Override) bool {
				return ov.InstanceType == l.InstanceType && (l.Zone == "" || ov.Zone == l.Zone)
			}) {
				l.ImageID = g.AMI.ID
				if plan.CapacityType == CapacityTypeReserved {
					l.ReservationID, l.ReservationType, l.ReservationInterruptible = g.ReservationID, plan.ReservationType, plan.ReservationInterruptible
				}
				break
			}
		}
		return l, ice, nil
	}
	if len(capacity) > 0 || len(errs) == 0 {
		// Capacity lacked: the claim's pods go elsewhere. Its message says why,
		// for the claim's event.
		err := error(&cloudprovider.InsufficientCapacityError{Offerings: ice})
		if len(capacity) > 0 {
			err = fmt.Errorf("%w (%s)", err, strings.Join(capacity, "; "))
		}
		return Launched{}, ice, err
	}
	return Launched{}, ice, fmt.Errorf("the fleet launched nothing: %w", errors.Join(errs...))
}

// ec2Tags are tags in EC2's form, by key.
func ec2Tags(tags map[string]string) []ec2types.Tag {
	var out []ec2types.Tag
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}
