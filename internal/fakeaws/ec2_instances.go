package fakeaws

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// fleetRecord is a CreateFleet answer kept for its client token: the same request
// again gets the same answer and launches nothing, a different one with the same
// token is an IdempotentParameterMismatch, as EC2 does.
type fleetRecord struct {
	fingerprint string
	response    *createFleetResponse
}

type createFleetResponse struct {
	ec2Meta
	FleetID   string                   `xml:"fleetId"`
	Errors    []xmlCreateFleetError    `xml:"errorSet>item"`
	Instances []xmlCreateFleetInstance `xml:"fleetInstanceSet>item"`
}

// pool is one override of a fleet request: an instance type in a subnet, from a
// launch template.
type pool struct {
	spec     xmlFleetLaunchTemplateSpec
	override xmlFleetOverrides
	template *launchTemplate
	typ      *instanceType
	subnet   *Subnet
	image    *Image
	price    float64
	priority float64
	order    int
}

func (p *pool) echo() xmlLaunchTemplateAndOverrides {
	return xmlLaunchTemplateAndOverrides{LaunchTemplateSpecification: p.spec, Overrides: p.override}
}

var fleetRequestKeys = []string{
	"ExcessCapacityTerminationPolicy", "ReplaceUnhealthyInstances", "TerminateInstancesWithExpiration",
	"ValidFrom", "ValidUntil", "Context",
	"SpotOptions.InstanceInterruptionBehavior", "SpotOptions.InstancePoolsToUseCount", "SpotOptions.MaintenanceStrategies",
	"SpotOptions.MaxTotalPrice", "SpotOptions.MinTargetCapacity", "SpotOptions.SingleAvailabilityZone", "SpotOptions.SingleInstanceType",
	"OnDemandOptions.MaxTotalPrice", "OnDemandOptions.MinTargetCapacity", "OnDemandOptions.SingleAvailabilityZone",
	"OnDemandOptions.SingleInstanceType", "OnDemandOptions.CapacityReservationOptions",
	"TargetCapacitySpecification.OnDemandTargetCapacity", "TargetCapacitySpecification.SpotTargetCapacity",
	"TargetCapacitySpecification.TargetCapacityUnitType",
}

