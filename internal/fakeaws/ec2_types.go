package fakeaws

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// metal: c7i.metal-24xl and m5.metal both run without a hypervisor.
func (t *instanceType) metal() bool { return strings.HasPrefix(t.Size, "metal") }

// placementStrategies are the placement groups the type may join: burstable and
// flex types are not placed in cluster groups.
func (t *instanceType) placementStrategies() []string {
	if t.Burstable || strings.HasSuffix(t.Family, "-flex") {
		return []string{"partition", "spread"}
	}
	return []string{"cluster", "partition", "spread"}
}

// usageClasses are how EC2 sells the type, in its order.
func (t *instanceType) usageClasses() []string {
	var usage []string
	if capacityBlockTypes[t.Name] {
		usage = append(usage, "capacity-block")
	}
	usage = append(usage, "on-demand")
	if len(t.SpotPrice) > 0 {
		usage = append(usage, "spot")
	}
	return usage
}

func (t *instanceType) view() xmlInstanceType {
	usage := t.usageClasses()
	x := xmlInstanceType{
		InstanceType: t.Name, CurrentGeneration: t.CurrentGeneration, FreeTierEligible: t.FreeTier,
		SupportedUsageClasses: usage, SupportedRootDeviceTypes: []string{"ebs"}, SupportedVirtualizationTypes: []string{"hvm"},
		BareMetal: t.metal(), Hypervisor: t.Hypervisor,
		ProcessorInfo:            xmlProcessorInfo{SupportedArchitectures: []string{t.Arch}, Manufacturer: t.Manufacturer, SustainedClockSpeedInGhz: t.ClockGHz},
		VCPUInfo:                 xmlVCPUInfo{DefaultVCpus: t.VCPUs, DefaultCores: max(1, t.VCPUs/t.ThreadsPerCore), DefaultThreadsPerCore: t.ThreadsPerCore},
		MemoryInfo:               xmlSizeInMiB{SizeInMiB: t.MemoryMiB},
		InstanceStorageSupported: t.StorageGB > 0,
		EBSInfo:                  xmlEBSInfo{EBSOptimizedSupport: "default", EncryptionSupport: "supported", NvmeSupport: "unsupported"},
		NetworkInfo: xmlNetworkInfo{
			MaximumNetworkInterfaces: t.ENIs, MaximumNetworkCards: 1,
			NetworkCards:              []xmlNetworkCardInfo{{NetworkCardIndex: 0, MaximumNetworkInterfaces: t.ENIs}},
			Ipv4AddressesPerInterface: t.IPv4PerENI, Ipv6AddressesPerInterface: t.IPv4PerENI, Ipv6Supported: true,
			EnaSupport: "required", EncryptionInTransitSupported: t.EncryptionInTransit,
		},
		PlacementGroupInfo:            t.placementStrategies(),
		BurstablePerformanceSupported: t.Burstable, DedicatedHostsSupported: !t.Burstable, AutoRecoverySupported: true,
		SupportedBootModes: []string{"legacy-bios", "uefi"}, NitroEnclavesSupport: "unsupported", NitroTpmSupport: "unsupported",
		PhcSupport: "unsupported",
	}
	if t.nitro() {
		// Nitro types share 28 attachments between EBS volumes, network interfaces
		// and NVMe instance-store volumes.
		x.EBSInfo.NvmeSupport = "required"
		x.EBSInfo.AttachmentLimitType, x.EBSInfo.MaximumEbsAttachments = "shared", 28
	} else {
		x.NetworkInfo.EnaSupport = "unsupported"
	}
	if t.Arch == "arm64" {
		x.SupportedBootModes = []string{"uefi"}
	}
	x.ProcessorInfo.SupportedFeatures = t.supportedFeatures()
	if len(t.Cards) > 0 {
		x.NetworkInfo.MaximumNetworkCards, x.NetworkInfo.MaximumNetworkInterfaces = int32(len(t.Cards)), 0
		x.NetworkInfo.DefaultNetworkCardIndex = t.DefaultCard
		x.NetworkInfo.NetworkCards = nil
		for c, n := range t.Cards {
			x.NetworkInfo.MaximumNetworkInterfaces += n
			x.NetworkInfo.NetworkCards = append(x.NetworkInfo.NetworkCards, xmlNetworkCardInfo{NetworkCardIndex: int32(c), MaximumNetworkInterfaces: n})
		}
	} else if cards := t.networkCards(); cards > 1 {
		x.NetworkInfo.MaximumNetworkCards, x.NetworkInfo.MaximumNetworkInterfaces = cards, cards*t.ENIs
		x.NetworkInfo.NetworkCards = nil
		for c := range cards {
			x.NetworkInfo.NetworkCards = append(x.NetworkInfo.NetworkCards, xmlNetworkCardInfo{NetworkCardIndex: c, MaximumNetworkInterfaces: t.ENIs})
		}
	}
	if efa := t.efaInterfaces(); efa > 0 {
		x.NetworkInfo.EfaSupported, x.NetworkInfo.EfaInfo = true, &xmlEfaInfo{MaximumEfaInterfaces: efa}
	}
	if t.StorageGB > 0 {
		x.InstanceStorageInfo = &xmlInstanceStorage{
			TotalSizeInGB: t.StorageGB, Disks: []xmlDiskInfo{{SizeInGB: t.StorageGB / int64(t.Disks), Count: t.Disks, Type: t.DiskType}},
			NvmeSupport: "required", EncryptionSupport: "required",
		}
		if !t.StorageNVMe {
			x.InstanceStorageInfo.NvmeSupport, x.InstanceStorageInfo.EncryptionSupport = "unsupported", "unsupported"
		}
	}
	if g := t.GPU; g.Name != "" {
		x.GPUInfo = &xmlGPUInfo{
			GPUs:                []xmlGPUDevice{{Name: g.Name, Manufacturer: g.Manufacturer, Count: g.Count, MemoryInfo: xmlSizeInMiB{SizeInMiB: g.MemoryMiB}}},
			TotalGPUMemoryInMiB: g.MemoryMiB * int64(g.Count),
		}
	}
	x.NeuronInfo, x.InferenceAcceleratorInfo = t.acceleratorViews()
	return x
}

