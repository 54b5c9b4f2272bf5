package fakeaws

// EC2's XML answer shapes. Element names follow the EC2 API reference (and the
// aws-sdk-go-v2 ec2 deserializers, which match names case-insensitively and skip
// what they do not know, so a misspelt element here would go unnoticed; the tests
// read every field back through the SDK). Lists are <xSet><item>…</item></xSet>.

type ec2Meta struct {
	RequestID string `xml:"requestId"`
}

func (m *ec2Meta) setRequestID(id string) { m.RequestID = id }

type xmlTagItem struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func tagItems(tags map[string]string) []xmlTagItem {
	out := make([]xmlTagItem, 0, len(tags))
	for _, k := range sortedKeys(tags) {
		out = append(out, xmlTagItem{k, tags[k]})
	}
	return out
}

type xmlItems struct {
	Items []string `xml:"item"`
}

// Instance types.

type xmlInstanceType struct {
	InstanceType                  string              `xml:"instanceType"`
	CurrentGeneration             bool                `xml:"currentGeneration"`
	FreeTierEligible              bool                `xml:"freeTierEligible"`
	SupportedUsageClasses         []string            `xml:"supportedUsageClasses>item"`
	SupportedRootDeviceTypes      []string            `xml:"supportedRootDeviceTypes>item"`
	SupportedVirtualizationTypes  []string            `xml:"supportedVirtualizationTypes>item"`
	BareMetal                     bool                `xml:"bareMetal"`
	Hypervisor                    string              `xml:"hypervisor"`
	ProcessorInfo                 xmlProcessorInfo    `xml:"processorInfo"`
	VCPUInfo                      xmlVCPUInfo         `xml:"vCpuInfo"`
	MemoryInfo                    xmlSizeInMiB        `xml:"memoryInfo"`
	InstanceStorageSupported      bool                `xml:"instanceStorageSupported"`
	InstanceStorageInfo           *xmlInstanceStorage `xml:"instanceStorageInfo,omitempty"`
	EBSInfo                       xmlEBSInfo          `xml:"ebsInfo"`
	NetworkInfo                   xmlNetworkInfo      `xml:"networkInfo"`
	GPUInfo                       *xmlGPUInfo         `xml:"gpuInfo,omitempty"`
	NeuronInfo                    *xmlNeuronInfo      `xml:"neuronInfo,omitempty"`
	InferenceAcceleratorInfo      *xmlInferenceInfo   `xml:"inferenceAcceleratorInfo,omitempty"`
	PlacementGroupInfo            []string            `xml:"placementGroupInfo>supportedStrategies>item"`
	HibernationSupported          bool                `xml:"hibernationSupported"`
	BurstablePerformanceSupported bool                `xml:"burstablePerformanceSupported"`
	DedicatedHostsSupported       bool                `xml:"dedicatedHostsSupported"`
	AutoRecoverySupported         bool                `xml:"autoRecoverySupported"`
	SupportedBootModes            []string            `xml:"supportedBootModes>item"`
	NitroEnclavesSupport          string              `xml:"nitroEnclavesSupport"`
	NitroTpmSupport               string              `xml:"nitroTpmSupport"`
	NitroTpmInfo                  *xmlNitroTpmInfo    `xml:"nitroTpmInfo,omitempty"`
	PhcSupport                    string              `xml:"phcSupport"`
}

type xmlProcessorInfo struct {
	SupportedArchitectures   []string `xml:"supportedArchitectures>item"`
	SustainedClockSpeedInGhz float64  `xml:"sustainedClockSpeedInGhz,omitempty"`
	Manufacturer             string   `xml:"manufacturer"`
	SupportedFeatures        []string `xml:"supportedFeatures>item,omitempty"`
}

type xmlVCPUInfo struct {
	DefaultVCpus          int32 `xml:"defaultVCpus"`
	DefaultCores          int32 `xml:"defaultCores"`
	DefaultThreadsPerCore int32 `xml:"defaultThreadsPerCore"`
}

