package aws

import (
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// LabelInstanceTenancy is the tenancy a node runs with, as Karpenter's AWS
// provider labels it: default (shared hardware) or dedicated.
const LabelInstanceTenancy = labelPrefix + "instance-tenancy"

// Tenancies, as EC2 and the label name them.
const (
	TenancyDefault   = string(ec2types.TenancyDefault)
	TenancyDedicated = string(ec2types.TenancyDedicated)
)

// NodeClassFields are the EC2NodeClass settings that change which instance types
// can be launched and what their nodes hold; instance types are built per value.
type NodeClassFields struct {
	// InstanceStoreRAID0: the instance-store disks are the node's ephemeral storage.
	InstanceStoreRAID0 bool
	// NetworkInterfaces are spec.networkInterfaces (nil: one primary interface).
	NetworkInterfaces []awsv1.NetworkInterface
	// ConnectionTracking: connection-tracking timeouts are set, which needs Nitro.
	ConnectionTracking bool
	// NestedVirtualization: the processor must offer nested virtualization.
	NestedVirtualization bool
	// Tenancy is the tenancy nodes launch with (TenancyDefault when empty).
	Tenancy string
}

// FieldsOf are the NodeClass's fields that shape its instance types, for nodes of
// the tenancy.
func FieldsOf(nc *awsv1.EC2NodeClass, tenancy string) NodeClassFields {
	f := NodeClassFields{
		InstanceStoreRAID0: deref(nc.Spec.InstanceStorePolicy) == awsv1.InstanceStorePolicyRAID0,
		ConnectionTracking: nc.Spec.ConnectionTracking != nil,
		NestedVirtualization: nc.Spec.CPUOptions != nil &&
			deref(nc.Spec.CPUOptions.NestedVirtualization) == string(ec2types.NestedVirtualizationSpecificationEnabled),
		Tenancy: tenancy,
	}
	for _, ni := range nc.Spec.NetworkInterfaces {
		if ni != nil {
			f.NetworkInterfaces = append(f.NetworkInterfaces, *ni)
		}
	}
	return f
}

// efaOnly counts the efa-only interfaces, those of card when card >= 0.
func (f NodeClassFields) efaOnly(card int32) int {
	n := 0
	for _, ni := range f.NetworkInterfaces {
		if ni.InterfaceType == awsv1.InterfaceTypeEFAOnly && (card < 0 || ni.NetworkCardIndex == card) {
			n++
		}
	}
	return n
}

// efaOnlyOnDefaultCard counts the efa-only interfaces on the type's default card.
func (f NodeClassFields) efaOnlyOnDefaultCard(info *ec2types.InstanceTypeInfo) int {
	if info.NetworkInfo == nil {
		return 0
	}
	return f.efaOnly(deref(info.NetworkInfo.DefaultNetworkCardIndex))
}

// Compatible says whether nodes of the type can launch with these fields, as EC2
// would take them: every configured interface on a card the type has, at a device
// index the card has, on a type with ENA, and no more efa-only interfaces than
// its EFA interfaces; connection tracking on Nitro; nested virtualization where
// the processor offers it.
func (f NodeClassFields) Compatible(info *ec2types.InstanceTypeInfo) bool {
	if f.ConnectionTracking && info.Hypervisor != ec2types.InstanceTypeHypervisorNitro {
		return false
	}
	if f.NestedVirtualization && (info.ProcessorInfo == nil ||
		!slices.Contains(info.ProcessorInfo.SupportedFeatures, ec2types.SupportedAdditionalProcessorFeatureNestedVirtualization)) {
		return false
	}
	if len(f.NetworkInterfaces) == 0 {
		return true
	}
	n := info.NetworkInfo
	if n == nil || n.EnaSupport == ec2types.EnaSupportUnsupported {
		return false
	}
	for _, ni := range f.NetworkInterfaces {
		card, ok := networkCard(n, ni.NetworkCardIndex)
		if !ok || ni.DeviceIndex >= deref(card.MaximumNetworkInterfaces) {
			return false
		}
	}
	if efa := f.efaOnly(-1); efa > 0 {
		if !deref(n.EfaSupported) || n.EfaInfo == nil || efa > int(deref(n.EfaInfo.MaximumEfaInterfaces)) {
			return false
		}
	}
	return true
}

// networkCard is the type's card of that index; a type that lists no cards has
// card 0 with all its interfaces.
func networkCard(n *ec2types.NetworkInfo, index int32) (ec2types.NetworkCardInfo, bool) {
	if len(n.NetworkCards) == 0 {
		return ec2types.NetworkCardInfo{NetworkCardIndex: aws.Int32(0), MaximumNetworkInterfaces: n.MaximumNetworkInterfaces}, index == 0
	}
	for _, c := range n.NetworkCards {
		if deref(c.NetworkCardIndex) == index {
			return c, true
		}
	}
	return ec2types.NetworkCardInfo{}, false
}

// TenancyFor is the tenancy a claim (or a NodePool's nodes) launches with, from
// its karpenter.k8s.aws/instance-tenancy requirement: dedicated only when that
// requirement rules default out, as Karpenter prefers default when both are
// allowed.
func TenancyFor(reqs []v1.NodeSelectorRequirementWithMinValues) string {
	r, err := scheduling.FromNodePool(reqs, nil)
	if err != nil {
		return TenancyDefault
	}
	t, ok := r.Get(LabelInstanceTenancy)
	if ok && !t.Has(TenancyDefault) && t.Has(TenancyDedicated) {
		return TenancyDedicated
	}
	return TenancyDefault
}

// templateNetwork is the launch template's network interfaces: the NodeClass's
// networkInterfaces; else, for a claim that asks for vpc.amazonaws.com/efa, one
// EFA interface on each of the type's first efa network cards (device 0 on the
// first card, 1 on the others, so the first card's stays the primary one); else
// one primary interface when a public address, prefixes or connection tracking
// are asked for (all are set per interface), or when the cluster is IPv6. Security
// groups then go on each interface that is not efa-only (EC2 refuses them at both
// levels). Nil: the groups go on the instance.
//
// In an IPv6 cluster every interface with addresses (not efa-only) asks for one
// IPv6 address and makes it its primary IPv6 address, as Karpenter's templates
// do: the boot agent registers the node with the primary interface's IPv6
// address and fails without one, whether or not the subnet assigns IPv6
// addresses on creation.
func templateNetwork(in LaunchTemplateInput) []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
	nc := in.NodeClass
	ct := connectionTracking(nc.Spec.ConnectionTracking)
	ipCounts := func(ni *ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest) {
		if n := nc.Spec.IPPrefixCount; n != nil {
			if in.IPv6 {
				ni.Ipv6PrefixCount = aws.Int32(*n)
			} else {
				ni.Ipv4PrefixCount = aws.Int32(*n)
			}
		}
	}
	ipv6Address := func(ni *ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest) {
		if in.IPv6 {
			ni.PrimaryIpv6, ni.Ipv6AddressCount = aws.Bool(true), aws.Int32(1)
		}
	}
	var out []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest
	switch {
	case len(nc.Spec.NetworkInterfaces) > 0:
		for _, ni := range nc.Spec.NetworkInterfaces {
			spec := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
				NetworkCardIndex: aws.Int32(ni.NetworkCardIndex), DeviceIndex: aws.Int32(ni.DeviceIndex),
				InterfaceType: aws.String(string(ni.InterfaceType)),
			}
			if ni.InterfaceType != awsv1.InterfaceTypeEFAOnly {
				// An efa-only interface has no IP addresses: no prefixes, public
				// address, groups or connection tracking.
				spec.Groups = in.SecurityGroups
				spec.AssociatePublicIpAddress = nc.Spec.AssociatePublicIPAddress
				spec.ConnectionTrackingSpecification = ct
				ipv6Address(&spec)
				if ni.NetworkCardIndex == 0 && ni.DeviceIndex == 0 {
					ipCounts(&spec)
				}
			}
			out = append(out, spec)
		}
	case in.EFA > 0:
		for card := range int32(in.EFA) {
			spec := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
				NetworkCardIndex: aws.Int32(card), DeviceIndex: aws.Int32(min(card, 1)),
				InterfaceType: aws.String(string(ec2types.NetworkInterfaceTypeEfa)), Groups: in.SecurityGroups,
				ConnectionTrackingSpecification: ct,
			}
			ipv6Address(&spec)
			if card == 0 {
				spec.AssociatePublicIpAddress = nc.Spec.AssociatePublicIPAddress
				ipCounts(&spec)
			}
			out = append(out, spec)
		}
	case nc.Spec.AssociatePublicIPAddress != nil || nc.Spec.IPPrefixCount != nil || ct != nil || in.IPv6:
		spec := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			DeviceIndex: aws.Int32(0), AssociatePublicIpAddress: nc.Spec.AssociatePublicIPAddress, Groups: in.SecurityGroups,
			ConnectionTrackingSpecification: ct,
		}
		ipCounts(&spec)
		ipv6Address(&spec)
		out = append(out, spec)
	}
	return out
}