// acceleratorViews are the type's Neuron devices (NeuronInfo) and its inference
// accelerators (InferenceAcceleratorInfo): EC2 lists Inferentia in both, the
// later Neuron devices in NeuronInfo only, other makers' in
// InferenceAcceleratorInfo only.
func (t *instanceType) acceleratorViews() (*xmlNeuronInfo, *xmlInferenceInfo) {
	a := t.Accelerator
	if a.Count == 0 {
		return nil, nil
	}
	var neuron *xmlNeuronInfo
	if d, ok := neuronDevice[a.Name]; ok {
		neuron = &xmlNeuronInfo{
			NeuronDevices: []xmlNeuronDevice{{Count: a.Count, Name: a.Name, CoreInfo: xmlNeuronCoreInfo{Count: a.Cores, Version: d.CoreVersion},
				MemoryInfo: xmlSizeInMiB{SizeInMiB: int64(d.MemoryMiB)}}},
			TotalNeuronDeviceMemoryInMiB: int64(d.MemoryMiB) * int64(a.Count),
		}
	}
	var inference *xmlInferenceInfo
	if mem, ok := inferenceAcceleratorMemoryMiB[a.Name]; ok {
		inference = &xmlInferenceInfo{
			Accelerators:              []xmlInferenceDevice{{Count: a.Count, Name: a.Name, Manufacturer: a.Manufacturer, MemoryInfo: xmlSizeInMiB{SizeInMiB: mem}}},
			TotalInferenceMemoryInMiB: mem * int64(a.Count),
		}
	}
	return neuron, inference
}

