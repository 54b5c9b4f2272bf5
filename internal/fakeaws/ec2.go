package fakeaws

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// API versions, as the Query protocols send them in Version.
const (
	ec2Version   = "2016-11-15"
	iamVersion   = "2010-05-08"
	ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"
	iamNamespace = "https://iam.amazonaws.com/doc/2010-05-08/"
)

// EC2 instance states and their codes.
const (
	statePending      = "pending"
	stateRunning      = "running"
	stateShuttingDown = "shutting-down"
	stateTerminated   = "terminated"
	stateStopping     = "stopping"
	stateStopped      = "stopped"
)

var stateCodes = map[string]int32{statePending: 0, stateRunning: 16, stateShuttingDown: 32, stateTerminated: 48, stateStopping: 64, stateStopped: 80}

// ec2State is what EC2 calls create: instances, launch templates, fleets.
type ec2State struct {
	instances map[string]*instance
	// order is the launch order, which DescribeInstances pages through.
	order     []string
	templates map[string]*launchTemplate // by ID
	// fleets remembers CreateFleet answers by client token, for idempotency.
	fleets map[string]*fleetRecord
	// ips is the next host offset handed out per subnet, ipv6s the IPv6 one.
	ips, ipv6s map[string]int
	// fleetTags are the tags of each fleet, by fleet ID.
	fleetTags map[string]map[string]string
}

func newEC2State() ec2State {
	return ec2State{
		instances: map[string]*instance{},
		templates: map[string]*launchTemplate{},
		fleets:    map[string]*fleetRecord{},
		ips:       map[string]int{},
		ipv6s:     map[string]int{},
		fleetTags: map[string]map[string]string{},
	}
}

// instance is one EC2 instance. Its state moves with time (see settleLocked):
// pending → running after PendingDelay, shutting-down → terminated after
// TerminationDelay, and terminated instances are forgotten after
// TerminatedRetention.
type instance struct {
	ID            string
	Type          string
	Zone          string
	SubnetID      string
	VPCID         string
	ImageID       string
	Architecture  string
	CapacityType  string // spot or on-demand
	SpotRequestID string
	ReservationID string
	FleetID       string
	ClientToken   string
	TemplateID    string
	PrivateIP     string
	PublicIP      string
	// IPv6 is its primary interface's IPv6 address, if it has one; PrimaryIPv6
	// says the launch made it the interface's primary IPv6 address.
	IPv6        string
	PrimaryIPv6 bool
	Groups      []string
	ProfileARN  string
	ProfileID   string
	Reservation string // capacity reservation ID
	Tenancy     string // Placement.Tenancy launched with; empty is default
	// InterfaceID is the primary network interface, InterfaceTags its tags.
	InterfaceID   string
	InterfaceTags map[string]string
	// Console is what it printed to its serial console (GetConsoleOutput).
	Console string
	// Impaired are its failed status checks (see ImpairInstance).
	Impaired   []impairment
	HTTPTokens string
	HopLimit   int32
	Tags       map[string]string
	// UserData is the launch template's, kept since the template may go first.
	UserData string
	// FleetContext is the Context of the CreateFleet request that launched it.
	FleetContext string
	// IPv4Prefixes is how many IPv4 prefixes its primary network interface holds.
	IPv4Prefixes int
	// PlacementGroupID and PlacementGroupName are its placement group, Partition
	// its partition in a partition group (from 1).
	PlacementGroupID, PlacementGroupName string
	Partition                            int

	State       string
	StateAt     time.Time // when State began
	StateReason *xmlStateReason
	LaunchedAt  time.Time
	// VisibleAt is when EC2's eventual consistency lets DescribeInstances see it.
	VisibleAt time.Time
	// ReclaimAt, when set, is when a spot interruption takes the instance.
	ReclaimAt time.Time
}

func (i *instance) visible(now time.Time) bool { return !now.Before(i.VisibleAt) }

func (i *instance) privateDNSName(region string) string {
	host := "ip-" + strings.ReplaceAll(i.PrivateIP, ".", "-")
	if region == "us-east-1" {
		return host + ".ec2.internal"
	}
	return host + "." + region + ".compute.internal"
}