func connectionTracking(c *awsv1.ConnectionTracking) *ec2types.ConnectionTrackingSpecificationRequest {
	if c == nil {
		return nil
	}
	return &ec2types.ConnectionTrackingSpecificationRequest{
		TcpEstablishedTimeout: c.TCPEstablishedTimeout, UdpStreamTimeout: c.UDPStreamTimeout, UdpTimeout: c.UDPTimeout,
	}
}

// cpuOptions are the template's CPU options: nested virtualization as asked.
func cpuOptions(c *awsv1.CPUOptions) *ec2types.LaunchTemplateCpuOptionsRequest {
	if c == nil || c.NestedVirtualization == nil {
		return nil
	}
	return &ec2types.LaunchTemplateCpuOptionsRequest{NestedVirtualization: ec2types.NestedVirtualizationSpecification(*c.NestedVirtualization)}
}

// EFAInterfaces is how many EFA interfaces a node of the type gets for the claim:
// all the type's (its vpc.amazonaws.com/efa) when the claim asks for EFA and the
// NodeClass does not list its own interfaces, else none.
func EFAInterfaces(claim *v1.NodeClaim, nc *awsv1.EC2NodeClass, it *scheduling.InstanceType) int {
	if len(nc.Spec.NetworkInterfaces) > 0 || it == nil {
		return 0
	}
	if _, ok := claim.Spec.Resources.Requests[ResourceEFA]; !ok {
		return 0
	}
	q := it.Capacity[ResourceEFA]
	return int(q.Value())
}