func (s *Server) describeInstanceTypes(q *queryParams) (ec2Response, error) {
	names := q.list("InstanceType")
	// Without MaxResults EC2 answers 100 types a page, which makes every caller
	// paginate through the full catalog.
	page, err := readPage(q, 5, 100, 100)
	if err != nil {
		return nil, err
	}
	match, err := filterSet[*instanceType]{fields: map[string]func(*instanceType) []string{
		"instance-type":                           func(t *instanceType) []string { return []string{t.Name} },
		"current-generation":                      func(t *instanceType) []string { return []string{boolString(t.CurrentGeneration)} },
		"bare-metal":                              func(t *instanceType) []string { return []string{boolString(t.metal())} },
		"burstable-performance-supported":         func(t *instanceType) []string { return []string{boolString(t.Burstable)} },
		"free-tier-eligible":                      func(t *instanceType) []string { return []string{boolString(t.FreeTier)} },
		"hypervisor":                              func(t *instanceType) []string { return []string{t.Hypervisor} },
		"processor-info.supported-architecture":   func(t *instanceType) []string { return []string{t.Arch} },
		"processor-info.manufacturer":             func(t *instanceType) []string { return []string{t.Manufacturer} },
		"supported-virtualization-type":           func(*instanceType) []string { return []string{"hvm"} },
		"supported-root-device-type":              func(*instanceType) []string { return []string{"ebs"} },
		"supported-usage-class":                   func(t *instanceType) []string { return t.usageClasses() },
		"vcpu-info.default-vcpus":                 func(t *instanceType) []string { return []string{strconv.Itoa(int(t.VCPUs))} },
		"memory-info.size-in-mib":                 func(t *instanceType) []string { return []string{strconv.FormatInt(t.MemoryMiB, 10)} },
		"instance-storage-supported":              func(t *instanceType) []string { return []string{boolString(t.StorageGB > 0)} },
		"network-info.maximum-network-interfaces": func(t *instanceType) []string { return []string{strconv.Itoa(int(t.ENIs))} },
	}}.compile(readFilters(q))
	if err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	for _, n := range names {
		if s.inv.types[n] == nil {
			return nil, badRequest("InvalidInstanceType", "The following supplied instance types do not exist: [%s]", n)
		}
	}
	var all []xmlInstanceType
	for _, n := range s.inv.typeNames {
		t := s.inv.types[n]
		if (len(names) == 0 || slices.Contains(names, n)) && match(t) {
			all = append(all, t.view())
		}
	}
	items, next := pageOf(all, page)
	return &struct {
		ec2Meta
		Types     []xmlInstanceType `xml:"instanceTypeSet>item"`
		NextToken string            `xml:"nextToken,omitempty"`
	}{Types: items, NextToken: next}, nil
}

func (s *Server) describeInstanceTypeOfferings(q *queryParams) (ec2Response, error) {
	locationType := q.str("LocationType")
	if locationType == "" {
		locationType = "region"
	}
	page, err := readPage(q, 5, 1000, 1000)
	if err != nil {
		return nil, err
	}
	match, err := filterSet[xmlInstanceTypeOffering]{fields: map[string]func(xmlInstanceTypeOffering) []string{
		"instance-type": func(o xmlInstanceTypeOffering) []string { return []string{o.InstanceType} },
		"location":      func(o xmlInstanceTypeOffering) []string { return []string{o.Location} },
	}}.compile(readFilters(q))
	if err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	var all []xmlInstanceTypeOffering
	for _, n := range s.inv.typeNames {
		t := s.inv.types[n]
		var locations []string
		switch locationType {
		case "region":
			locations = []string{s.opts.Region}
		case "availability-zone":
			locations = t.Zones
		case "availability-zone-id":
			for _, z := range t.Zones {
				locations = append(locations, s.inv.zoneID(z))
			}
		default:
			return nil, badRequest("InvalidParameterValue", "Value (%s) for parameter locationType is invalid. Valid values are region, availability-zone, availability-zone-id, outpost.", locationType)
		}
		for _, l := range locations {
			o := xmlInstanceTypeOffering{InstanceType: n, LocationType: locationType, Location: l}
			if match(o) {
				all = append(all, o)
			}
		}
	}
	items, next := pageOf(all, page)
	return &struct {
		ec2Meta
		Offerings []xmlInstanceTypeOffering `xml:"instanceTypeOfferingSet>item"`
		NextToken string                    `xml:"nextToken,omitempty"`
	}{Offerings: items, NextToken: next}, nil
}