// Instance is a snapshot of an instance, for tests.
type Instance struct {
	ID           string
	Type         string
	Zone         string
	SubnetID     string
	ImageID      string
	CapacityType string
	State        string
	PrivateIP    string
	// IPv6 is its primary network interface's IPv6 address, if it has one.
	IPv6 string
	// PrivateDNSName is the node name a kubelet of the instance registers.
	PrivateDNSName string
	LaunchTime     time.Time
	Tags           map[string]string
	// UserData is the decoded user data the instance booted with.
	UserData string
	// CapacityReservationID is the reservation the instance runs in, if any.
	CapacityReservationID string
	// NetworkInterfaceID is the primary network interface, NetworkInterfaceTags
	// its tags (from the launch template's network-interface tag specification).
	NetworkInterfaceID   string
	NetworkInterfaceTags map[string]string
	// FleetContext is the Context of the CreateFleet request that launched it.
	FleetContext string
	// IPv4Prefixes is how many IPv4 prefixes its primary network interface holds.
	IPv4Prefixes int
	// PlacementGroupID is its placement group, Partition its partition (from 1) in
	// a partition group.
	PlacementGroupID string
	Partition        int
}

// FleetTags are the tags of a fleet (an instance's aws:ec2:fleet-id tag names it).
func (s *Server) FleetTags(fleetID string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return cloneTags(s.ec2.fleetTags[fleetID])
}

// ProviderID is the Kubernetes provider ID of the instance's node.
func (i Instance) ProviderID() string { return fmt.Sprintf("aws:///%s/%s", i.Zone, i.ID) }

func (s *Server) snapshotLocked(i *instance) Instance {
	return Instance{
		ID: i.ID, Type: i.Type, Zone: i.Zone, SubnetID: i.SubnetID, ImageID: i.ImageID, CapacityType: i.CapacityType,
		State: i.State, PrivateIP: i.PrivateIP, IPv6: i.IPv6, PrivateDNSName: i.privateDNSName(s.opts.Region), LaunchTime: i.LaunchedAt,
		Tags: cloneTags(i.Tags), UserData: i.UserData, CapacityReservationID: i.Reservation,
		NetworkInterfaceID: i.InterfaceID, NetworkInterfaceTags: cloneTags(i.InterfaceTags),
		FleetContext: i.FleetContext, IPv4Prefixes: i.IPv4Prefixes, PlacementGroupID: i.PlacementGroupID, Partition: i.Partition,
	}
}

// TerminateInstance terminates an instance from outside the provider (a person
// in the console, another controller), with EC2's usual shutting-down period.
func (s *Server) TerminateInstance(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	i := s.ec2.instances[id]
	if i == nil {
		return fmt.Errorf("no instance %s", id)
	}
	s.terminateLocked(i, s.now(), &xmlStateReason{Code: "Client.UserInitiatedShutdown", Message: "Client.UserInitiatedShutdown: User initiated shutdown"})
	return nil
}

// CancelCapacityReservation cancels a reservation as its owner would: its
// instances keep running as plain on-demand instances, outside any reservation.
func (s *Server) CancelCapacityReservation(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.reservationByID(id)
	if r == nil {
		return fmt.Errorf("no capacity reservation %s", id)
	}
	r.Cancelled, r.Available = true, 0
	for _, i := range s.ec2.instances {
		if i.Reservation == id {
			i.Reservation = ""
		}
	}
	return nil
}

// RemoveFromCapacityReservation moves a running instance out of its reservation
// (EC2's ModifyInstanceCapacityReservationAttributes), which gets the slot back.
func (s *Server) RemoveFromCapacityReservation(instanceID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := s.ec2.instances[instanceID]
	if i == nil || i.Reservation == "" {
		return fmt.Errorf("no instance %s in a capacity reservation", instanceID)
	}
	if r := s.reservationByID(i.Reservation); r != nil {
		r.Available++
	}
	i.Reservation = ""
	return nil
}

// Instances lists every instance the server knows, eventual consistency
// notwithstanding, in launch order.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	out := make([]Instance, 0, len(s.ec2.order))
	for _, id := range s.ec2.order {
		out = append(out, s.snapshotLocked(s.ec2.instances[id]))
	}
	return out
}