func (s *Server) createFleet(q *queryParams) (ec2Response, error) {
	token := q.str("ClientToken")
	fleetType := q.str("Type")
	total, _, err := q.optInt("TargetCapacitySpecification.TotalTargetCapacity")
	if err != nil {
		return nil, err
	}
	capacityType := q.str("TargetCapacitySpecification.DefaultTargetCapacityType")
	// Context is CreateFleet's reserved field: EC2 takes it as given; the fake keeps
	// it on the instances, for tests to see what was sent.
	fleetContext := q.str("Context")
	spotStrategy, odStrategy := q.str("SpotOptions.AllocationStrategy"), q.str("OnDemandOptions.AllocationStrategy")
	reservationTypes := q.list("ReservedCapacityOptions.ReservationType")
	specs, err := readTagSpecs(q, "TagSpecification")
	if err != nil {
		return nil, err
	}
	// An instant fleet tags what it makes: itself, its instances and their volumes.
	for rt := range specs {
		if !slices.Contains([]string{"fleet", "instance", "volume"}, rt) {
			return nil, badRequest("InvalidParameterValue", "The value '%s' for parameter TagSpecification.ResourceType is invalid. An instant fleet can tag resources of type fleet, instance and volume.", rt)
		}
	}
	type config struct {
		spec      xmlFleetLaunchTemplateSpec
		overrides []xmlFleetOverrides
	}
	var configs []config
	for _, p := range q.indices("LaunchTemplateConfigs") {
		sp := p + ".LaunchTemplateSpecification."
		c := config{spec: xmlFleetLaunchTemplateSpec{
			LaunchTemplateID: q.str(sp + "LaunchTemplateId"), LaunchTemplateName: q.str(sp + "LaunchTemplateName"), Version: q.str(sp + "Version"),
		}}
		for _, o := range q.indices(p + ".Overrides") {
			c.overrides = append(c.overrides, xmlFleetOverrides{
				InstanceType: q.str(o + ".InstanceType"), SubnetID: q.str(o + ".SubnetId"), AvailabilityZone: q.str(o + ".AvailabilityZone"),
				MaxPrice: q.str(o + ".MaxPrice"), Priority: q.str(o + ".Priority"), ImageID: q.str(o + ".ImageId"),
			})
			q.str(o + ".WeightedCapacity")
		}
		if len(c.overrides) == 0 {
			c.overrides = []xmlFleetOverrides{{}}
		}
		configs = append(configs, c)
	}
	q.accept(fleetRequestKeys...)
	q.accept("ReservedCapacityOptions.AllocationStrategy")
	if err := q.done(); err != nil {
		return nil, err
	}

	fingerprint := q.fingerprint()
	if token != "" {
		if rec := s.ec2.fleets[token]; rec != nil {
			if rec.fingerprint != fingerprint {
				return nil, badRequest("IdempotentParameterMismatch", "Client token %s was used for a different CreateFleet request.", token)
			}
			resp := *rec.response
			return &resp, nil
		}
	}
	if fleetType != "instant" {
		return nil, badRequest("InvalidParameterValue", "fakeaws serves only fleets of Type instant, not %q", fleetType)
	}
	if total < 1 {
		return nil, badRequest("InvalidTargetCapacitySpecification", "TotalTargetCapacity must be at least 1")
	}
	if len(configs) == 0 {
		return nil, badRequest("MissingParameter", "The request must contain the parameter LaunchTemplateConfigs")
	}
	var strategy string
	switch capacityType {
	case "spot":
		strategy = cmp.Or(spotStrategy, "lowest-price")
		if !slices.Contains([]string{"lowest-price", "diversified", "capacity-optimized", "capacity-optimized-prioritized", "price-capacity-optimized"}, strategy) {
			return nil, badRequest("InvalidParameterValue", "Value (%s) for parameter SpotOptions.AllocationStrategy is invalid.", strategy)
		}
	case "on-demand", "capacity-block":
		strategy = cmp.Or(odStrategy, "lowest-price")
		if !slices.Contains([]string{"lowest-price", "prioritized"}, strategy) {
			return nil, badRequest("InvalidParameterValue", "Value (%s) for parameter OnDemandOptions.AllocationStrategy is invalid.", strategy)
		}
	case "reserved-capacity":
		// Interruptible capacity reservations are bought as reserved capacity of
		// that reservation type.
		if !slices.Contains(reservationTypes, "interruptible-capacity-reservation") {
			return nil, badRequest("InvalidParameterValue", "A reserved-capacity fleet must name its ReservedCapacityOptions.ReservationType (interruptible-capacity-reservation)")
		}
		strategy = "lowest-price"
	default:
		return nil, badRequest("InvalidParameterValue", "Value (%s) for parameter DefaultTargetCapacityType is invalid. Valid values are spot, on-demand, capacity-block, reserved-capacity.", capacityType)
	}

	resp := &createFleetResponse{FleetID: "fleet-" + s.newUUIDLocked()}
	s.ec2.fleetTags[resp.FleetID] = cloneTags(specs["fleet"])
	fail := func(p *pool, code, format string, args ...any) {
		resp.Errors = append(resp.Errors, xmlCreateFleetError{
			LaunchTemplateAndOverrides: p.echo(), Lifecycle: capacityType, ErrorCode: code, ErrorMessage: fmt.Sprintf(format, args...),
		})
	}
	var candidates []*pool
	for _, c := range configs {
		lt, lterr := s.templateByRef(c.spec.LaunchTemplateID, c.spec.LaunchTemplateName)
		for _, o := range c.overrides {
			p := &pool{spec: c.spec, override: o, template: lt, order: len(candidates) + len(resp.Errors)}
			if lterr != nil {
				fail(p, lterr.Code, "%s", lterr.Message)
				continue
			}
			if code, msg := s.resolvePool(p, capacityType); code != "" {
				fail(p, code, "%s", msg)
				continue
			}
			if code, msg := s.accountRefuses(capacityType); code != "" {
				fail(p, code, "%s", msg)
				continue
			}
			candidates = append(candidates, p)
		}
	}
	// Every strategy the fake knows picks the cheapest pools first; the prioritized
	// ones put priority first. Real fleets weigh capacity as well, which the fake
	// has no model of beyond the insufficient-capacity knob.
	prioritized := strings.HasSuffix(strategy, "prioritized")
	slices.SortStableFunc(candidates, func(a, b *pool) int {
		if prioritized {
			if c := cmp.Compare(a.priority, b.priority); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(a.price, b.price); c != 0 {
			return c
		}
		return cmp.Compare(a.order, b.order)
	})
	reservationID := s.newIDLocked("r")
	byPool := map[*pool]*xmlCreateFleetInstance{}
	var launched []*pool
	left := total
	for _, p := range candidates {
		if left == 0 {
			break
		}
		if s.k.insufficient(Offering{InstanceType: p.typ.Name, Zone: p.subnet.Zone, CapacityType: capacityType}) {
			fail(p, "InsufficientInstanceCapacity", "We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity. You can currently get %s capacity by not specifying an Availability Zone in your request or choosing %s.",
				p.typ.Name, p.subnet.Zone, p.typ.Name, strings.Join(slices.DeleteFunc(slices.Clone(p.typ.Zones), func(z string) bool { return z == p.subnet.Zone }), ", "))
			continue
		}
		group, partition, code, msg := s.placeLocked(p.template, p.typ, p.subnet.Zone)
		if code != "" {
			fail(p, code, "%s", msg)
			continue
		}
		n := left
		var res *CapacityReservation
		if (capacityType == "capacity-block" || capacityType == "reserved-capacity") && p.template.ReservationID == "" {
			fail(p, "InvalidParameterValue", "A %s fleet must target a reservation in its launch template", capacityType)
			continue
		}
		if p.template.ReservationID != "" {
			res = s.reservationByID(p.template.ReservationID)
			if res != nil && (res.Type == "capacity-block") != (capacityType == "capacity-block") {
				fail(p, "InvalidParameterValue", "Reservation %s is of type %s and cannot be used by a %s launch", res.ID, res.Type, capacityType)
				continue
			}
			if res != nil && res.Interruptible && p.template.MarketType != "interruptible-capacity-reservation" {
				fail(p, "InvalidParameterValue", "Reservation %s is interruptible: its launch template must have the market type interruptible-capacity-reservation", res.ID)
				continue
			}
			if res != nil && res.Interruptible != (capacityType == "reserved-capacity") {
				fail(p, "InvalidParameterValue", "Reservation %s (interruptible: %t) cannot be used by a %s launch: interruptible reservations are launched into as reserved-capacity of type interruptible-capacity-reservation", res.ID, res.Interruptible, capacityType)
				continue
			}
			if res == nil || res.Cancelled || res.InstanceType != p.typ.Name || res.Zone != p.subnet.Zone || res.Available == 0 {
				fail(p, "ReservationCapacityExceeded", "The requested reservation %s does not have enough capacity for %s in %s", p.template.ReservationID, p.typ.Name, p.subnet.Zone)
				continue
			}
			n = min(n, res.Available)
			res.Available -= n
		}
		for range n {
			i := s.launchLocked(p, capacityType, reservationID, resp.FleetID, token, specs["instance"])
			i.FleetContext = fleetContext
			if group != nil {
				i.PlacementGroupID, i.PlacementGroupName, i.Partition = group.ID, group.Name, partition
			}
			if res != nil {
				i.Reservation = res.ID
			}
			fi := byPool[p]
			if fi == nil {
				fi = &xmlCreateFleetInstance{LaunchTemplateAndOverrides: p.echo(), Lifecycle: capacityType, InstanceType: p.typ.Name}
				byPool[p] = fi
				launched = append(launched, p)
			}
			fi.InstanceIDs = append(fi.InstanceIDs, i.ID)
		}
		left -= n
	}
	for _, p := range launched {
		resp.Instances = append(resp.Instances, *byPool[p])
	}
	if token != "" {
		s.ec2.fleets[token] = &fleetRecord{fingerprint: fingerprint, response: resp}
	}
	return resp, nil
}

// resolvePool fills in a pool's type, subnet, image and price, or says why EC2
// would not launch it (an error code and message for the fleet's errorSet).
func (s *Server) resolvePool(p *pool, capacityType string) (code, msg string) {
	o, lt := &p.override, p.template
	name := cmp.Or(o.InstanceType, lt.InstanceType)
	p.typ = s.inv.types[name]
	if p.typ == nil {
		return "InvalidParameterValue", fmt.Sprintf("Invalid instance type %q", name)
	}
	subnetID := cmp.Or(o.SubnetID, lt.SubnetID)
	for _, sn := range s.inv.subnets {
		if (subnetID != "" && sn.ID == subnetID) || (subnetID == "" && o.AvailabilityZone != "" && sn.Zone == o.AvailabilityZone) {
			p.subnet = sn
			break
		}
	}
	if p.subnet == nil {
		if subnetID == "" {
			return "MissingParameter", "The request must name a subnet (or an availability zone) for each override"
		}
		return "InvalidSubnetID.NotFound", fmt.Sprintf("The subnet ID '%s' does not exist", subnetID)
	}
	if o.AvailabilityZone != "" && o.AvailabilityZone != p.subnet.Zone {
		return "InvalidParameterValue", fmt.Sprintf("Subnet %s is in %s, not %s", p.subnet.ID, p.subnet.Zone, o.AvailabilityZone)
	}
	// EC2 echoes the zone of the chosen subnet in the overrides it returns.
	o.AvailabilityZone = p.subnet.Zone
	imageID := cmp.Or(o.ImageID, lt.ImageID)
	if imageID == "" {
		return "MissingParameter", "The request must contain the parameter ImageId"
	}
	for _, im := range s.inv.images {
		if im.ID == imageID {
			p.image = im
		}
	}
	if p.image == nil {
		return "InvalidAMIID.NotFound", fmt.Sprintf("The image id '[%s]' does not exist", imageID)
	}
	if p.image.Architecture != p.typ.Arch {
		return "InvalidParameterValue", fmt.Sprintf("The architecture '%s' of the specified instance type does not match the architecture '%s' of the specified AMI. Specify an instance type and an AMI that have matching architectures, and try again.", p.typ.Arch, p.image.Architecture)
	}
	if lt.ProfileName != "" || lt.ProfileARN != "" {
		if s.profileByRef(lt.ProfileName, lt.ProfileARN) == nil {
			return "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", cmp.Or(lt.ProfileName, lt.ProfileARN))
		}
	}
	for _, g := range lt.Groups {
		if !slices.ContainsFunc(s.inv.sgs, func(sg *SecurityGroup) bool { return sg.ID == g }) {
			return "InvalidGroup.NotFound", fmt.Sprintf("The security group '%s' does not exist", g)
		}
	}
	if !slices.Contains(p.typ.Zones, p.subnet.Zone) {
		return "Unsupported", fmt.Sprintf("Your requested instance type (%s) is not supported in your requested Availability Zone (%s).", p.typ.Name, p.subnet.Zone)
	}
	for _, check := range []func(*launchTemplate, *instanceType) (string, string){checkInterfaces, checkNetworkCards, checkCPUOptions, checkTenancy} {
		if code, msg := check(lt, p.typ); code != "" {
			return code, msg
		}
	}
	if code, msg := checkIPv6(lt, p.subnet); code != "" {
		return code, msg
	}
	if o.Priority != "" {
		pr, err := strconv.ParseFloat(o.Priority, 64)
		if err != nil {
			return "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter Priority is invalid.", o.Priority)
		}
		p.priority = pr
	}
	switch capacityType {
	case "spot":
		price, ok := p.typ.SpotPrice[p.subnet.Zone]
		if !ok {
			return "Unsupported", fmt.Sprintf("Spot instances of type %s are not offered in %s.", p.typ.Name, p.subnet.Zone)
		}
		if o.MaxPrice != "" {
			maxPrice, err := strconv.ParseFloat(o.MaxPrice, 64)
			if err != nil {
				return "InvalidParameterValue", fmt.Sprintf("Value (%s) for parameter MaxPrice is invalid.", o.MaxPrice)
			}
			if price > maxPrice {
				return "SpotMaxPriceTooLow", fmt.Sprintf("Your Spot request price of %s is lower than the minimum required Spot request fulfillment price of %.6f.", o.MaxPrice, price)
			}
		}
		p.price = price
	default:
		p.price = p.typ.OnDemandPrice
	}
	return "", ""
}