type xmlSizeInMiB struct {
	SizeInMiB int64 `xml:"sizeInMiB"`
}

type xmlInstanceStorage struct {
	TotalSizeInGB     int64         `xml:"totalSizeInGB"`
	Disks             []xmlDiskInfo `xml:"disks>item"`
	NvmeSupport       string        `xml:"nvmeSupport"`
	EncryptionSupport string        `xml:"encryptionSupport"`
}

type xmlDiskInfo struct {
	SizeInGB int64  `xml:"sizeInGB"`
	Count    int32  `xml:"count"`
	Type     string `xml:"type"`
}

type xmlEBSInfo struct {
	EBSOptimizedSupport   string `xml:"ebsOptimizedSupport"`
	EncryptionSupport     string `xml:"encryptionSupport"`
	NvmeSupport           string `xml:"nvmeSupport"`
	AttachmentLimitType   string `xml:"attachmentLimitType,omitempty"`
	MaximumEbsAttachments int32  `xml:"maximumEbsAttachments,omitempty"`
}

type xmlNetworkInfo struct {
	MaximumNetworkInterfaces     int32                `xml:"maximumNetworkInterfaces"`
	MaximumNetworkCards          int32                `xml:"maximumNetworkCards"`
	DefaultNetworkCardIndex      int32                `xml:"defaultNetworkCardIndex"`
	NetworkCards                 []xmlNetworkCardInfo `xml:"networkCards>item"`
	Ipv4AddressesPerInterface    int32                `xml:"ipv4AddressesPerInterface"`
	Ipv6AddressesPerInterface    int32                `xml:"ipv6AddressesPerInterface"`
	Ipv6Supported                bool                 `xml:"ipv6Supported"`
	EnaSupport                   string               `xml:"enaSupport"`
	EfaSupported                 bool                 `xml:"efaSupported"`
	EfaInfo                      *xmlEfaInfo          `xml:"efaInfo,omitempty"`
	EncryptionInTransitSupported bool                 `xml:"encryptionInTransitSupported"`
	EnaSrdSupported              bool                 `xml:"enaSrdSupported"`
}

type xmlEfaInfo struct {
	MaximumEfaInterfaces int32 `xml:"maximumEfaInterfaces"`
}

type xmlNetworkCardInfo struct {
	NetworkCardIndex         int32 `xml:"networkCardIndex"`
	MaximumNetworkInterfaces int32 `xml:"maximumNetworkInterfaces"`
}

type xmlGPUInfo struct {
	GPUs                []xmlGPUDevice `xml:"gpus>item"`
	TotalGPUMemoryInMiB int64          `xml:"totalGpuMemoryInMiB"`
}

type xmlGPUDevice struct {
	Name         string       `xml:"name"`
	Manufacturer string       `xml:"manufacturer"`
	Count        int32        `xml:"count"`
	MemoryInfo   xmlSizeInMiB `xml:"memoryInfo"`
}

type xmlNeuronInfo struct {
	NeuronDevices                []xmlNeuronDevice `xml:"neuronDevices>item"`
	TotalNeuronDeviceMemoryInMiB int64             `xml:"totalNeuronDeviceMemoryInMiB"`
}

type xmlNeuronDevice struct {
	Count      int32             `xml:"count"`
	Name       string            `xml:"name"`
	CoreInfo   xmlNeuronCoreInfo `xml:"coreInfo"`
	MemoryInfo xmlSizeInMiB      `xml:"memoryInfo"`
}

type xmlNeuronCoreInfo struct {
	Count   int32 `xml:"count"`
	Version int32 `xml:"version"`
}

// xmlInferenceInfo is InferenceAcceleratorInfo, whose list EC2 writes with
// "member" elements, not "item".
type xmlInferenceInfo struct {
	Accelerators              []xmlInferenceDevice `xml:"accelerators>member"`
	TotalInferenceMemoryInMiB int64                `xml:"totalInferenceMemoryInMiB"`
}