// splitByEFA splits each launch group so that every group's types get the same
// number of EFA interfaces (a launch template holds one interface list).
func splitByEFA(plan *FleetPlan, efa func(typ string) int) {
	var groups []LaunchGroup
	for _, g := range plan.Groups {
		var order []int
		byCount := map[int]*LaunchGroup{}
		for _, o := range g.Overrides {
			n := efa(o.InstanceType)
			sub, ok := byCount[n]
			if !ok {
				sub = &LaunchGroup{AMI: g.AMI, MaxPods: g.MaxPods, ReservationID: g.ReservationID, EFA: n}
				byCount[n] = sub
				order = append(order, n)
			}
			sub.Overrides = append(sub.Overrides, o)
		}
		for _, n := range order {
			groups = append(groups, *byCount[n])
		}
	}
	plan.Groups = groups
}

// ephemeralFromInstanceStore is the node's ephemeral storage with RAID0: the
// type's instance-store size, in GB as EC2 gives it; false without instance store.
func ephemeralFromInstanceStore(info *ec2types.InstanceTypeInfo) (int64, bool) {
	s := info.InstanceStorageInfo
	if s == nil || s.TotalSizeInGB == nil || *s.TotalSizeInGB <= 0 {
		return 0, false
	}
	return *s.TotalSizeInGB * 1000 * 1000 * 1000, true
}

// dedicatedPriced says why dedicated nodes cannot be planned: no type has a
// dedicated price (the embedded prices have none; they come from the Pricing
// API's Dedicated tenancy products), so none could be ranked.
func dedicatedPriced(tenancy string, prices Prices, types []*scheduling.InstanceType) error {
	if tenancy != TenancyDedicated || len(types) > 0 {
		return nil
	}
	if len(prices.Dedicated) == 0 {
		return fmt.Errorf("%s %s needs dedicated-tenancy prices, and none are known: the Pricing API has not answered with Dedicated tenancy products (the embedded prices have none)", LabelInstanceTenancy, TenancyDedicated)
	}
	return fmt.Errorf("%s %s: no instance type the EC2NodeClass can launch has a dedicated-tenancy price", LabelInstanceTenancy, TenancyDedicated)
}
