package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClass is how nodes are launched on AWS: where (subnets, security groups,
// capacity reservations), from what (AMIs, user data), as whom (IAM role or instance
// profile), and with which kubelet settings, disks and metadata options. NodePools
// point at it with nodeClassRef {group: karpenter.k8s.aws, kind: EC2NodeClass}.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ec2nodeclasses,scope=Cluster,categories=karpenter,shortName={ec2nc,ec2ncs}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Role",type="string",JSONPath=".spec.role",priority=1
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:message="must specify exactly one of ['role', 'instanceProfile']",rule="(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))"
	// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2') : true)"
	// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2023') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2023') : true)"
	// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') in ['bottlerocket', 'bottlerocket-fips']) ? (self.amiFamily == 'Custom' || self.amiFamily == 'Bottlerocket') : true)"
	// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2019') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2019') : true)"
	// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2022') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2022') : true)"
	// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias",rule="!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2025') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2025') : true)"
	// +kubebuilder:validation:XValidation:message="must specify amiFamily if amiSelectorTerms does not contain an alias",rule="self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)"
	// +kubebuilder:validation:XValidation:message="instanceStorePolicy RAID0 is not supported on Windows AMI families: nothing on a Windows node sets up the instance-store disks",rule="!has(self.instanceStorePolicy) || self.instanceStorePolicy != 'RAID0' || !(has(self.amiFamily) ? self.amiFamily.startsWith('Windows') : self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.startsWith('windows')))"
	Spec   EC2NodeClassSpec   `json:"spec,omitempty"`
	Status EC2NodeClassStatus `json:"status,omitempty"`
}

// EC2NodeClassList is a list of EC2NodeClasses.
//
// +kubebuilder:object:root=true
type EC2NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EC2NodeClass `json:"items"`
}