// Instance returns one instance, eventual consistency notwithstanding.
func (s *Server) Instance(id string) (Instance, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.settleLocked()
	i, ok := s.ec2.instances[id]
	if !ok {
		return Instance{}, false
	}
	return s.snapshotLocked(i), true
}

// setStateLocked moves an instance to a new state, with the EventBridge
// notification a real account would see.
func (s *Server) setStateLocked(i *instance, state string, at time.Time, reason *xmlStateReason) {
	if i.State == state {
		return
	}
	i.State, i.StateAt = state, at
	if reason != nil {
		i.StateReason = reason
	}
	if s.opts.StateChangeEvents {
		s.postEventLocked(stateChangeEvent(s, i, at))
	}
}

// settleLocked applies what time has done since the last call: instances boot,
// finish terminating, are reclaimed after a spot interruption warning, and are
// forgotten once terminated long enough.
func (s *Server) settleLocked() {
	now := s.now()
	kept := s.ec2.order[:0]
	for _, id := range s.ec2.order {
		i := s.ec2.instances[id]
		if !i.ReclaimAt.IsZero() && !now.Before(i.ReclaimAt) && (i.State == statePending || i.State == stateRunning) {
			i.ReclaimAt = time.Time{}
			reason := &xmlStateReason{Code: "Server.SpotInstanceTermination", Message: "Server.SpotInstanceTermination: Spot instance termination"}
			if i.CapacityType != "spot" {
				// An interruptible reservation taken back (the fake's wording).
				reason = &xmlStateReason{Code: "Server.ScheduledStop", Message: "Server.ScheduledStop: Capacity reservation reclaimed by its owner"}
			}
			s.setStateLocked(i, stateShuttingDown, now, reason)
		}
		if i.State == statePending && !now.Before(i.StateAt.Add(s.opts.PendingDelay)) {
			s.setStateLocked(i, stateRunning, i.StateAt.Add(s.opts.PendingDelay), nil)
		}
		if i.State == stateShuttingDown && !now.Before(i.StateAt.Add(s.opts.TerminationDelay)) {
			s.setStateLocked(i, stateTerminated, i.StateAt.Add(s.opts.TerminationDelay), nil)
		}
		if i.State == stateStopping && !now.Before(i.StateAt.Add(s.opts.TerminationDelay)) {
			s.setStateLocked(i, stateStopped, i.StateAt.Add(s.opts.TerminationDelay), nil)
		}
		if i.State == stateTerminated && !now.Before(i.StateAt.Add(s.opts.TerminatedRetention)) {
			delete(s.ec2.instances, id)
			continue
		}
		kept = append(kept, id)
	}
	clear(s.ec2.order[len(kept):])
	s.ec2.order = kept
}

// ec2Response is an EC2 answer; every one carries the request ID.
type ec2Response interface{ setRequestID(string) }

type ec2Handler func(*Server, *queryParams) (ec2Response, error)

// ec2Handlers are the EC2 actions the fake serves.
var ec2Handlers = map[string]ec2Handler{
	"DescribeAvailabilityZones":     (*Server).describeAvailabilityZones,
	"DescribeInstanceTypes":         (*Server).describeInstanceTypes,
	"DescribeInstanceTypeOfferings": (*Server).describeInstanceTypeOfferings,
	"DescribeSubnets":               (*Server).describeSubnets,
	"DescribeSecurityGroups":        (*Server).describeSecurityGroups,
	"DescribeImages":                (*Server).describeImages,
	"DescribeSpotPriceHistory":      (*Server).describeSpotPriceHistory,
	"DescribeCapacityReservations":  (*Server).describeCapacityReservations,
	"CreateLaunchTemplate":          (*Server).createLaunchTemplate,
	"DescribeLaunchTemplates":       (*Server).describeLaunchTemplates,
	"DeleteLaunchTemplate":          (*Server).deleteLaunchTemplate,
	"CreateFleet":                   (*Server).createFleet,
	"DescribeInstances":             (*Server).describeInstances,
	"DescribePlacementGroups":       (*Server).describePlacementGroups,
	"DescribeInstanceStatus":        (*Server).describeInstanceStatus,
	"GetConsoleOutput":              (*Server).getConsoleOutput,
	"TerminateInstances":            (*Server).terminateInstances,
	"CreateTags":                    (*Server).createTags,
}

