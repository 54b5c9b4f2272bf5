package fakeaws

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// launchTemplate is a launch template with its one version: the fake keeps no
// version history, which a provider that creates a template per configuration
// (as Karpenter's does) never needs.
type launchTemplate struct {
	ID          string
	Name        string
	ClientToken string
	Fingerprint string
	CreatedAt   time.Time
	Tags        map[string]string
	// Data is every LaunchTemplateData parameter, keyed without its prefix
	// ("ImageId", "SecurityGroupId.1", "BlockDeviceMapping.1.Ebs.VolumeSize").
	Data map[string]string

	ImageID         string
	InstanceType    string
	SubnetID        string
	UserData        string // decoded
	ProfileName     string
	ProfileARN      string
	Groups          []string
	InstanceTags    map[string]string
	HTTPTokens      string
	HopLimit        int32
	ReservationID   string
	AssociatePublic bool
	// PlacementGroupID or PlacementGroupName is the template's placement group,
	// PartitionNumber the partition it asks for (0: EC2 picks).
	PlacementGroupID, PlacementGroupName string
	PartitionNumber                      int
	// TopLevelGroups says the groups came as SecurityGroupId, beside the interfaces.
	TopLevelGroups bool
	// Interfaces are the NetworkInterface.N members, by device index order given.
	Interfaces []templateInterface
	// InterfaceTags tag the network interfaces of the instances launched.
	InterfaceTags map[string]string
	// MarketType is InstanceMarketOptions.MarketType.
	MarketType string
	// Tenancy is Placement.Tenancy.
	Tenancy string
	// NestedVirtualization, CoreCount and ThreadsPerCore are the CpuOptions.
	NestedVirtualization      string
	CoreCount, ThreadsPerCore int
}

// templateInterface is one network interface of a launch template, as EC2 reads it.
type templateInterface struct {
	DeviceIndex      int
	NetworkCardIndex int
	InterfaceType    string // interface (default), efa or efa-only
	// IPv4Prefixes and IPv6Prefixes are the prefix counts asked for (-1: none);
	// ExplicitPrefixes the prefixes named one by one; SecondaryIPs the secondary
	// address count.
	IPv4Prefixes, IPv6Prefixes int
	ExplicitPrefixes           int
	SecondaryIPs               int
	// IPv6Addresses is the IPv6 address count asked for (-1: none, the subnet
	// decides), the Ipv6AddressCount or the addresses named; PrimaryIPv6 makes the
	// first of them the interface's primary IPv6 address.
	IPv6Addresses int
	PrimaryIPv6   bool
	// ConnTrack holds the ConnectionTrackingSpecification members given, by name.
	ConnTrack map[string]int
}

// LaunchTemplate is a snapshot of a launch template, for tests.
type LaunchTemplate struct {
	ID   string
	Name string
	Tags map[string]string
	// Data holds every LaunchTemplateData parameter as the SDK sent it, keyed
	// without the prefix: "ImageId", "SecurityGroupId.1",
	// "MetadataOptions.HttpTokens", "BlockDeviceMapping.1.Ebs.VolumeSize".
	Data map[string]string
	// UserData is the decoded user data.
	UserData string
}

// LaunchTemplates lists the launch templates by name.
func (s *Server) LaunchTemplates() []LaunchTemplate {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []LaunchTemplate
	for _, lt := range s.ec2.templates {
		out = append(out, LaunchTemplate{ID: lt.ID, Name: lt.Name, Tags: cloneTags(lt.Tags), Data: maps.Clone(lt.Data), UserData: lt.UserData})
	}
	slices.SortFunc(out, func(a, b LaunchTemplate) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// launchTemplateDataFields are the members of RequestLaunchTemplateData. The fake
// models a few (image, type, user data, instance profile, security groups,
// metadata options, tags, capacity reservation) and stores the rest as given.
var launchTemplateDataFields = map[string]bool{
	"BlockDeviceMapping": true, "CapacityReservationSpecification": true, "CpuOptions": true, "CreditSpecification": true,
	"DisableApiStop": true, "DisableApiTermination": true, "EbsOptimized": true, "ElasticGpuSpecification": true,
	"ElasticInferenceAccelerator": true, "EnclaveOptions": true, "HibernationOptions": true, "IamInstanceProfile": true,
	"ImageId": true, "InstanceInitiatedShutdownBehavior": true, "InstanceMarketOptions": true, "InstanceRequirements": true,
	"InstanceType": true, "KernelId": true, "KeyName": true, "LicenseSpecification": true, "MaintenanceOptions": true,
	"MetadataOptions": true, "Monitoring": true, "NetworkInterface": true, "NetworkPerformanceOptions": true, "Operator": true,
	"Placement": true, "PrivateDnsNameOptions": true, "RamDiskId": true, "SecondaryInterface": true, "SecurityGroupId": true,
	"SecurityGroup": true, "TagSpecification": true, "UserData": true,
}

var templateName = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)

// readTagSpecs reads TagSpecification.N: tags by resource type.
func readTagSpecs(q *queryParams, prefix string) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for _, p := range q.indices(prefix) {
		rt := q.str(p + ".ResourceType")
		tags, err := q.tags(p + ".Tag")
		if err != nil {
			return nil, err
		}
		if err := checkUserTags(tags); err != nil {
			return nil, err
		}
		if out[rt] == nil {
			out[rt] = map[string]string{}
		}
		maps.Copy(out[rt], tags)
	}
	return out, nil
}