// EC2NodeClassSpec is the operator's AWS configuration for a set of nodes.
type EC2NodeClassSpec struct {
	// SubnetSelectorTerms find the subnets nodes launch into; a subnet matching any
	// term is used.
	// +kubebuilder:validation:XValidation:message="subnetSelectorTerms cannot be empty",rule="self.size() != 0"
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id']",rule="self.all(x, has(x.tags) || has(x.id))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",rule="!self.all(x, has(x.id) && has(x.tags))"
	// +kubebuilder:validation:MaxItems:=30
	// +required
	SubnetSelectorTerms []SubnetSelectorTerm `json:"subnetSelectorTerms"`
	// SecurityGroupSelectorTerms find the security groups nodes get; every group
	// matching any term is attached.
	// +kubebuilder:validation:XValidation:message="securityGroupSelectorTerms cannot be empty",rule="self.size() != 0"
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",rule="!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))"
	// +kubebuilder:validation:XValidation:message="'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",rule="!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))"
	// +kubebuilder:validation:MaxItems:=30
	// +required
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms"`
	// CapacityReservationSelectorTerms find the on-demand capacity reservations nodes
	// may launch into; a reservation matching any term is eligible.
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term",rule="!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))"
	// +kubebuilder:validation:MaxItems:=30
	// +optional
	CapacityReservationSelectorTerms []CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty"`
	// PlacementGroupSelector names the existing EC2 placement group (cluster,
	// partition or spread) every node of this class launches into, by name or, for a
	// group shared from another account, by id. Tailor neither creates nor deletes
	// the group. EC2 picks the partition of a partition group; nodes do not choose it.
	// +optional
	PlacementGroupSelector *PlacementGroupSelectorTerm `json:"placementGroupSelector,omitempty"`
	// AssociatePublicIPAddress says whether nodes get a public IPv4 address; unset
	// leaves it to the subnet's setting.
	// +optional
	AssociatePublicIPAddress *bool `json:"associatePublicIPAddress,omitempty"`
	// IPPrefixCount is the number of IPv4 prefixes assigned to the primary network
	// interface at launch.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	IPPrefixCount *int32 `json:"ipPrefixCount,omitempty"`
	// AMISelectorTerms find the images nodes boot; an image matching any term is a
	// candidate, and the newest compatible one is used. An alias term
	// ("family@version") selects the EKS-optimized image of that family and must be
	// the only term.
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",rule="!(self.exists(x, has(x.alias)) && self.size() != 1)"
	// +kubebuilder:validation:MinItems:=1
	// +kubebuilder:validation:MaxItems:=30
	// +required
	AMISelectorTerms []AMISelectorTerm `json:"amiSelectorTerms"`
	// AMIFamily decides the user data format and the default block devices. It may
	// be left out when an alias term names the family, and then may only be that
	// family or Custom; without an alias it is required. Use AMIFamily() to read the
	// effective family.
	// +kubebuilder:validation:Enum:={AL2,AL2023,Bottlerocket,Custom,Windows2019,Windows2022,Windows2025}
	// +optional
	AMIFamily *string `json:"amiFamily,omitempty"`
	// UserData is merged with what the node needs to join the cluster, in the
	// format of the AMI family (MIME multipart, TOML, PowerShell, …).
	// +optional
	UserData *string `json:"userData,omitempty"`
	// Role is the IAM role nodes run as; an instance profile is made for it.
	// Exactly one of role and instanceProfile is set.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="role cannot be empty"
	// +optional
	Role string `json:"role,omitempty"`
	// InstanceProfile is an existing IAM instance profile nodes launch with; it must
	// already carry a role. Exactly one of role and instanceProfile is set.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="instanceProfile cannot be empty"
	// +optional
	InstanceProfile *string `json:"instanceProfile,omitempty"`
	// Tags are added to the instances, volumes and launch templates made for nodes.
	// Tags Tailor uses to find its own resources are refused.
	// +kubebuilder:validation:XValidation:message="empty tag keys aren't supported",rule="self.all(k, k != '')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching eks:eks-cluster-name",rule="self.all(k, k !='eks:eks-cluster-name')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching kubernetes.io/cluster/",rule="self.all(k, !k.startsWith('kubernetes.io/cluster') )"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.sh/nodepool",rule="self.all(k, k != 'karpenter.sh/nodepool')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.sh/nodeclaim",rule="self.all(k, k !='karpenter.sh/nodeclaim')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass",rule="self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// Kubelet overrides kubelet settings of the nodes; the allocatable resources
	// Tailor plans with follow them.
	// +kubebuilder:validation:XValidation:message="imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",rule="has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true"
	// +kubebuilder:validation:XValidation:message="evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",rule="has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true"
	// +kubebuilder:validation:XValidation:message="evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",rule="has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true"
	// +optional
	Kubelet *KubeletConfiguration `json:"kubelet,omitempty"`
	// BlockDeviceMappings replace the AMI family's default volumes.
	// +kubebuilder:validation:XValidation:message="must have only one blockDeviceMappings with rootVolume",rule="self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1"
	// +kubebuilder:validation:MaxItems:=50
	// +optional
	BlockDeviceMappings []*BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	// InstanceStorePolicy says what to do with the instance's local NVMe disks.
	// RAID0 needs a family whose bootstrap sets the disks up (AL2, AL2023,
	// Bottlerocket) or Custom user data that does; Windows families are refused.
	// +optional
	InstanceStorePolicy *InstanceStorePolicy `json:"instanceStorePolicy,omitempty"`
	// DetailedMonitoring turns on one-minute CloudWatch metrics for nodes.
	// +optional
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`
	// MetadataOptions configure the instance metadata service (IMDS) of nodes.
	// Left out, IMDSv2 is required and pods cannot reach it through the node's
	// network (hop limit 1).
	// +kubebuilder:default={"httpEndpoint":"enabled","httpProtocolIPv6":"disabled","httpPutResponseHopLimit":1,"httpTokens":"required"}
	// +optional
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`
	// Context is passed as the reserved Context field of EC2 CreateFleet.
	// +optional
	Context *string `json:"context,omitempty"`
	// NetworkInterfaces are the network interfaces every node launches with, by
	// network card and device index, in place of the one primary interface: ENA
	// ("interface") and EFA-only ("efa-only") interfaces. Only instance types with
	// those network cards, devices and EFA interfaces are launched, and a node's
	// vpc.amazonaws.com/efa is its efa-only interfaces.
	// +kubebuilder:validation:XValidation:message="networkInterfaces must include a primary interface with interfaceType='interface'",rule="self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')"
	// +kubebuilder:validation:XValidation:message="networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card",rule="self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))"
	// +kubebuilder:validation:MaxItems:=150
	// +optional
	NetworkInterfaces []*NetworkInterface `json:"networkInterfaces,omitempty"`
	// ConnectionTracking sets the idle timeouts of connection tracking on the
	// network interfaces of the launch template (not efa-only ones, and not the
	// ones a CNI adds later). Only instance types built on Nitro are launched.
	// +kubebuilder:validation:XValidation:message="at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",rule="has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)"
	// +optional
	ConnectionTracking *ConnectionTracking `json:"connectionTracking,omitempty"`
	// CPUOptions are the processor options nodes launch with.
	// +optional
	CPUOptions *CPUOptions `json:"cpuOptions,omitempty"`
}