// Spot prices.

// spotProducts are the product descriptions spot prices are listed under, with
// the operating system each prices.
var spotProducts = map[string]string{"Linux/UNIX": "Linux", "Linux/UNIX (Amazon VPC)": "Linux", "Windows": "Windows", "Windows (Amazon VPC)": "Windows"}

func (s *Server) describeSpotPriceHistory(q *queryParams) (ec2Response, error) {
	types, products := q.list("InstanceType"), q.list("ProductDescription")
	zoneName := q.str("AvailabilityZone")
	q.str("AvailabilityZoneId")
	now := s.now()
	start, hasStart, err := q.optTime("StartTime")
	if err != nil {
		return nil, err
	}
	end, hasEnd, err := q.optTime("EndTime")
	if err != nil {
		return nil, err
	}
	if !hasEnd {
		end = now
	}
	page, err := readPage(q, 1, 10000, 1000)
	if err != nil {
		return nil, err
	}
	match, err := filterSet[xmlSpotPrice]{fields: map[string]func(xmlSpotPrice) []string{
		"instance-type":       func(p xmlSpotPrice) []string { return []string{p.InstanceType} },
		"availability-zone":   func(p xmlSpotPrice) []string { return []string{p.AvailabilityZone} },
		"product-description": func(p xmlSpotPrice) []string { return []string{p.ProductDescription} },
		"spot-price":          func(p xmlSpotPrice) []string { return []string{p.SpotPrice} },
	}}.compile(readFilters(q))
	if err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	if len(products) == 0 {
		products = slices.Sorted(maps.Keys(spotProducts))
	}
	var all []xmlSpotPrice
	for _, n := range s.inv.typeNames {
		if len(types) > 0 && !slices.Contains(types, n) {
			continue
		}
		for _, z := range s.inv.types[n].Zones {
			if zoneName != "" && z != zoneName {
				continue
			}
			points := s.inv.spotHistory[Offering{InstanceType: n, Zone: z}]
			for _, p := range pricesIn(points, start, hasStart, end) {
				for _, prod := range products {
					os, ok := spotProducts[prod]
					if !ok {
						continue
					}
					x := xmlSpotPrice{
						InstanceType: n, ProductDescription: prod, SpotPrice: strconv.FormatFloat(osPrice(s.inv.types[n], p.price, os), 'f', 6, 64),
						Timestamp: xmlTime(p.at), AvailabilityZone: z, AvailabilityZoneID: s.inv.zoneID(z),
					}
					if match(x) {
						all = append(all, x)
					}
				}
			}
		}
	}
	// Newest first, as EC2 lists them.
	slices.SortStableFunc(all, func(a, b xmlSpotPrice) int {
		return time.Time(b.Timestamp).Compare(time.Time(a.Timestamp))
	})
	items, next := pageOf(all, page)
	return &struct {
		ec2Meta
		Prices    []xmlSpotPrice `xml:"spotPriceHistorySet>item"`
		NextToken string         `xml:"nextToken,omitempty"`
	}{Prices: items, NextToken: next}, nil
}

// pricesIn is the history EC2 reports for [start, end]: every change in the window
// and the price in effect at its start (so a StartTime of now still gives the
// current price).
func pricesIn(points []pricePoint, start time.Time, hasStart bool, end time.Time) []pricePoint {
	var out []pricePoint
	for i, p := range points {
		if p.at.After(end) {
			break
		}
		inEffectAtStart := i+1 == len(points) || points[i+1].at.After(start)
		if !hasStart || !p.at.Before(start) || inEffectAtStart {
			out = append(out, p)
		}
	}
	return out
}

// SetSpotPrice records a new spot price for an instance type in a zone, as of now.
func (s *Server) SetSpotPrice(instanceType, zone string, price float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := Offering{InstanceType: instanceType, Zone: zone}
	s.inv.spotHistory[key] = append(s.inv.spotHistory[key], pricePoint{at: s.now(), price: price})
	if t := s.inv.types[instanceType]; t != nil {
		t.SpotPrice[zone] = price
	}
}