type xmlInferenceDevice struct {
	Count        int32        `xml:"count"`
	Name         string       `xml:"name"`
	Manufacturer string       `xml:"manufacturer"`
	MemoryInfo   xmlSizeInMiB `xml:"memoryInfo"`
}

type xmlNitroTpmInfo struct {
	SupportedVersions []string `xml:"supportedVersions>item"`
}

type xmlInstanceTypeOffering struct {
	InstanceType string `xml:"instanceType"`
	LocationType string `xml:"locationType"`
	Location     string `xml:"location"`
}

// Network.

type xmlAvailabilityZone struct {
	ZoneName           string `xml:"zoneName"`
	ZoneID             string `xml:"zoneId"`
	ZoneState          string `xml:"zoneState"`
	RegionName         string `xml:"regionName"`
	ZoneType           string `xml:"zoneType"`
	GroupName          string `xml:"groupName"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
	OptInStatus        string `xml:"optInStatus"`
	MessageSet         string `xml:"messageSet"`
}

type xmlSubnet struct {
	SubnetID                    string                   `xml:"subnetId"`
	SubnetArn                   string                   `xml:"subnetArn"`
	State                       string                   `xml:"state"`
	VpcID                       string                   `xml:"vpcId"`
	OwnerID                     string                   `xml:"ownerId"`
	CidrBlock                   string                   `xml:"cidrBlock"`
	AvailableIPAddressCount     int32                    `xml:"availableIpAddressCount"`
	AvailabilityZone            string                   `xml:"availabilityZone"`
	AvailabilityZoneID          string                   `xml:"availabilityZoneId"`
	DefaultForAz                bool                     `xml:"defaultForAz"`
	MapPublicIPOnLaunch         bool                     `xml:"mapPublicIpOnLaunch"`
	AssignIpv6AddressOnCreation bool                     `xml:"assignIpv6AddressOnCreation"`
	Ipv6CidrBlocks              []xmlIPv6CIDRAssociation `xml:"ipv6CidrBlockAssociationSet>item"`
	Ipv6Native                  bool                     `xml:"ipv6Native"`
	HostnameType                string                   `xml:"privateDnsNameOptionsOnLaunch>hostnameType"`
	Tags                        []xmlTagItem             `xml:"tagSet>item"`
}

type xmlIPv6CIDRAssociation struct {
	AssociationID string `xml:"associationId"`
	CIDR          string `xml:"ipv6CidrBlock"`
	State         string `xml:"ipv6CidrBlockState>state"`
	AddressType   string `xml:"ipv6AddressAttribute"`
	Source        string `xml:"ipSource"`
}

type xmlSecurityGroup struct {
	GroupID          string       `xml:"groupId"`
	GroupName        string       `xml:"groupName"`
	GroupDescription string       `xml:"groupDescription"`
	VpcID            string       `xml:"vpcId"`
	OwnerID          string       `xml:"ownerId"`
	SecurityGroupArn string       `xml:"securityGroupArn"`
	IPPermissions    string       `xml:"ipPermissions"`
	IPPermissionsOut string       `xml:"ipPermissionsEgress"`
	Tags             []xmlTagItem `xml:"tagSet>item"`
}

// Images.

type xmlImage struct {
	ImageID            string                `xml:"imageId"`
	ImageLocation      string                `xml:"imageLocation"`
	ImageState         string                `xml:"imageState"`
	ImageOwnerID       string                `xml:"imageOwnerId"`
	CreationDate       string                `xml:"creationDate"`
	IsPublic           bool                  `xml:"isPublic"`
	Architecture       string                `xml:"architecture"`
	ImageType          string                `xml:"imageType"`
	ImageOwnerAlias    string                `xml:"imageOwnerAlias,omitempty"`
	Name               string                `xml:"name"`
	Description        string                `xml:"description"`
	RootDeviceType     string                `xml:"rootDeviceType"`
	RootDeviceName     string                `xml:"rootDeviceName"`
	BlockDeviceMapping []xmlImageBlockDevice `xml:"blockDeviceMapping>item"`
	VirtualizationType string                `xml:"virtualizationType"`
	Hypervisor         string                `xml:"hypervisor"`
	EnaSupport         bool                  `xml:"enaSupport"`
	SriovNetSupport    string                `xml:"sriovNetSupport"`
	BootMode           string                `xml:"bootMode,omitempty"`
	Platform           string                `xml:"platform,omitempty"`
	PlatformDetails    string                `xml:"platformDetails"`
	UsageOperation     string                `xml:"usageOperation"`
	DeprecationTime    string                `xml:"deprecationTime,omitempty"`
	Tags               []xmlTagItem          `xml:"tagSet>item"`
}

type xmlImageBlockDevice struct {
	DeviceName string         `xml:"deviceName"`
	EBS        xmlEBSSnapshot `xml:"ebs"`
}

type xmlEBSSnapshot struct {
	SnapshotID          string `xml:"snapshotId"`
	VolumeSize          int32  `xml:"volumeSize"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
	VolumeType          string `xml:"volumeType"`
	Encrypted           bool   `xml:"encrypted"`
}