// InterfaceType is the kind of a network interface of networkInterfaces.
type InterfaceType string

const (
	// InterfaceTypeInterface is an ENA interface with IP addresses.
	InterfaceTypeInterface InterfaceType = "interface"
	// InterfaceTypeEFAOnly is an EFA device without IP networking.
	InterfaceTypeEFAOnly InterfaceType = "efa-only"
)

// NetworkInterface is one network interface nodes launch with.
type NetworkInterface struct {
	// NetworkCardIndex is the network card the interface is on.
	// +kubebuilder:validation:Minimum:=0
	// +required
	NetworkCardIndex int32 `json:"networkCardIndex"`
	// DeviceIndex is the interface's device index on its card.
	// +kubebuilder:validation:Minimum:=0
	// +required
	DeviceIndex int32 `json:"deviceIndex"`
	// InterfaceType is "interface" (ENA) or "efa-only".
	// +kubebuilder:validation:Enum:={interface,efa-only}
	// +required
	InterfaceType InterfaceType `json:"interfaceType"`
}

// ConnectionTracking are connection-tracking idle timeouts, in seconds; one left
// out keeps EC2's default.
type ConnectionTracking struct {
	// TCPEstablishedTimeout is the idle timeout of established TCP connections
	// (60 to 432,000; EC2's default is 432,000, or 350 on Nitro v6 types).
	// +kubebuilder:validation:Minimum:=60
	// +kubebuilder:validation:Maximum:=432000
	// +optional
	TCPEstablishedTimeout *int32 `json:"tcpEstablishedTimeout,omitempty"`
	// UDPStreamTimeout is the idle timeout of UDP flows that have seen more than
	// one request-response transaction (60 to 180; EC2's default is 180).
	// +kubebuilder:validation:Minimum:=60
	// +kubebuilder:validation:Maximum:=180
	// +optional
	UDPStreamTimeout *int32 `json:"udpStreamTimeout,omitempty"`
	// UDPTimeout is the idle timeout of UDP flows seen in one direction or in a
	// single request-response transaction (30 to 60; EC2's default is 30).
	// +kubebuilder:validation:Minimum:=30
	// +kubebuilder:validation:Maximum:=60
	// +optional
	UDPTimeout *int32 `json:"udpTimeout,omitempty"`
}

// CPUOptions are processor options of nodes.
type CPUOptions struct {
	// NestedVirtualization lets nodes run virtual machines of their own
	// ("enabled"); only instance types whose processor reports the
	// nested-virtualization feature are launched then.
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	NestedVirtualization *string `json:"nestedVirtualization,omitempty"`
}