func (s *Server) serveEC2(w http.ResponseWriter, c *call) error {
	h, ok := ec2Handlers[c.action]
	if !ok {
		return badRequest("InvalidAction", "The action %s is not valid for this web service.", c.action)
	}
	q := c.query
	q.str("Action")
	q.str("Version")
	dry, _, err := q.optBool("DryRun")
	if err != nil {
		return err
	}
	q.dryRun = dry
	s.mu.Lock()
	resp, err := h(s, q)
	s.mu.Unlock()
	if err != nil {
		return err
	}
	resp.setRequestID(c.reqID)
	writeXML(w, http.StatusOK, xml.StartElement{
		Name: xml.Name{Local: c.action + "Response"},
		Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: ec2Namespace}},
	}, resp)
	return nil
}

// Zones.

func (s *Server) describeAvailabilityZones(q *queryParams) (ec2Response, error) {
	names, ids := q.list("ZoneName"), q.list("ZoneId")
	q.optBool("AllAvailabilityZones")
	match, err := filterSet[zone]{fields: map[string]func(zone) []string{
		"zone-name":   func(z zone) []string { return []string{z.Name} },
		"zone-id":     func(z zone) []string { return []string{z.ID} },
		"region-name": func(zone) []string { return []string{s.opts.Region} },
		"state":       func(zone) []string { return []string{"available"} },
		"zone-type":   func(zone) []string { return []string{"availability-zone"} },
	}}.compile(readFilters(q))
	if err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	resp := &struct {
		ec2Meta
		Zones []xmlAvailabilityZone `xml:"availabilityZoneInfo>item"`
	}{}
	for _, n := range append(slices.Clone(names), ids...) {
		if !slices.ContainsFunc(s.inv.zones, func(z zone) bool { return z.Name == n || z.ID == n }) {
			return nil, badRequest("InvalidParameterValue", "Invalid availability zone: [%s]", n)
		}
	}
	for _, z := range s.inv.zones {
		if (len(names) > 0 || len(ids) > 0) && !slices.Contains(names, z.Name) && !slices.Contains(ids, z.ID) {
			continue
		}
		if !match(z) {
			continue
		}
		resp.Zones = append(resp.Zones, xmlAvailabilityZone{
			ZoneName: z.Name, ZoneID: z.ID, ZoneState: "available", RegionName: s.opts.Region,
			ZoneType: "availability-zone", GroupName: s.opts.Region + "-zg-1", NetworkBorderGroup: s.opts.Region,
			OptInStatus: "opt-in-not-required",
		})
	}
	return resp, nil
}

// Network.

func (s *Server) subnetView(sn *Subnet) xmlSubnet {
	prefix := netip.MustParsePrefix(sn.CIDR)
	free := (1 << (32 - prefix.Bits())) - 5
	for _, i := range s.ec2.instances {
		if i.SubnetID == sn.ID && i.State != stateTerminated {
			free--
		}
	}
	x := xmlSubnet{
		SubnetID: sn.ID, SubnetArn: fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", s.opts.Region, s.opts.AccountID, sn.ID),
		State: "available", VpcID: sn.VPCID, OwnerID: s.opts.AccountID, CidrBlock: sn.CIDR,
		AvailableIPAddressCount: int32(max(free, 0)), AvailabilityZone: sn.Zone, AvailabilityZoneID: s.inv.zoneID(sn.Zone),
		MapPublicIPOnLaunch: sn.MapPublicIP, HostnameType: "ip-name", Tags: tagItems(sn.Tags),
		AssignIpv6AddressOnCreation: sn.AssignIPv6OnCreation,
	}
	if sn.IPv6CIDR != "" {
		x.Ipv6CidrBlocks = []xmlIPv6CIDRAssociation{{AssociationID: stableID("subnet-cidr-assoc", sn.ID+"/"+sn.IPv6CIDR),
			CIDR: sn.IPv6CIDR, State: "associated", AddressType: "public", Source: "amazon"}}
	}
	return x
}