// checkUserTags rejects what EC2 rejects in tags a caller sets.
func checkUserTags(tags map[string]string) error {
	if len(tags) > 50 {
		return badRequest("TagLimitExceeded", "The maximum number of tags per resource is 50")
	}
	for k, v := range tags {
		if strings.HasPrefix(strings.ToLower(k), "aws:") {
			return badRequest("InvalidParameterValue", "Tag keys starting with 'aws:' are reserved for internal use (%s)", k)
		}
		if len(k) > 128 || len(v) > 256 {
			return badRequest("InvalidParameterValue", "Tag %q is too long: keys take up to 128 characters, values up to 256", k)
		}
	}
	return nil
}

func (s *Server) createLaunchTemplate(q *queryParams) (ec2Response, error) {
	name := q.str("LaunchTemplateName")
	token := q.str("ClientToken")
	q.str("VersionDescription")
	q.accept("Operator")
	specs, err := readTagSpecs(q, "TagSpecification")
	if err != nil {
		return nil, err
	}
	lt := &launchTemplate{Name: name, ClientToken: token, Data: map[string]string{}, Tags: cloneTags(specs["launch-template"])}
	for k, v := range q.values {
		rest, ok := strings.CutPrefix(k, "LaunchTemplateData.")
		if !ok {
			continue
		}
		field, _, _ := strings.Cut(rest, ".")
		if !launchTemplateDataFields[field] {
			return nil, badRequest("UnknownParameter", "The parameter LaunchTemplateData.%s is not recognized", field)
		}
		lt.Data[rest] = v
	}
	if err := s.readTemplateData(q, lt); err != nil {
		return nil, err
	}
	q.accept("LaunchTemplateData")
	if err := q.done(); err != nil {
		return nil, err
	}
	if !templateName.MatchString(name) {
		return nil, badRequest("InvalidLaunchTemplateName.MalformedException", "A launch template name must be between 3 and 128 characters, and may contain letters, numbers, and the following characters: - ( ) . / _.'")
	}
	if len(lt.Data) == 0 {
		return nil, badRequest("MissingParameter", "The request must contain the parameter LaunchTemplateData")
	}
	lt.Fingerprint = q.fingerprint("ClientToken")
	for _, other := range s.ec2.templates {
		if other.Name != name {
			continue
		}
		if token != "" && other.ClientToken == token && other.Fingerprint == lt.Fingerprint {
			return s.templateResponse(other), nil
		}
		return nil, badRequest("InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use.")
	}
	lt.ID = s.newIDLocked("lt")
	lt.CreatedAt = s.now()
	s.ec2.templates[lt.ID] = lt
	return s.templateResponse(lt), nil
}