// SubnetSelectorTerm selects subnets; every field set must match.
type SubnetSelectorTerm struct {
	// Tags select subnets carrying each of these tags; the value "*" matches any
	// value of the key.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID selects one subnet by id.
	// +kubebuilder:validation:Pattern="subnet-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups; every field set must match.
type SecurityGroupSelectorTerm struct {
	// Tags select groups carrying each of these tags; the value "*" matches any
	// value of the key.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID selects one security group by id.
	// +kubebuilder:validation:Pattern:="sg-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
	// Name selects groups by their group name (not their Name tag).
	// +optional
	Name string `json:"name,omitempty"`
	// VPCID narrows the term to groups of this VPC, so that a name or tags shared
	// by groups of several VPCs pick the one of the nodes' VPC. It selects nothing
	// alone: it goes with id, name or tags.
	// +kubebuilder:validation:Pattern:="vpc-[0-9a-z]+"
	// +optional
	VPCID string `json:"vpcID,omitempty"`
}

// CapacityReservationSelectorTerm selects capacity reservations; every field set
// must match.
type CapacityReservationSelectorTerm struct {
	// Tags select reservations carrying each of these tags; the value "*" matches
	// any value of the key.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID selects one reservation by id.
	// +kubebuilder:validation:Pattern:="^cr-[0-9a-z]+$"
	// +optional
	ID string `json:"id,omitempty"`
	// OwnerID is the AWS account that owns the reservation (for shared ones).
	// +kubebuilder:validation:Pattern:="^[0-9]{12}$"
	// +optional
	OwnerID string `json:"ownerID,omitempty"`
	// InstanceMatchCriteria selects reservations that take any matching launch
	// ("open") or only launches that target them ("targeted").
	// +kubebuilder:validation:Enum:={open,targeted}
	// +optional
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
}

// PlacementGroupSelectorTerm selects one placement group: exactly one of name and id.
//
// +kubebuilder:validation:XValidation:message="expected exactly one of ['name', 'id']",rule="has(self.name) != has(self.id)"
type PlacementGroupSelectorTerm struct {
	// Name selects the group of this name in the account.
	// +kubebuilder:validation:MinLength:=1
	// +kubebuilder:validation:MaxLength:=255
	// +optional
	Name string `json:"name,omitempty"`
	// ID selects the group by id; a group shared from another account can only be
	// selected this way.
	// +kubebuilder:validation:Pattern:="^pg-[0-9a-z]+$"
	// +optional
	ID string `json:"id,omitempty"`
}

// AMISelectorTerm selects images; every field set must match.
type AMISelectorTerm struct {
	// Alias names an EKS-optimized image as "family@version": the family is one of
	// al2, al2023, bottlerocket, bottlerocket-fips, windows2019, windows2022,
	// windows2025; the version is that family's release (al2023@v20240625,
	// bottlerocket@v1.20.3) or "latest", which follows new releases (and drifts nodes
	// to them). Windows families only take "latest". bottlerocket-fips is the FIPS
	// variant of the Bottlerocket image, bootstrapped as the Bottlerocket family.
	// +kubebuilder:validation:XValidation:message="'alias' is improperly formatted, must match the format 'family@version'",rule="self.matches('^[a-zA-Z0-9-]+@.+$')"
	// +kubebuilder:validation:XValidation:message="family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'bottlerocket-fips', 'windows2019', 'windows2022', 'windows2025'",rule="self.split('@')[0] in ['al2','al2023','bottlerocket','bottlerocket-fips','windows2019','windows2022','windows2025']"
	// +kubebuilder:validation:XValidation:message="windows families may only specify version 'latest'",rule="self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? self.split('@')[1] == 'latest' : true"
	// +kubebuilder:validation:MaxLength=30
	// +optional
	Alias string `json:"alias,omitempty"`
	// Tags select images carrying each of these tags; the value "*" matches any
	// value of the key.
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID selects one image by id.
	// +kubebuilder:validation:Pattern:="ami-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
	// Name selects images by their image name (not their Name tag); "*" wildcards
	// are allowed.
	// +optional
	Name string `json:"name,omitempty"`
	// Owner restricts the images to these owners: account ids, "self", "amazon" or
	// "aws-marketplace", comma separated.
	// +optional
	Owner string `json:"owner,omitempty"`
	// SSMParameter is the name or ARN of an SSM parameter whose value is an image id.
	// +optional
	SSMParameter string `json:"ssmParameter,omitempty"`
}

// KubeletConfiguration is the subset of the kubelet's configuration an EC2NodeClass
// may set; names and meanings are the kubelet's own.
type KubeletConfiguration struct {
	// ClusterDNS are the cluster DNS server addresses the kubelet hands to pods.
	// +optional
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// MaxPods caps the pods on a node, overriding the limit from the instance's
	// network interfaces.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	MaxPods *int32 `json:"maxPods,omitempty"`
	// PodsPerCore caps the pods on a node at this many per vCPU; maxPods still
	// applies when lower.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	PodsPerCore *int32 `json:"podsPerCore,omitempty"`
	// SystemReserved is set aside for the operating system's daemons.
	// +kubebuilder:validation:XValidation:message="valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"
	// +kubebuilder:validation:XValidation:message="systemReserved value cannot be a negative resource quantity",rule="self.all(x, !self[x].startsWith('-'))"
	// +optional
	SystemReserved map[string]ReservedQuantity `json:"systemReserved,omitempty"`
	// KubeReserved is set aside for Kubernetes' own daemons (kubelet, container
	// runtime); left out, it is computed from the instance type.
	// +kubebuilder:validation:XValidation:message="valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"
	// +kubebuilder:validation:XValidation:message="kubeReserved value cannot be a negative resource quantity",rule="self.all(x, !self[x].startsWith('-'))"
	// +optional
	KubeReserved map[string]ReservedQuantity `json:"kubeReserved,omitempty"`
	// EvictionHard are the thresholds, by eviction signal, at which the kubelet
	// evicts pods at once.
	// +kubebuilder:validation:XValidation:message="valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +optional
	EvictionHard map[string]EvictionThreshold `json:"evictionHard,omitempty"`
	// EvictionSoft are the thresholds, by eviction signal, at which the kubelet
	// evicts pods once the signal's grace period has passed.
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoft are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +optional
	EvictionSoft map[string]EvictionThreshold `json:"evictionSoft,omitempty"`
	// EvictionSoftGracePeriod is, by eviction signal, how long a soft threshold
	// must be crossed before pods are evicted.
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoftGracePeriod are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +optional
	EvictionSoftGracePeriod map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`
	// EvictionMaxPodGracePeriod caps, in seconds, the termination grace period
	// given to pods evicted for a soft threshold.
	// +optional
	EvictionMaxPodGracePeriod *int32 `json:"evictionMaxPodGracePeriod,omitempty"`
	// ImageGCHighThresholdPercent is the disk usage above which image garbage
	// collection always runs; it must exceed imageGCLowThresholdPercent.
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// ImageGCLowThresholdPercent is the disk usage image garbage collection frees
	// down to, and below which it never runs.
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// CPUCFSQuota enforces CPU limits with CFS quota.
	// +optional
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
}

// ReservedQuantity is a resource quantity ("100m", "1Gi") reserved by the kubelet.
//
// +kubebuilder:validation:Pattern=`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`
type ReservedQuantity string

// EvictionThreshold is an eviction threshold: a quantity ("100Mi") or a percentage
// of the signal's capacity ("10%").
//
// +kubebuilder:validation:Pattern=`^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$`
type EvictionThreshold string

// MetadataOptions configure the instance metadata service of nodes. A field left
// out inside a metadataOptions that is set takes the same default as a
// metadataOptions left out.
type MetadataOptions struct {
	// HTTPEndpoint turns the metadata service on or off; off, nothing on the node
	// can read instance metadata.
	// +kubebuilder:default=enabled
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	HTTPEndpoint *string `json:"httpEndpoint,omitempty"`
	// HTTPProtocolIPv6 turns the metadata service's IPv6 endpoint on or off.
	// +kubebuilder:default=disabled
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	HTTPProtocolIPv6 *string `json:"httpProtocolIPv6,omitempty"`
	// HTTPPutResponseHopLimit is how many network hops a metadata token response
	// may travel (1 to 64); 1 keeps it from reaching pods on their own network.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=64
	// +optional
	HTTPPutResponseHopLimit *int64 `json:"httpPutResponseHopLimit,omitempty"`
	// HTTPTokens says whether a session token is required (IMDSv2 only,
	// "required") or optional (IMDSv1 allowed too).
	// +kubebuilder:default=required
	// +kubebuilder:validation:Enum:={required,optional}
	// +optional
	HTTPTokens *string `json:"httpTokens,omitempty"`
}

// BlockDeviceMapping attaches a volume to nodes at a device name.
type BlockDeviceMapping struct {
	// DeviceName is where the volume appears, such as /dev/xvda.
	// +optional
	DeviceName *string `json:"deviceName,omitempty"`
	// EBS describes the EBS volume.
	// +kubebuilder:validation:XValidation:message="snapshotID or volumeSize must be defined",rule="has(self.snapshotID) || has(self.volumeSize)"
	// +kubebuilder:validation:XValidation:message="snapshotID must be set when volumeInitializationRate is set",rule="!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')"
	// +optional
	EBS *BlockDevice `json:"ebs,omitempty"`
	// RootVolume marks the volume the kubelet's root directory lives on (its size is
	// the node's ephemeral storage); at most one mapping may be the root volume.
	// +optional
	RootVolume bool `json:"rootVolume,omitempty"`
}

// BlockDevice is an EBS volume.
type BlockDevice struct {
	// DeleteOnTermination deletes the volume with the instance.
	// +optional
	DeleteOnTermination *bool `json:"deleteOnTermination,omitempty"`
	// Encrypted encrypts the volume (not settable for volumes from a snapshot).
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`
	// IOPS provisions I/O operations per second for gp3 (3,000 to 16,000), io1 and
	// io2 (100 to 64,000) volumes.
	// +optional
	IOPS *int64 `json:"iops,omitempty"`
	// KMSKeyID is the KMS key (id, alias or ARN) that encrypts the volume.
	// +optional
	KMSKeyID *string `json:"kmsKeyID,omitempty"`
	// SnapshotID is the EBS snapshot the volume is made from.
	// +optional
	SnapshotID *string `json:"snapshotID,omitempty"`
	// Throughput provisions MiB/s for a gp3 volume (125 to 1,000).
	// +optional
	Throughput *int64 `json:"throughput,omitempty"`
	// VolumeInitializationRate is the MiB/s (100 to 300) at which the snapshot's
	// blocks are loaded into the volume; it needs snapshotID.
	// +kubebuilder:validation:Minimum:=100
	// +kubebuilder:validation:Maximum:=300
	// +optional
	VolumeInitializationRate *int32 `json:"volumeInitializationRate,omitempty"`
	// VolumeSize is the volume's size in Gi, G, Ti or T; a volume needs a size or a
	// snapshot.
	// +kubebuilder:validation:Pattern:="^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type:=string
	// +optional
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty"`
	// VolumeType is the EBS volume type.
	// +kubebuilder:validation:Enum:={standard,io1,io2,gp2,sc1,st1,gp3}
	// +optional
	VolumeType *string `json:"volumeType,omitempty"`
}

// InstanceStorePolicy says how the instance's local NVMe disks are used.
// +kubebuilder:validation:Enum={RAID0}
type InstanceStorePolicy string

// InstanceStorePolicyRAID0 stripes all local NVMe disks into one RAID-0 array that
// holds the kubelet's and the container runtime's state, so it becomes the node's
// ephemeral storage.
const InstanceStorePolicyRAID0 InstanceStorePolicy = "RAID0"