func (s *Server) describeSubnets(q *queryParams) (ec2Response, error) {
	ids := q.list("SubnetId")
	page, err := readPage(q, 5, 1000, 0)
	if err != nil {
		return nil, err
	}
	match, err := filterSet[*Subnet]{
		fields: map[string]func(*Subnet) []string{
			"subnet-id":            func(sn *Subnet) []string { return []string{sn.ID} },
			"vpc-id":               func(sn *Subnet) []string { return []string{sn.VPCID} },
			"availability-zone":    func(sn *Subnet) []string { return []string{sn.Zone} },
			"availability-zone-id": func(sn *Subnet) []string { return []string{s.inv.zoneID(sn.Zone)} },
			"cidr-block":           func(sn *Subnet) []string { return []string{sn.CIDR} },
			"ipv6-cidr-block-association.ipv6-cidr-block": func(sn *Subnet) []string {
				return slices.DeleteFunc([]string{sn.IPv6CIDR}, func(c string) bool { return c == "" })
			},
			"state":                   func(*Subnet) []string { return []string{"available"} },
			"default-for-az":          func(*Subnet) []string { return []string{"false"} },
			"map-public-ip-on-launch": func(sn *Subnet) []string { return []string{boolString(sn.MapPublicIP)} },
			"owner-id":                func(*Subnet) []string { return []string{s.opts.AccountID} },
		},
		tags: func(sn *Subnet) map[string]string { return sn.Tags },
	}.compile(readFilters(q))
	if err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if !slices.ContainsFunc(s.inv.subnets, func(sn *Subnet) bool { return sn.ID == id }) {
			return nil, badRequest("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", id)
		}
	}
	var all []xmlSubnet
	for _, sn := range s.inv.subnets {
		if (len(ids) == 0 || slices.Contains(ids, sn.ID)) && match(sn) {
			all = append(all, s.subnetView(sn))
		}
	}
	items, next := pageOf(all, page)
	return &struct {
		ec2Meta
		Subnets   []xmlSubnet `xml:"subnetSet>item"`
		NextToken string      `xml:"nextToken,omitempty"`
	}{Subnets: items, NextToken: next}, nil
}

func (s *Server) describeSecurityGroups(q *queryParams) (ec2Response, error) {
	ids, names := q.list("GroupId"), q.list("GroupName")
	page, err := readPage(q, 5, 1000, 0)
	if err != nil {
		return nil, err
	}
	match, err := filterSet[*SecurityGroup]{
		fields: map[string]func(*SecurityGroup) []string{
			"group-id":    func(g *SecurityGroup) []string { return []string{g.ID} },
			"group-name":  func(g *SecurityGroup) []string { return []string{g.Name} },
			"vpc-id":      func(g *SecurityGroup) []string { return []string{g.VPCID} },
			"description": func(g *SecurityGroup) []string { return []string{g.Description} },
			"owner-id":    func(*SecurityGroup) []string { return []string{s.opts.AccountID} },
		},
		tags: func(g *SecurityGroup) map[string]string { return g.Tags },
	}.compile(readFilters(q))
	if err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if !slices.ContainsFunc(s.inv.sgs, func(g *SecurityGroup) bool { return g.ID == id }) {
			return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist", id)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(s.inv.sgs, func(g *SecurityGroup) bool { return g.Name == n }) {
			return nil, badRequest("InvalidGroup.NotFound", "The security group '%s' does not exist in default VPC '%s'", n, s.inv.vpcID)
		}
	}
	var all []xmlSecurityGroup
	for _, g := range s.inv.sgs {
		if len(ids)+len(names) > 0 && !slices.Contains(ids, g.ID) && !slices.Contains(names, g.Name) {
			continue
		}
		if !match(g) {
			continue
		}
		all = append(all, xmlSecurityGroup{
			GroupID: g.ID, GroupName: g.Name, GroupDescription: g.Description, VpcID: g.VPCID, OwnerID: s.opts.AccountID,
			SecurityGroupArn: fmt.Sprintf("arn:aws:ec2:%s:%s:security-group/%s", s.opts.Region, s.opts.AccountID, g.ID),
			Tags:             tagItems(g.Tags),
		})
	}
	items, next := pageOf(all, page)
	return &struct {
		ec2Meta
		Groups    []xmlSecurityGroup `xml:"securityGroupInfo>item"`
		NextToken string             `xml:"nextToken,omitempty"`
	}{Groups: items, NextToken: next}, nil
}