// checkInterfaces refuses what EC2 refuses of a launch template's network
// interfaces on an instance type: groups both on the instance and on interfaces;
// prefixes on a type not built on Nitro (prefix delegation needs it), or more
// IPv4 prefixes than the interface takes secondary addresses (its IPv4 addresses
// less the primary).
func checkInterfaces(lt *launchTemplate, t *instanceType) (code, msg string) {
	if lt.TopLevelGroups && len(lt.Interfaces) > 0 {
		return "InvalidParameterCombination", "Network interfaces and an instance-level security groups may not be specified on the same request"
	}
	for _, ni := range lt.Interfaces {
		if (ni.IPv4Prefixes > 0 || ni.IPv6Prefixes > 0) && !t.nitro() {
			return "InvalidParameterCombination", fmt.Sprintf("Prefix delegation is supported only on instances built on the Nitro System; %s is not", t.Name)
		}
		if ni.IPv4Prefixes > int(t.IPv4PerENI)-1 {
			return "PrivateIpAddressLimitExceeded", fmt.Sprintf("Number of private addresses will exceed limit: %s takes %d IPv4 prefixes per network interface, not %d", t.Name, t.IPv4PerENI-1, ni.IPv4Prefixes)
		}
	}
	return "", ""
}

// checkIPv6 refuses IPv6 addresses or prefixes asked of an interface in a subnet
// without an IPv6 CIDR block (the wording is the fake's).
func checkIPv6(lt *launchTemplate, sn *Subnet) (code, msg string) {
	for _, ni := range lt.Interfaces {
		if (ni.IPv6Addresses > 0 || ni.IPv6Prefixes > 0) && sn.IPv6CIDR == "" {
			return "InvalidParameterValue", fmt.Sprintf("The subnet %s has no IPv6 CIDR block: IPv6 addresses and prefixes cannot be assigned in it", sn.ID)
		}
	}
	return "", ""
}