// readTemplateData reads the LaunchTemplateData members that change what an
// instance launched from the template looks like.
func (s *Server) readTemplateData(q *queryParams, lt *launchTemplate) error {
	const p = "LaunchTemplateData."
	lt.ImageID = q.values[p+"ImageId"]
	lt.InstanceType = q.values[p+"InstanceType"]
	if ud := q.values[p+"UserData"]; ud != "" {
		raw, err := base64.StdEncoding.DecodeString(ud)
		if err != nil {
			return badRequest("InvalidUserData.Malformed", "Invalid BASE64 encoding of user data.")
		}
		lt.UserData = string(raw)
	}
	lt.ProfileName, lt.ProfileARN = q.values[p+"IamInstanceProfile.Name"], q.values[p+"IamInstanceProfile.Arn"]
	lt.TopLevelGroups = len(q.list(p+"SecurityGroupId")) > 0
	lt.Groups = append(q.list(p+"SecurityGroupId"), q.list(p+"NetworkInterface.1.SecurityGroupId")...)
	for _, ni := range q.indices(p + "NetworkInterface") {
		ti, err := readTemplateInterface(q, ni+".")
		if err != nil {
			return err
		}
		lt.Interfaces = append(lt.Interfaces, ti)
	}
	lt.SubnetID = q.values[p+"NetworkInterface.1.SubnetId"]
	lt.AssociatePublic = q.values[p+"NetworkInterface.1.AssociatePublicIpAddress"] == "true"
	lt.HTTPTokens = q.values[p+"MetadataOptions.HttpTokens"]
	if v := q.values[p+"MetadataOptions.HttpPutResponseHopLimit"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 64 {
			return badRequest("InvalidParameterValue", "Value (%s) for parameter HttpPutResponseHopLimit is invalid: want 1 to 64", v)
		}
		lt.HopLimit = int32(n)
	}
	lt.ReservationID = q.values[p+"CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"]
	lt.PlacementGroupID, lt.PlacementGroupName = q.values[p+"Placement.GroupId"], q.values[p+"Placement.GroupName"]
	if lt.PlacementGroupID != "" && lt.PlacementGroupName != "" {
		return badRequest("InvalidParameterCombination", "Placement.GroupId and Placement.GroupName cannot both be specified")
	}
	if v := q.values[p+"Placement.PartitionNumber"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return badRequest("InvalidParameterValue", "Value (%s) for parameter PartitionNumber is invalid", v)
		}
		lt.PartitionNumber = n
	}
	specs, err := readTagSpecs(q, p+"TagSpecification")
	if err != nil {
		return err
	}
	for rt := range specs {
		if !slices.Contains([]string{"instance", "volume", "network-interface", "spot-instances-request"}, rt) {
			return badRequest("InvalidParameterValue", "The value '%s' for parameter LaunchTemplateData.TagSpecification.ResourceType is invalid. A launch template tags instance, volume, network-interface and spot-instances-request.", rt)
		}
	}
	lt.InstanceTags = cloneTags(specs["instance"])
	lt.InterfaceTags = cloneTags(specs["network-interface"])
	lt.MarketType = q.values[p+"InstanceMarketOptions.MarketType"]
	lt.Tenancy = q.values[p+"Placement.Tenancy"]
	lt.NestedVirtualization = q.values[p+"CpuOptions.NestedVirtualization"]
	for k, to := range map[string]*int{"CoreCount": &lt.CoreCount, "ThreadsPerCore": &lt.ThreadsPerCore} {
		if v, ok := q.values[p+"CpuOptions."+k]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return badRequest("InvalidParameterValue", "Value (%s) for parameter CpuOptions.%s is invalid", v, k)
			}
			*to = n
		}
	}
	return nil
}

// readTemplateInterface reads one LaunchTemplateData.NetworkInterface.N, with the
// checks EC2 makes of its numbers.
func readTemplateInterface(q *queryParams, p string) (templateInterface, error) {
	ti := templateInterface{IPv4Prefixes: -1, IPv6Prefixes: -1, IPv6Addresses: -1, InterfaceType: cmp.Or(q.values[p+"InterfaceType"], "interface"),
		ExplicitPrefixes: len(q.indices(p + "Ipv4Prefix")), ConnTrack: map[string]int{}}
	ints := []struct {
		key string
		to  *int
	}{{"DeviceIndex", &ti.DeviceIndex}, {"NetworkCardIndex", &ti.NetworkCardIndex}, {"Ipv4PrefixCount", &ti.IPv4Prefixes},
		{"Ipv6PrefixCount", &ti.IPv6Prefixes}, {"SecondaryPrivateIpAddressCount", &ti.SecondaryIPs}, {"Ipv6AddressCount", &ti.IPv6Addresses}}
	for _, f := range ints {
		v, ok := q.values[p+f.key]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return ti, badRequest("InvalidParameterValue", "Value (%s) for parameter %s is invalid", v, f.key)
		}
		*f.to = n
	}
	for _, k := range []string{"TcpEstablishedTimeout", "UdpStreamTimeout", "UdpTimeout"} {
		v, ok := q.values[p+"ConnectionTrackingSpecification."+k]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return ti, badRequest("InvalidParameterValue", "Value (%s) for parameter %s is invalid", v, k)
		}
		ti.ConnTrack[k] = n
	}
	if !slices.Contains([]string{"interface", "efa", "efa-only", "interconnect"}, ti.InterfaceType) {
		return ti, badRequest("InvalidParameterValue", "Value (%s) for parameter InterfaceType is invalid", ti.InterfaceType)
	}
	if n := len(q.indices(p + "PrivateIpAddresses")); n > 1 {
		ti.SecondaryIPs += n - 1
	}
	if n := len(q.indices(p + "Ipv6Address")); n > 0 {
		if ti.IPv6Addresses >= 0 {
			return ti, badRequest("InvalidParameterCombination", "IPv6 addresses and IPv6 address count may not be specified on the same request")
		}
		ti.IPv6Addresses = n
	}
	if v, ok := q.values[p+"PrimaryIpv6"]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return ti, badRequest("InvalidParameterValue", "Value (%s) for parameter PrimaryIpv6 is invalid", v)
		}
		ti.PrimaryIPv6 = b
	}
	if ti.IPv4Prefixes >= 0 && (ti.ExplicitPrefixes > 0 || ti.SecondaryIPs > 0) {
		return ti, badRequest("InvalidParameterCombination", "Ipv4PrefixCount cannot be combined with Ipv4Prefixes or secondary private IPv4 addresses")
	}
	return ti, nil
}