// Launch templates and fleets.

type xmlLaunchTemplate struct {
	LaunchTemplateID     string       `xml:"launchTemplateId"`
	LaunchTemplateName   string       `xml:"launchTemplateName"`
	CreateTime           xmlTime      `xml:"createTime"`
	CreatedBy            string       `xml:"createdBy"`
	DefaultVersionNumber int64        `xml:"defaultVersionNumber"`
	LatestVersionNumber  int64        `xml:"latestVersionNumber"`
	Tags                 []xmlTagItem `xml:"tagSet>item"`
}

type xmlLaunchTemplateAndOverrides struct {
	LaunchTemplateSpecification xmlFleetLaunchTemplateSpec `xml:"launchTemplateSpecification"`
	Overrides                   xmlFleetOverrides          `xml:"overrides"`
}

type xmlFleetLaunchTemplateSpec struct {
	LaunchTemplateID   string `xml:"launchTemplateId,omitempty"`
	LaunchTemplateName string `xml:"launchTemplateName,omitempty"`
	Version            string `xml:"version,omitempty"`
}

type xmlFleetOverrides struct {
	InstanceType     string `xml:"instanceType,omitempty"`
	MaxPrice         string `xml:"maxPrice,omitempty"`
	SubnetID         string `xml:"subnetId,omitempty"`
	AvailabilityZone string `xml:"availabilityZone,omitempty"`
	Priority         string `xml:"priority,omitempty"`
	ImageID          string `xml:"imageId,omitempty"`
}

type xmlCreateFleetError struct {
	LaunchTemplateAndOverrides xmlLaunchTemplateAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string                        `xml:"lifecycle"`
	ErrorCode                  string                        `xml:"errorCode"`
	ErrorMessage               string                        `xml:"errorMessage"`
}

type xmlCreateFleetInstance struct {
	LaunchTemplateAndOverrides xmlLaunchTemplateAndOverrides `xml:"launchTemplateAndOverrides"`
	Lifecycle                  string                        `xml:"lifecycle"`
	InstanceIDs                []string                      `xml:"instanceIds>item"`
	InstanceType               string                        `xml:"instanceType"`
}