// Images.

func (s *Server) imageOwnerMatches(im *Image, owner string) bool {
	switch owner {
	case "self":
		return im.OwnerID == s.opts.AccountID
	case "amazon", "aws-marketplace", "aws-backup-vault":
		return im.OwnerAlias == owner
	}
	return im.OwnerID == owner
}

func (s *Server) describeImages(q *queryParams) (ec2Response, error) {
	ids, owners := q.list("ImageId"), q.list("Owner")
	q.list("ExecutableBy")
	includeDeprecated, _, err := q.optBool("IncludeDeprecated")
	if err != nil {
		return nil, err
	}
	if _, _, err := q.optBool("IncludeDisabled"); err != nil {
		return nil, err
	}
	page, err := readPage(q, 5, 1000, 0)
	if err != nil {
		return nil, err
	}
	match, err := filterSet[*Image]{
		fields: map[string]func(*Image) []string{
			"image-id":            func(im *Image) []string { return []string{im.ID} },
			"name":                func(im *Image) []string { return []string{im.Name} },
			"description":         func(im *Image) []string { return []string{im.Description} },
			"owner-id":            func(im *Image) []string { return []string{im.OwnerID} },
			"owner-alias":         func(im *Image) []string { return []string{im.OwnerAlias} },
			"architecture":        func(im *Image) []string { return []string{im.Architecture} },
			"state":               func(*Image) []string { return []string{"available"} },
			"image-type":          func(*Image) []string { return []string{"machine"} },
			"is-public":           func(im *Image) []string { return []string{boolString(im.OwnerID != s.opts.AccountID)} },
			"root-device-type":    func(*Image) []string { return []string{"ebs"} },
			"virtualization-type": func(*Image) []string { return []string{"hvm"} },
			"platform-details":    func(im *Image) []string { return []string{im.platformDetails()} },
			"platform":            func(im *Image) []string { return []string{im.Platform} },
		},
		tags: func(im *Image) map[string]string { return im.Tags },
	}.compile(readFilters(q))
	if err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if !strings.HasPrefix(id, "ami-") {
			return nil, badRequest("InvalidAMIID.Malformed", "Invalid id: \"%s\" (expecting \"ami-...\")", id)
		}
		if !slices.ContainsFunc(s.inv.images, func(im *Image) bool { return im.ID == id }) {
			return nil, badRequest("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
		}
	}
	now := s.now()
	var all []xmlImage
	for _, im := range s.inv.images {
		if len(ids) > 0 && !slices.Contains(ids, im.ID) {
			continue
		}
		if len(owners) > 0 && !slices.ContainsFunc(owners, func(o string) bool { return s.imageOwnerMatches(im, o) }) {
			continue
		}
		// EC2 hides deprecated images unless asked for them, or for them by ID.
		deprecated := !im.DeprecationTime.IsZero() && !now.Before(im.DeprecationTime)
		if deprecated && !includeDeprecated && len(ids) == 0 {
			continue
		}
		if !match(im) {
			continue
		}
		all = append(all, s.imageView(im))
	}
	items, next := pageOf(all, page)
	return &struct {
		ec2Meta
		Images    []xmlImage `xml:"imagesSet>item"`
		NextToken string     `xml:"nextToken,omitempty"`
	}{Images: items, NextToken: next}, nil
}

func (im *Image) platformDetails() string {
	if im.Platform == "windows" {
		return "Windows"
	}
	return "Linux/UNIX"
}