func (s *Server) templateView(lt *launchTemplate) xmlLaunchTemplate {
	return xmlLaunchTemplate{
		LaunchTemplateID: lt.ID, LaunchTemplateName: lt.Name, CreateTime: xmlTime(lt.CreatedAt),
		CreatedBy:            fmt.Sprintf("arn:aws:iam::%s:role/tailor", s.opts.AccountID),
		DefaultVersionNumber: 1, LatestVersionNumber: 1, Tags: tagItems(lt.Tags),
	}
}

func (s *Server) templateResponse(lt *launchTemplate) ec2Response {
	return &struct {
		ec2Meta
		LaunchTemplate xmlLaunchTemplate `xml:"launchTemplate"`
	}{LaunchTemplate: s.templateView(lt)}
}

// templateByRef finds a template by ID or name, with EC2's not-found errors.
func (s *Server) templateByRef(id, name string) (*launchTemplate, *apiError) {
	switch {
	case id != "" && name != "":
		return nil, badRequest("InvalidParameterCombination", "You can specify either the launch template ID or the launch template name, but not both.")
	case id != "":
		if lt := s.ec2.templates[id]; lt != nil {
			return lt, nil
		}
		return nil, badRequest("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
	case name != "":
		for _, lt := range s.ec2.templates {
			if lt.Name == name {
				return lt, nil
			}
		}
		return nil, badRequest("InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", name)
	}
	return nil, badRequest("MissingParameter", "The request must contain the parameter launchTemplateName or launchTemplateId")
}

func (s *Server) describeLaunchTemplates(q *queryParams) (ec2Response, error) {
	ids, names := q.list("LaunchTemplateId"), q.list("LaunchTemplateName")
	page, err := readPage(q, 1, 200, 0)
	if err != nil {
		return nil, err
	}
	match, err := filterSet[*launchTemplate]{
		fields: map[string]func(*launchTemplate) []string{
			"launch-template-name": func(lt *launchTemplate) []string { return []string{lt.Name} },
		},
		tags: func(lt *launchTemplate) map[string]string { return lt.Tags },
	}.compile(readFilters(q))
	if err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	for _, id := range ids {
		if _, err := s.templateByRef(id, ""); err != nil {
			return nil, err
		}
	}
	for _, n := range names {
		if _, err := s.templateByRef("", n); err != nil {
			return nil, err
		}
	}
	var all []xmlLaunchTemplate
	for _, lt := range s.sortedTemplates() {
		if len(ids)+len(names) > 0 && !slices.Contains(ids, lt.ID) && !slices.Contains(names, lt.Name) {
			continue
		}
		if match(lt) {
			all = append(all, s.templateView(lt))
		}
	}
	items, next := pageOf(all, page)
	return &struct {
		ec2Meta
		Templates []xmlLaunchTemplate `xml:"launchTemplates>item"`
		NextToken string              `xml:"nextToken,omitempty"`
	}{Templates: items, NextToken: next}, nil
}

func (s *Server) sortedTemplates() []*launchTemplate {
	out := slices.Collect(maps.Values(s.ec2.templates))
	slices.SortFunc(out, func(a, b *launchTemplate) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func (s *Server) deleteLaunchTemplate(q *queryParams) (ec2Response, error) {
	id, name := q.str("LaunchTemplateId"), q.str("LaunchTemplateName")
	if err := q.done(); err != nil {
		return nil, err
	}
	lt, err := s.templateByRef(id, name)
	if err != nil {
		return nil, err
	}
	delete(s.ec2.templates, lt.ID)
	return s.templateResponse(lt), nil
}