// Instances.

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	RequesterID   string        `xml:"requesterId,omitempty"`
	GroupSet      string        `xml:"groupSet"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type xmlInstanceState struct {
	Code int32  `xml:"code"`
	Name string `xml:"name"`
}

type xmlGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type xmlInstance struct {
	InstanceID            string                 `xml:"instanceId"`
	ImageID               string                 `xml:"imageId"`
	InstanceState         xmlInstanceState       `xml:"instanceState"`
	PrivateDNSName        string                 `xml:"privateDnsName"`
	DNSName               string                 `xml:"dnsName"`
	Reason                string                 `xml:"reason"`
	AmiLaunchIndex        int32                  `xml:"amiLaunchIndex"`
	ProductCodes          string                 `xml:"productCodes"`
	InstanceType          string                 `xml:"instanceType"`
	LaunchTime            xmlTime                `xml:"launchTime"`
	Placement             xmlPlacement           `xml:"placement"`
	Monitoring            string                 `xml:"monitoring>state"`
	SubnetID              string                 `xml:"subnetId,omitempty"`
	VpcID                 string                 `xml:"vpcId,omitempty"`
	PrivateIPAddress      string                 `xml:"privateIpAddress,omitempty"`
	IPAddress             string                 `xml:"ipAddress,omitempty"`
	SourceDestCheck       bool                   `xml:"sourceDestCheck"`
	Groups                []xmlGroup             `xml:"groupSet>item"`
	StateReason           *xmlStateReason        `xml:"stateReason,omitempty"`
	Architecture          string                 `xml:"architecture"`
	RootDeviceType        string                 `xml:"rootDeviceType"`
	RootDeviceName        string                 `xml:"rootDeviceName"`
	InstanceLifecycle     string                 `xml:"instanceLifecycle,omitempty"`
	SpotInstanceRequestID string                 `xml:"spotInstanceRequestId,omitempty"`
	VirtualizationType    string                 `xml:"virtualizationType"`
	ClientToken           string                 `xml:"clientToken,omitempty"`
	Tags                  []xmlTagItem           `xml:"tagSet>item"`
	Hypervisor            string                 `xml:"hypervisor"`
	IamInstanceProfile    *xmlIamInstanceProfile `xml:"iamInstanceProfile,omitempty"`
	EBSOptimized          bool                   `xml:"ebsOptimized"`
	EnaSupport            bool                   `xml:"enaSupport"`
	CPUOptions            xmlCPUOptions          `xml:"cpuOptions"`
	CapacityReservationID string                 `xml:"capacityReservationId,omitempty"`
	CapacityReservation   xmlCRSpec              `xml:"capacityReservationSpecification"`
	MetadataOptions       xmlMetadataOptions     `xml:"metadataOptions"`
	BootMode              string                 `xml:"bootMode,omitempty"`
	PlatformDetails       string                 `xml:"platformDetails"`
	UsageOperation        string                 `xml:"usageOperation"`
	UsageOperationUpdate  xmlTime                `xml:"usageOperationUpdateTime"`
	PrivateDNSNameOptions xmlPrivateDNSOptions   `xml:"privateDnsNameOptions"`
	Ipv6Address           string                 `xml:"ipv6Address,omitempty"`
	NetworkInterfaces     []xmlInstanceInterface `xml:"networkInterfaceSet>item"`
}

// xmlInstanceInterface is a network interface of an instance in
// DescribeInstances (the primary one, the only one the fake keeps).
type xmlInstanceInterface struct {
	NetworkInterfaceID string            `xml:"networkInterfaceId"`
	SubnetID           string            `xml:"subnetId"`
	VpcID              string            `xml:"vpcId"`
	OwnerID            string            `xml:"ownerId"`
	Status             string            `xml:"status"`
	PrivateIPAddress   string            `xml:"privateIpAddress"`
	PrivateDNSName     string            `xml:"privateDnsName"`
	SourceDestCheck    bool              `xml:"sourceDestCheck"`
	Groups             []xmlGroup        `xml:"groupSet>item"`
	Attachment         xmlENIAttachment  `xml:"attachment"`
	Ipv6Addresses      []xmlInstanceIPv6 `xml:"ipv6AddressesSet>item"`
	InterfaceType      string            `xml:"interfaceType"`
}

type xmlENIAttachment struct {
	AttachmentID        string `xml:"attachmentId"`
	DeviceIndex         int32  `xml:"deviceIndex"`
	NetworkCardIndex    int32  `xml:"networkCardIndex"`
	Status              string `xml:"status"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlInstanceIPv6 struct {
	Ipv6Address   string `xml:"ipv6Address"`
	IsPrimaryIpv6 bool   `xml:"isPrimaryIpv6"`
}