// ipv6Count is how many IPv6 addresses EC2 gives an interface launched into sn:
// those asked for, else one when the subnet assigns IPv6 addresses on creation.
func ipv6Count(ni templateInterface, sn *Subnet) int {
	if ni.IPv6Addresses >= 0 {
		return ni.IPv6Addresses
	}
	if sn.AssignIPv6OnCreation && sn.IPv6CIDR != "" && ni.InterfaceType != "efa-only" {
		return 1
	}
	return 0
}

func (s *Server) reservationByID(id string) *CapacityReservation {
	for _, r := range s.inv.reservations {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// launchLocked creates a pending instance from a pool.
func (s *Server) launchLocked(p *pool, capacityType, reservationID, fleetID, token string, tags map[string]string) *instance {
	now := s.now()
	i := &instance{
		ID: s.newIDLocked("i"), Type: p.typ.Name, Zone: p.subnet.Zone, SubnetID: p.subnet.ID, VPCID: p.subnet.VPCID,
		ImageID: p.image.ID, Architecture: p.typ.Arch, CapacityType: capacityType, ReservationID: reservationID,
		FleetID: fleetID, ClientToken: token, TemplateID: p.template.ID, Groups: slices.Clone(p.template.Groups),
		HTTPTokens: cmp.Or(p.template.HTTPTokens, "optional"), HopLimit: cmp.Or(p.template.HopLimit, 1),
		State: statePending, StateAt: now, LaunchedAt: now, VisibleAt: now.Add(s.opts.ConsistencyDelay),
		UserData: p.template.UserData, Tenancy: p.template.Tenancy,
		// The primary network interface, tagged as the template says.
		InterfaceID: s.newIDLocked("eni"), InterfaceTags: cloneTags(p.template.InterfaceTags),
	}
	primary := templateInterface{IPv6Addresses: -1}
	for _, ni := range p.template.Interfaces {
		if ni.DeviceIndex == 0 && ni.NetworkCardIndex == 0 {
			i.IPv4Prefixes = max(ni.IPv4Prefixes, 0)
			primary = ni
		}
	}
	if ipv6Count(primary, p.subnet) > 0 {
		// The primary interface's first IPv6 address (and the only one the fake
		// keeps), which IMDS lists under the interface's ipv6s.
		i.IPv6 = s.nextIPv6Locked(p.subnet)
		i.PrimaryIPv6 = primary.PrimaryIPv6
	}
	if capacityType == "spot" {
		i.SpotRequestID = fmt.Sprintf("sir-%08x", s.rng.Uint32())
	}
	if prof := s.profileByRef(p.template.ProfileName, p.template.ProfileARN); prof != nil {
		i.ProfileARN, i.ProfileID = s.profileARN(prof), prof.id
	}
	if len(i.Groups) == 0 {
		for _, sg := range s.inv.sgs {
			if sg.Name == "default" && sg.VPCID == p.subnet.VPCID {
				i.Groups = []string{sg.ID}
			}
		}
	}
	i.PrivateIP = s.nextIPLocked(p.subnet)
	if p.subnet.MapPublicIP || p.template.AssociatePublic {
		i.PublicIP = fmt.Sprintf("3.%d.%d.%d", s.rng.IntN(256), s.rng.IntN(256), 1+s.rng.IntN(254))
	}
	i.Tags = cloneTags(p.template.InstanceTags)
	maps.Copy(i.Tags, tags)
	// EC2 tags fleet instances with these itself.
	i.Tags["aws:ec2:fleet-id"] = fleetID
	i.Tags["aws:ec2launchtemplate:id"] = p.template.ID
	i.Tags["aws:ec2launchtemplate:version"] = "1"
	s.ec2.instances[i.ID] = i
	s.ec2.order = append(s.ec2.order, i.ID)
	if s.opts.StateChangeEvents {
		s.postEventLocked(stateChangeEvent(s, i, now))
	}
	return i
}

// nextIPLocked hands out the subnet's addresses in order, skipping the four AWS
// keeps at the start of every subnet.
func (s *Server) nextIPLocked(sn *Subnet) string {
	prefix := netip.MustParsePrefix(sn.CIDR).Masked()
	n := s.ec2.ips[sn.ID] + 4
	s.ec2.ips[sn.ID]++
	a := prefix.Addr().As4()
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}

// nextIPv6Locked hands out the subnet's IPv6 addresses in order after the four
// AWS keeps (EC2 picks them at random in the block; the fake counts, so runs
// repeat).
func (s *Server) nextIPv6Locked(sn *Subnet) string {
	prefix := netip.MustParsePrefix(sn.IPv6CIDR).Masked()
	n := s.ec2.ipv6s[sn.ID] + 4
	s.ec2.ipv6s[sn.ID]++
	a := prefix.Addr().As16()
	binary.BigEndian.PutUint64(a[8:], binary.BigEndian.Uint64(a[8:])+uint64(n))
	return netip.AddrFrom16(a).String()
}

// Instances.

func (s *Server) instanceView(i *instance) xmlInstance {
	t := s.inv.types[i.Type]
	x := xmlInstance{
		InstanceID: i.ID, ImageID: i.ImageID, InstanceState: xmlInstanceState{Code: stateCodes[i.State], Name: i.State},
		PrivateDNSName: i.privateDNSName(s.opts.Region), InstanceType: i.Type, LaunchTime: xmlTime(i.LaunchedAt),
		Placement: xmlPlacement{AvailabilityZone: i.Zone, AvailabilityZoneID: s.inv.zoneID(i.Zone), Tenancy: cmp.Or(i.Tenancy, "default"),
			GroupName: i.PlacementGroupName, GroupID: i.PlacementGroupID, PartitionNumber: i.Partition},
		Monitoring: "disabled", SubnetID: i.SubnetID, VpcID: i.VPCID, PrivateIPAddress: i.PrivateIP, IPAddress: i.PublicIP,
		SourceDestCheck: true, StateReason: i.StateReason, Architecture: i.Architecture, RootDeviceType: "ebs",
		RootDeviceName: "/dev/xvda", SpotInstanceRequestID: i.SpotRequestID, VirtualizationType: "hvm",
		ClientToken: i.ClientToken, Tags: tagItems(i.Tags), Hypervisor: "xen", EBSOptimized: true, EnaSupport: true,
		CapacityReservationID: i.Reservation, CapacityReservation: xmlCRSpec{Preference: "open"},
		MetadataOptions: xmlMetadataOptions{State: "applied", HTTPTokens: i.HTTPTokens, HTTPPutResponseHopLimit: i.HopLimit,
			HTTPEndpoint: "enabled", HTTPProtocolIpv6: "disabled", InstanceMetadataTags: "disabled"},
		PlatformDetails: "Linux/UNIX", UsageOperation: "RunInstances", UsageOperationUpdate: xmlTime(i.LaunchedAt),
		PrivateDNSNameOptions: xmlPrivateDNSOptions{HostnameType: "ip-name"},
		Ipv6Address:           i.IPv6,
	}
	if i.State != stateTerminated {
		// A terminated instance's interfaces are gone.
		ni := xmlInstanceInterface{NetworkInterfaceID: i.InterfaceID, SubnetID: i.SubnetID, VpcID: i.VPCID, OwnerID: s.opts.AccountID,
			Status: "in-use", PrivateIPAddress: i.PrivateIP, PrivateDNSName: x.PrivateDNSName, SourceDestCheck: true,
			Attachment:    xmlENIAttachment{AttachmentID: "eni-attach-" + strings.TrimPrefix(i.InterfaceID, "eni-"), Status: "attached", DeleteOnTermination: true},
			InterfaceType: "interface"}
		if i.IPv6 != "" {
			ni.Ipv6Addresses = []xmlInstanceIPv6{{Ipv6Address: i.IPv6, IsPrimaryIpv6: i.PrimaryIPv6}}
		}
		x.NetworkInterfaces = []xmlInstanceInterface{ni}
	}
	switch i.CapacityType {
	case "spot", "capacity-block":
		x.InstanceLifecycle = i.CapacityType
	case "reserved-capacity":
		x.InstanceLifecycle = "interruptible-capacity-reservation"
	}
	if i.Reservation != "" {
		x.CapacityReservation = xmlCRSpec{Preference: "capacity-reservations-only", TargetID: i.Reservation}
	}
	if t != nil {
		x.CPUOptions = xmlCPUOptions{CoreCount: max(1, t.VCPUs/t.ThreadsPerCore), ThreadsPerCore: t.ThreadsPerCore}
		if t.nitro() {
			x.Hypervisor = "xen" // EC2 reports xen for Nitro instances too
		}
	}
	for _, g := range i.Groups {
		name := g
		for _, sg := range s.inv.sgs {
			if sg.ID == g {
				name = sg.Name
			}
		}
		x.Groups = append(x.Groups, xmlGroup{GroupID: g, GroupName: name})
	}
	if len(x.NetworkInterfaces) > 0 {
		x.NetworkInterfaces[0].Groups = x.Groups
	}
	if i.ProfileARN != "" {
		x.IamInstanceProfile = &xmlIamInstanceProfile{Arn: i.ProfileARN, ID: i.ProfileID}
	}
	if i.State == stateShuttingDown || i.State == stateTerminated {
		x.Reason = fmt.Sprintf("User initiated (%s)", i.StateAt.UTC().Format("2006-01-02 15:04:05 MST"))
		if i.StateReason != nil && i.StateReason.Code != "Client.UserInitiatedShutdown" {
			x.Reason = i.StateReason.Message
		}
	}
	return x
}

var instanceFilters = map[string]func(*instance) []string{
	"instance-id":         func(i *instance) []string { return []string{i.ID} },
	"instance-state-name": func(i *instance) []string { return []string{i.State} },
	"instance-state-code": func(i *instance) []string { return []string{strconv.Itoa(int(stateCodes[i.State]))} },
	"instance-type":       func(i *instance) []string { return []string{i.Type} },
	"availability-zone":   func(i *instance) []string { return []string{i.Zone} },
	"subnet-id":           func(i *instance) []string { return []string{i.SubnetID} },
	"vpc-id":              func(i *instance) []string { return []string{i.VPCID} },
	"image-id":            func(i *instance) []string { return []string{i.ImageID} },
	"private-ip-address":  func(i *instance) []string { return []string{i.PrivateIP} },
	"client-token":        func(i *instance) []string { return []string{i.ClientToken} },
	"reservation-id":      func(i *instance) []string { return []string{i.ReservationID} },
	"architecture":        func(i *instance) []string { return []string{i.Architecture} },
	"instance-lifecycle": func(i *instance) []string {
		if i.CapacityType == "spot" {
			return []string{"spot"}
		}
		return nil
	},
	"capacity-reservation-id": func(i *instance) []string { return []string{i.Reservation} },
	"instance.group-id":       func(i *instance) []string { return i.Groups },
}

// checkInstanceIDs fails as EC2 does for IDs it does not know: malformed ones,
// then those it does not see (yet, or any more).
func (s *Server) checkInstanceIDs(ids []string) error {
	now := s.now()
	var missing []string
	for _, id := range ids {
		if !strings.HasPrefix(id, "i-") {
			return badRequest("InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
		if i := s.ec2.instances[id]; i == nil || !i.visible(now) {
			missing = append(missing, id)
		}
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return badRequest("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", missing[0])
	}
	return badRequest("InvalidInstanceID.NotFound", "The instance IDs '%s' do not exist", strings.Join(missing, ", "))
}

func (s *Server) describeInstances(q *queryParams) (ec2Response, error) {
	ids := q.list("InstanceId")
	page, err := readPage(q, 5, 1000, 0)
	if err != nil {
		return nil, err
	}
	match, err := filterSet[*instance]{fields: instanceFilters, tags: func(i *instance) map[string]string { return i.Tags }}.compile(readFilters(q))
	if err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	if len(ids) > 0 && q.has("MaxResults") {
		return nil, badRequest("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	if err := s.checkInstanceIDs(ids); err != nil {
		return nil, err
	}
	now := s.now()
	var all []*instance
	for _, id := range s.ec2.order {
		i := s.ec2.instances[id]
		if !i.visible(now) || (len(ids) > 0 && !slices.Contains(ids, id)) || !match(i) {
			continue
		}
		all = append(all, i)
	}
	items, next := pageOf(all, page)
	resp := &struct {
		ec2Meta
		Reservations []xmlReservation `xml:"reservationSet>item"`
		NextToken    string           `xml:"nextToken,omitempty"`
	}{NextToken: next}
	for _, i := range items {
		n := len(resp.Reservations)
		if n == 0 || resp.Reservations[n-1].ReservationID != i.ReservationID {
			resp.Reservations = append(resp.Reservations, xmlReservation{ReservationID: i.ReservationID, OwnerID: s.opts.AccountID})
			n++
		}
		resp.Reservations[n-1].Instances = append(resp.Reservations[n-1].Instances, s.instanceView(i))
	}
	return resp, nil
}

func (s *Server) terminateInstances(q *queryParams) (ec2Response, error) {
	ids := q.list("InstanceId")
	q.str("Force")
	q.str("SkipOsShutdown")
	if err := q.done(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, badRequest("MissingParameter", "The request must contain the parameter InstanceId")
	}
	if err := s.checkInstanceIDs(ids); err != nil {
		return nil, err
	}
	resp := &struct {
		ec2Meta
		Changes []xmlInstanceStateChange `xml:"instancesSet>item"`
	}{}
	now := s.now()
	for _, id := range ids {
		i := s.ec2.instances[id]
		prev := xmlInstanceState{Code: stateCodes[i.State], Name: i.State}
		s.terminateLocked(i, now, &xmlStateReason{Code: "Client.UserInitiatedShutdown", Message: "Client.UserInitiatedShutdown: User initiated shutdown"})
		resp.Changes = append(resp.Changes, xmlInstanceStateChange{
			InstanceID: id, PreviousState: prev, CurrentState: xmlInstanceState{Code: stateCodes[i.State], Name: i.State},
		})
	}
	return resp, nil
}

// terminateLocked starts an instance's termination and gives back its capacity
// reservation slot.
func (s *Server) terminateLocked(i *instance, now time.Time, reason *xmlStateReason) {
	if i.State == stateShuttingDown || i.State == stateTerminated {
		return
	}
	i.ReclaimAt = time.Time{}
	if i.Reservation != "" {
		if r := s.reservationByID(i.Reservation); r != nil {
			r.Available++
		}
	}
	s.setStateLocked(i, stateShuttingDown, now, reason)
	if s.opts.TerminationDelay < 0 {
		s.setStateLocked(i, stateTerminated, now, nil)
	}
}

func (s *Server) createTags(q *queryParams) (ec2Response, error) {
	ids := q.list("ResourceId")
	tags, err := q.tags("Tag")
	if err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, badRequest("MissingParameter", "The request must contain the parameter resourceIdSet")
	}
	if err := checkUserTags(tags); err != nil {
		return nil, err
	}
	var targets []map[string]string
	for _, id := range ids {
		m, err := s.taggable(id)
		if err != nil {
			return nil, err
		}
		targets = append(targets, m)
	}
	for _, m := range targets {
		maps.Copy(m, tags)
	}
	return &struct {
		ec2Meta
		Return bool `xml:"return"`
	}{Return: true}, nil
}

// taggable finds the tags of a resource by its ID.
func (s *Server) taggable(id string) (map[string]string, error) {
	prefix, _, _ := strings.Cut(id, "-")
	switch prefix {
	case "i":
		if err := s.checkInstanceIDs([]string{id}); err != nil {
			return nil, err
		}
		return s.ec2.instances[id].Tags, nil
	case "eni":
		for _, i := range s.ec2.instances {
			if i.InterfaceID == id {
				return i.InterfaceTags, nil
			}
		}
		return nil, badRequest("InvalidNetworkInterfaceID.NotFound", "The networkInterface ID '%s' does not exist", id)
	case "lt":
		if lt := s.ec2.templates[id]; lt != nil {
			return lt.Tags, nil
		}
		return nil, badRequest("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
	case "subnet":
		for _, sn := range s.inv.subnets {
			if sn.ID == id {
				return sn.Tags, nil
			}
		}
		return nil, badRequest("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
	case "sg":
		for _, g := range s.inv.sgs {
			if g.ID == id {
				return g.Tags, nil
			}
		}
		return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
	case "ami":
		for _, im := range s.inv.images {
			if im.ID == id {
				return im.Tags, nil
			}
		}
		return nil, badRequest("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
	}
	return nil, badRequest("InvalidID", "The ID '%s' is not valid", id)
}