func (s *Server) imageView(im *Image) xmlImage {
	x := xmlImage{
		ImageID: im.ID, ImageLocation: im.OwnerAlias + "/" + im.Name, ImageState: "available", ImageOwnerID: im.OwnerID,
		CreationDate: time.Time(im.CreationDate).UTC().Format("2006-01-02T15:04:05.000Z"), IsPublic: im.OwnerID != s.opts.AccountID,
		Architecture: im.Architecture, ImageType: "machine", ImageOwnerAlias: im.OwnerAlias, Name: im.Name,
		Description: im.Description, RootDeviceType: "ebs", RootDeviceName: im.RootDeviceName, VirtualizationType: "hvm",
		Hypervisor: "xen", EnaSupport: true, SriovNetSupport: "simple", Platform: im.Platform, PlatformDetails: im.platformDetails(),
		UsageOperation: "RunInstances", Tags: tagItems(im.Tags),
	}
	if im.OwnerAlias == "" {
		x.ImageLocation = im.OwnerID + "/" + im.Name
	}
	if !im.DeprecationTime.IsZero() {
		x.DeprecationTime = im.DeprecationTime.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	for _, b := range im.BlockDevices {
		x.BlockDeviceMapping = append(x.BlockDeviceMapping, xmlImageBlockDevice{DeviceName: b.DeviceName, EBS: xmlEBSSnapshot{
			SnapshotID: b.SnapshotID, VolumeSize: b.VolumeSize, DeleteOnTermination: true, VolumeType: b.VolumeType,
		}})
	}
	return x
}

// Capacity reservations.

func (s *Server) describeCapacityReservations(q *queryParams) (ec2Response, error) {
	ids := q.list("CapacityReservationId")
	page, err := readPage(q, 1, 1000, 0)
	if err != nil {
		return nil, err
	}
	match, err := filterSet[*CapacityReservation]{
		fields: map[string]func(*CapacityReservation) []string{
			"capacity-reservation-id": func(r *CapacityReservation) []string { return []string{r.ID} },
			"instance-type":           func(r *CapacityReservation) []string { return []string{r.InstanceType} },
			"availability-zone":       func(r *CapacityReservation) []string { return []string{r.Zone} },
			"state":                   func(r *CapacityReservation) []string { return []string{s.reservationState(r)} },
			"instance-match-criteria": func(r *CapacityReservation) []string { return []string{r.MatchCriteria} },
			"owner-id":                func(*CapacityReservation) []string { return []string{s.opts.AccountID} },
		},
		tags: func(r *CapacityReservation) map[string]string { return r.Tags },
	}.compile(readFilters(q))
	if err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	var all []xmlCapacityReservation
	for _, r := range s.inv.reservations {
		if (len(ids) > 0 && !slices.Contains(ids, r.ID)) || !match(r) {
			continue
		}
		x := xmlCapacityReservation{
			CapacityReservationID: r.ID, OwnerID: s.opts.AccountID,
			CapacityReservationArn: fmt.Sprintf("arn:aws:ec2:%s:%s:capacity-reservation/%s", s.opts.Region, s.opts.AccountID, r.ID),
			AvailabilityZoneID:     s.inv.zoneID(r.Zone), InstanceType: r.InstanceType, InstancePlatform: "Linux/UNIX",
			AvailabilityZone: r.Zone, Tenancy: "default", TotalInstanceCount: int32(r.Total), AvailableInstanceCount: int32(r.Available),
			State: s.reservationState(r), StartDate: xmlTime(s.inv.createdAt), EndDateType: "unlimited",
			InstanceMatchCriteria: r.MatchCriteria, CreateDate: xmlTime(s.inv.createdAt), ReservationType: r.Type,
			DeliveryPreference: "fixed", Tags: tagItems(r.Tags), Interruptible: r.Interruptible,
		}
		if r.Interruptible {
			x.InterruptionInfo = &xmlInterruptionInfo{SourceCapacityReservationID: r.Source, InterruptionType: "adhoc"}
		}
		if !r.EndDate.IsZero() {
			end := xmlTime(r.EndDate)
			x.EndDate, x.EndDateType = &end, "limited"
		}
		all = append(all, x)
	}
	items, next := pageOf(all, page)
	return &struct {
		ec2Meta
		Reservations []xmlCapacityReservation `xml:"capacityReservationSet>item"`
		NextToken    string                   `xml:"nextToken,omitempty"`
	}{Reservations: items, NextToken: next}, nil
}

func (s *Server) reservationState(r *CapacityReservation) string {
	if r.Cancelled {
		return "cancelled"
	}
	if !r.EndDate.IsZero() && !s.now().Before(r.EndDate) {
		return "expired"
	}
	return "active"
}