type xmlPlacement struct {
	AvailabilityZone   string `xml:"availabilityZone"`
	AvailabilityZoneID string `xml:"availabilityZoneId,omitempty"`
	GroupName          string `xml:"groupName"`
	GroupID            string `xml:"groupId,omitempty"`
	PartitionNumber    int    `xml:"partitionNumber,omitempty"`
	Tenancy            string `xml:"tenancy"`
}

type xmlStateReason struct {
	Code    string `xml:"code"`
	Message string `xml:"message"`
}

type xmlIamInstanceProfile struct {
	Arn string `xml:"arn"`
	ID  string `xml:"id"`
}

type xmlCPUOptions struct {
	CoreCount      int32 `xml:"coreCount"`
	ThreadsPerCore int32 `xml:"threadsPerCore"`
}

type xmlCRSpec struct {
	Preference string `xml:"capacityReservationPreference"`
	TargetID   string `xml:"capacityReservationTarget>capacityReservationId,omitempty"`
}

type xmlMetadataOptions struct {
	State                   string `xml:"state"`
	HTTPTokens              string `xml:"httpTokens"`
	HTTPPutResponseHopLimit int32  `xml:"httpPutResponseHopLimit"`
	HTTPEndpoint            string `xml:"httpEndpoint"`
	HTTPProtocolIpv6        string `xml:"httpProtocolIpv6"`
	InstanceMetadataTags    string `xml:"instanceMetadataTags"`
}

type xmlPrivateDNSOptions struct {
	HostnameType                    string `xml:"hostnameType"`
	EnableResourceNameDNSARecord    bool   `xml:"enableResourceNameDnsARecord"`
	EnableResourceNameDNSAAAARecord bool   `xml:"enableResourceNameDnsAAAARecord"`
}

type xmlInstanceStateChange struct {
	InstanceID    string           `xml:"instanceId"`
	CurrentState  xmlInstanceState `xml:"currentState"`
	PreviousState xmlInstanceState `xml:"previousState"`
}

// Prices and reservations.

type xmlSpotPrice struct {
	InstanceType       string  `xml:"instanceType"`
	ProductDescription string  `xml:"productDescription"`
	SpotPrice          string  `xml:"spotPrice"`
	Timestamp          xmlTime `xml:"timestamp"`
	AvailabilityZone   string  `xml:"availabilityZone"`
	AvailabilityZoneID string  `xml:"availabilityZoneId"`
}

type xmlCapacityReservation struct {
	CapacityReservationID  string       `xml:"capacityReservationId"`
	OwnerID                string       `xml:"ownerId"`
	CapacityReservationArn string       `xml:"capacityReservationArn"`
	AvailabilityZoneID     string       `xml:"availabilityZoneId"`
	InstanceType           string       `xml:"instanceType"`
	InstancePlatform       string       `xml:"instancePlatform"`
	AvailabilityZone       string       `xml:"availabilityZone"`
	Tenancy                string       `xml:"tenancy"`
	TotalInstanceCount     int32        `xml:"totalInstanceCount"`
	AvailableInstanceCount int32        `xml:"availableInstanceCount"`
	EBSOptimized           bool         `xml:"ebsOptimized"`
	EphemeralStorage       bool         `xml:"ephemeralStorage"`
	State                  string       `xml:"state"`
	StartDate              xmlTime      `xml:"startDate"`
	EndDate                *xmlTime     `xml:"endDate,omitempty"`
	EndDateType            string       `xml:"endDateType"`
	InstanceMatchCriteria  string       `xml:"instanceMatchCriteria"`
	CreateDate             xmlTime      `xml:"createDate"`
	ReservationType        string       `xml:"reservationType"`
	DeliveryPreference     string       `xml:"deliveryPreference"`
	Tags                   []xmlTagItem `xml:"tagSet>item"`
	Interruptible          bool         `xml:"interruptible"`
	// InterruptionInfo is given for interruptible reservations only.
	InterruptionInfo *xmlInterruptionInfo `xml:"interruptionInfo,omitempty"`
}

type xmlInterruptionInfo struct {
	SourceCapacityReservationID string `xml:"sourceCapacityReservationId"`
	InterruptionType            string `xml:"interruptionType"`
}
