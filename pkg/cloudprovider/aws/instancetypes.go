package aws

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// The labels Karpenter's AWS provider puts on its nodes, named as it names them.
const (
	labelPrefix                    = "karpenter.k8s.aws/"
	LabelInstanceCategory          = labelPrefix + "instance-category"
	LabelInstanceFamily            = labelPrefix + "instance-family"
	LabelInstanceGeneration        = labelPrefix + "instance-generation"
	LabelInstanceSize              = labelPrefix + "instance-size"
	LabelInstanceCPU               = labelPrefix + "instance-cpu"
	LabelInstanceCPUManufacturer   = labelPrefix + "instance-cpu-manufacturer"
	LabelInstanceCPUClockSpeedMHz  = labelPrefix + "instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceMemory            = labelPrefix + "instance-memory"
	LabelInstanceHypervisor        = labelPrefix + "instance-hypervisor"
	LabelInstanceEncryptionTransit = labelPrefix + "instance-encryption-in-transit-supported"
	LabelInstanceNetworkBandwidth  = labelPrefix + "instance-network-bandwidth"
	LabelInstanceEBSBandwidth      = labelPrefix + "instance-ebs-bandwidth"
	LabelInstanceGPUName           = labelPrefix + "instance-gpu-name"
	LabelInstanceGPUManufacturer   = labelPrefix + "instance-gpu-manufacturer"
	LabelInstanceGPUCount          = labelPrefix + "instance-gpu-count"
	LabelInstanceGPUMemory         = labelPrefix + "instance-gpu-memory"
	LabelInstanceAcceleratorName   = labelPrefix + "instance-accelerator-name"
	LabelInstanceAcceleratorMaker  = labelPrefix + "instance-accelerator-manufacturer"
	LabelInstanceAcceleratorCount  = labelPrefix + "instance-accelerator-count"
	LabelInstanceLocalNVMe         = labelPrefix + "instance-local-nvme"
	// LabelInstanceCapabilityFlex is "true" on the flex types (c7i-flex, m7i-flex, …).
	LabelInstanceCapabilityFlex = labelPrefix + "instance-capability-flex"
	// LabelNodeClass names the EC2NodeClass a node was launched from.
	LabelNodeClass = labelPrefix + "ec2nodeclass"
	// LabelTopologyZoneID is the zone's ID (use1-az1), the same zone in every
	// account, where zone names are shuffled per account.
	LabelTopologyZoneID = "topology.k8s.aws/zone-id"
)

// Extended resources a type's accelerators give its nodes, as their device plugins
// name them.
const (
	ResourceNVIDIAGPU corev1.ResourceName = "nvidia.com/gpu"
	ResourceAMDGPU    corev1.ResourceName = "amd.com/gpu"
	ResourceNeuron    corev1.ResourceName = "aws.amazon.com/neuron"
	// ResourceNeuronCore is the Neuron device plugin's per-core resource.
	ResourceNeuronCore corev1.ResourceName = "aws.amazon.com/neuroncore"
	ResourceGaudi      corev1.ResourceName = "habana.ai/gaudi"
	// ResourceEFA is the EFA device plugin's resource: the EFA interfaces a node may have.
	ResourceEFA corev1.ResourceName = "vpc.amazonaws.com/efa"
	// ResourcePrivateIPv4Address is the VPC resource controller's resource for
	// Windows pods' addresses (Windows IPAM): every Windows pod requests one.
	ResourcePrivateIPv4Address corev1.ResourceName = "vpc.amazonaws.com/PrivateIPv4Address"
)

// Capacity types, as the karpenter.sh/capacity-type label has them.
const (
	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
)

// Prices are hourly prices in USD: on-demand by instance type, spot by instance
// type and zone.
type Prices struct {
	OnDemand map[string]float64
	Spot     map[string]map[string]float64
	// Dedicated are on-demand prices of dedicated instances, by instance type; a
	// type without one is not offered with dedicated tenancy.
	Dedicated map[string]float64
}

// Catalog is what EC2 says of a region, as instance types are built from it.
type Catalog struct {
	Region string
	// Types are the answers of DescribeInstanceTypes.
	Types []ec2types.InstanceTypeInfo
	// Zones lists, by instance type, the zones it is offered in (from
	// DescribeInstanceTypeOfferings), among the zones of the NodeClass's subnets.
	Zones map[string][]string
	// ZoneIDs are the zones' IDs, by zone name (from the NodeClass's subnets).
	ZoneIDs map[string]string
	Prices  Prices
	// OSLabels replace the Linux label of every type: the NodeClass's AMI family
	// decides the OS its nodes run (see OSLabels).
	OSLabels map[string]string
	// Fields are the NodeClass's settings that decide which types launch and what
	// their nodes hold.
	Fields NodeClassFields
}

// BuildInstanceTypes turns EC2's types into the engine's: labels, capacity and
// overhead from model (an EKS node under the NodeClass's kubelet settings), and an
// offering per zone and capacity type the type is sold in at a known price. A type
// that Kubernetes nodes cannot run on (i386, Mac) or that is offered nowhere is left
// out. The result is sorted by name.
func BuildInstanceTypes(c Catalog, model allocatable.EKS, rootVolume resource.Quantity) ([]*scheduling.InstanceType, error) {
	var out []*scheduling.InstanceType
	for i := range c.Types {
		info := &c.Types[i]
		name := string(info.InstanceType)
		arch := kubeArch(info)
		zones := c.Zones[name]
		if arch == "" || len(zones) == 0 || info.VCpuInfo == nil || info.MemoryInfo == nil || !c.Fields.Compatible(info) {
			continue
		}
		offerings := offeringsOf(info, zones, c.Prices, c.Fields.Tenancy)
		if len(offerings) == 0 {
			continue
		}
		shape := shapeOf(info, arch, rootVolume)
		if c.Fields.InstanceStoreRAID0 {
			// The striped instance-store disks hold the kubelet's and containerd's
			// directories, as Karpenter counts them (GB, as EC2 gives the size).
			if bytes, ok := ephemeralFromInstanceStore(info); ok {
				shape.RootVolume = *resource.NewQuantity(bytes, resource.DecimalSI)
			}
		}
		if n := c.Fields.efaOnlyOnDefaultCard(info); n > 0 && shape.Pods > 0 {
			// An efa-only interface on the default card takes one of the ENIs the
			// VPC CNI would give pods addresses from.
			enis := podENIs(info.NetworkInfo) - int32(n)
			shape.Pods = max(int64(enis), 0)*int64(deref(info.NetworkInfo.Ipv4AddressesPerInterface)-1) + 2
		}
		windows := c.OSLabels[corev1.LabelOSStable] == "windows"
		if windows && info.NetworkInfo != nil && info.NetworkInfo.Ipv4AddressesPerInterface != nil {
			// Windows pods take addresses of the primary interface only, one of
			// them the node's own (the EKS Windows bootstrap's max pods).
			shape.Pods = int64(*info.NetworkInfo.Ipv4AddressesPerInterface - 1)
		}
		node, err := model.Node(shape)
		if err != nil {
			return nil, fmt.Errorf("instance type %s: %w", name, err)
		}
		if windows && info.NetworkInfo != nil && info.NetworkInfo.Ipv4AddressesPerInterface != nil {
			// The VPC resource controller's webhook adds a request for one of these
			// to every Windows pod, and advertises them on Windows nodes.
			node.Capacity[ResourcePrivateIPv4Address] = *resource.NewQuantity(int64(*info.NetworkInfo.Ipv4AddressesPerInterface-1), resource.DecimalSI)
		}
		for res, n := range acceleratorResources(info) {
			node.Capacity[res] = *resource.NewQuantity(n, resource.DecimalSI)
		}
		if len(c.Fields.NetworkInterfaces) > 0 {
			// The node's EFA devices are the efa-only interfaces it launches with.
			delete(node.Capacity, ResourceEFA)
			if n := c.Fields.efaOnly(-1); n > 0 {
				node.Capacity[ResourceEFA] = *resource.NewQuantity(int64(n), resource.DecimalSI)
			}
		}
		labels := Labels(info)
		maps.Copy(labels, c.OSLabels)
		labels[LabelInstanceTenancy] = cmp.Or(c.Fields.Tenancy, TenancyDefault)
		reqs := scheduling.LabelRequirements(labels)
		var zs, cts []string
		for _, o := range offerings {
			zs = append(zs, o.Zone)
			cts = append(cts, o.CapacityType)
		}
		reqs = reqs.With(scheduling.MustRequirement(v1.LabelZone, v1.NodeSelectorOpIn, zs...)).
			With(scheduling.MustRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, cts...)).
			With(scheduling.MustRequirement(v1.LabelRegion, v1.NodeSelectorOpIn, c.Region))
		// A launch keeps to the subnets whose zone IDs the claim allows (PlanFleet),
		// so a pod or NodePool may ask for zone IDs, as on Karpenter.
		var ids []string
		for _, z := range zs {
			if id := c.ZoneIDs[z]; id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			reqs = reqs.With(scheduling.MustRequirement(LabelTopologyZoneID, v1.NodeSelectorOpIn, ids...))
		}
		out = append(out, &scheduling.InstanceType{Name: name, Requirements: reqs, Offerings: offerings,
			Capacity: node.Capacity, Overhead: node.Overhead, VolumeLimits: ebsVolumeLimits(info)})
	}
	slices.SortFunc(out, func(a, b *scheduling.InstanceType) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// EBSCSIDriver is the EBS CSI driver, under whose name a node's CSINode reports
// how many EBS volumes it attaches.
const EBSCSIDriver = "ebs.csi.aws.com"

// ebsVolumeLimits is how many EBS volumes a node of the type will attach for pods,
// as the EBS CSI driver counts them once the node runs (its CSINode, which is what
// the engine reads for existing nodes): a dedicated limit as EC2 describes it; on
// Nitro, the attachments it shares with network interfaces and NVMe instance-store
// volumes (28 unless EC2 says otherwise) less the primary interface and those
// volumes; on Xen, 39. The root volume takes one in each case.
func ebsVolumeLimits(info *ec2types.InstanceTypeInfo) map[string]int32 {
	var limit int32
	ebs := info.EbsInfo
	switch {
	case ebs != nil && ebs.AttachmentLimitType == ec2types.AttachmentLimitTypeDedicated && ebs.MaximumEbsAttachments != nil:
		limit = *ebs.MaximumEbsAttachments
	case info.Hypervisor == ec2types.InstanceTypeHypervisorNitro:
		limit = 28
		if ebs != nil && ebs.MaximumEbsAttachments != nil {
			limit = *ebs.MaximumEbsAttachments
		}
		limit-- // the primary network interface
		if s := info.InstanceStorageInfo; s != nil && s.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported {
			for _, d := range s.Disks {
				limit -= deref(d.Count)
			}
		}
	case info.Hypervisor == ec2types.InstanceTypeHypervisorXen:
		limit = 39
	default:
		return nil
	}
	limit-- // the root volume
	if limit < 1 {
		return nil
	}
	return map[string]int32{EBSCSIDriver: limit}
}

// offeringsOf is one offering per zone and capacity type the type supports and
// has a price for; a type without a price cannot be ranked, so it is not offered.
//
// Dedicated instances are offered on-demand only, at the type's dedicated price.
func offeringsOf(info *ec2types.InstanceTypeInfo, zones []string, prices Prices, tenancy string) []scheduling.Offering {
	name := string(info.InstanceType)
	var out []scheduling.Offering
	if tenancy == TenancyDedicated {
		p, ok := prices.Dedicated[name]
		if !ok || !slices.Contains(info.SupportedUsageClasses, ec2types.UsageClassTypeOnDemand) {
			return nil
		}
		for _, z := range slices.Sorted(slices.Values(zones)) {
			out = append(out, scheduling.Offering{Zone: z, CapacityType: CapacityTypeOnDemand, Price: p, Available: true})
		}
		return out
	}
	for _, z := range slices.Sorted(slices.Values(zones)) {
		if slices.Contains(info.SupportedUsageClasses, ec2types.UsageClassTypeSpot) {
			if p, ok := prices.Spot[name][z]; ok {
				out = append(out, scheduling.Offering{Zone: z, CapacityType: CapacityTypeSpot, Price: p, Available: true})
			}
		}
		if slices.Contains(info.SupportedUsageClasses, ec2types.UsageClassTypeOnDemand) {
			if p, ok := prices.OnDemand[name]; ok {
				out = append(out, scheduling.Offering{Zone: z, CapacityType: CapacityTypeOnDemand, Price: p, Available: true})
			}
		}
	}
	return out
}

// kubeArch is the type's architecture as kubernetes.io/arch names it, or "".
func kubeArch(info *ec2types.InstanceTypeInfo) string {
	if info.ProcessorInfo == nil {
		return ""
	}
	archs := info.ProcessorInfo.SupportedArchitectures
	switch {
	case slices.Contains(archs, ec2types.ArchitectureTypeX8664):
		return "amd64"
	case slices.Contains(archs, ec2types.ArchitectureTypeArm64):
		return "arm64"
	}
	return ""
}

// shapeOf is what the allocatable model needs of a type: the pods its ENIs allow
// are ENIs × (IPv4 addresses per ENI − 1) + 2, as EKS computes max pods.
func shapeOf(info *ec2types.InstanceTypeInfo, arch string, rootVolume resource.Quantity) allocatable.Shape {
	s := allocatable.Shape{
		CPU:        *resource.NewQuantity(int64(deref(info.VCpuInfo.DefaultVCpus)), resource.DecimalSI),
		Memory:     *resource.NewQuantity(deref(info.MemoryInfo.SizeInMiB)*mebi, resource.BinarySI),
		RootVolume: rootVolume,
		Arch:       arch,
	}
	if n := info.NetworkInfo; n != nil && n.Ipv4AddressesPerInterface != nil {
		if enis := podENIs(n); enis > 0 {
			s.Pods = int64(enis)*int64(*n.Ipv4AddressesPerInterface-1) + 2
		}
	}
	return s
}

// podENIs is how many ENIs the VPC CNI gives pods addresses from: those of the
// default network card. A type with several cards (p5.48xlarge: 32 cards of 2
// ENIs, 64 in all) lists every card's ENIs in MaximumNetworkInterfaces, but the
// CNI uses only the default card's, and EKS's max pods (eni-max-pods.txt:
// p5.48xlarge 100, not 3,138) follow it.
func podENIs(n *ec2types.NetworkInfo) int32 {
	if len(n.NetworkCards) > 1 {
		def := deref(n.DefaultNetworkCardIndex)
		for _, c := range n.NetworkCards {
			if deref(c.NetworkCardIndex) == def && c.MaximumNetworkInterfaces != nil {
				return *c.MaximumNetworkInterfaces
			}
		}
	}
	return deref(n.MaximumNetworkInterfaces)
}

const mebi = 1 << 20

// acceleratorResources are the extended resources a type's GPUs, Gaudi and Neuron
// devices and EFA interfaces give a node, as their device plugins advertise them.
func acceleratorResources(info *ec2types.InstanceTypeInfo) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	if g := info.GpuInfo; g != nil {
		for _, d := range g.Gpus {
			switch strings.ToLower(deref(d.Manufacturer)) {
			case "nvidia":
				out[ResourceNVIDIAGPU] += int64(deref(d.Count))
			case "amd":
				out[ResourceAMDGPU] += int64(deref(d.Count))
			case "habana":
				out[ResourceGaudi] += int64(deref(d.Count))
			}
		}
	}
	if n := info.NetworkInfo; n != nil && deref(n.EfaSupported) && n.EfaInfo != nil {
		if efa := int64(deref(n.EfaInfo.MaximumEfaInterfaces)); efa > 0 {
			out[ResourceEFA] = efa
		}
	}
	if n := info.NeuronInfo; n != nil {
		for _, d := range n.NeuronDevices {
			out[ResourceNeuron] += int64(deref(d.Count))
			if c := d.CoreInfo; c != nil {
				out[ResourceNeuronCore] += int64(deref(d.Count)) * int64(deref(c.Count))
			}
		}
	} else if a := info.InferenceAcceleratorInfo; a != nil {
		// An answer without NeuronInfo lists Inferentia here; other makers'
		// accelerators (dl2q's Qualcomm AI100) are no Neuron devices.
		for _, d := range a.Accelerators {
			if strings.EqualFold(deref(d.Manufacturer), "aws") {
				out[ResourceNeuron] += int64(deref(d.Count))
			}
		}
	}
	return out
}

// Labels are the labels a node of the type carries, as Karpenter's AWS provider
// labels them (values lower case; sizes in MiB, Mbps, MHz and GB).
func Labels(info *ec2types.InstanceTypeInfo) map[string]string {
	name := string(info.InstanceType)
	labels := map[string]string{v1.LabelInstanceType: name, v1.LabelOS: "linux"}
	if arch := kubeArch(info); arch != "" {
		labels[v1.LabelArch] = arch
	}
	family, size, _ := strings.Cut(name, ".")
	labels[LabelInstanceFamily] = family
	labels[LabelInstanceSize] = size
	if category, generation := categoryAndGeneration(family); generation != "" {
		labels[LabelInstanceCategory] = category
		labels[LabelInstanceGeneration] = generation
	}
	labels[LabelInstanceCapabilityFlex] = strconv.FormatBool(strings.Contains(family, "-flex"))
	if c := info.VCpuInfo; c != nil && c.DefaultVCpus != nil {
		labels[LabelInstanceCPU] = strconv.Itoa(int(*c.DefaultVCpus))
	}
	if p := info.ProcessorInfo; p != nil {
		if p.Manufacturer != nil {
			labels[LabelInstanceCPUManufacturer] = kebab(*p.Manufacturer)
		}
		if p.SustainedClockSpeedInGhz != nil {
			labels[LabelInstanceCPUClockSpeedMHz] = strconv.FormatInt(int64(math.Round(*p.SustainedClockSpeedInGhz*1000)), 10)
		}
	}
	if m := info.MemoryInfo; m != nil && m.SizeInMiB != nil {
		labels[LabelInstanceMemory] = strconv.FormatInt(*m.SizeInMiB, 10)
	}
	// Bare metal types have no hypervisor: the label is there, empty, as
	// Karpenter has it.
	labels[LabelInstanceHypervisor] = string(info.Hypervisor)
	labels[LabelInstanceEncryptionTransit] = "false"
	if n := info.NetworkInfo; n != nil {
		if n.EncryptionInTransitSupported != nil {
			labels[LabelInstanceEncryptionTransit] = strconv.FormatBool(*n.EncryptionInTransitSupported)
		}
		if bw := baselineBandwidthMbps(n); bw > 0 {
			labels[LabelInstanceNetworkBandwidth] = strconv.FormatInt(bw, 10)
		}
	}
	// Only EBS-optimized-by-default types: the others reach it only when launched
	// EBS-optimized, which Tailor does not ask for.
	if e := info.EbsInfo; e != nil && e.EbsOptimizedSupport == ec2types.EbsOptimizedSupportDefault &&
		e.EbsOptimizedInfo != nil && e.EbsOptimizedInfo.MaximumBandwidthInMbps != nil {
		labels[LabelInstanceEBSBandwidth] = strconv.Itoa(int(*e.EbsOptimizedInfo.MaximumBandwidthInMbps))
	}
	// Labels of one kind of GPU or accelerator only: a type with several kinds has
	// no single name, maker or count.
	if g := info.GpuInfo; g != nil && len(g.Gpus) == 1 {
		d := g.Gpus[0]
		labels[LabelInstanceGPUName] = kebab(deref(d.Name))
		labels[LabelInstanceGPUManufacturer] = kebab(deref(d.Manufacturer))
		labels[LabelInstanceGPUCount] = strconv.Itoa(int(deref(d.Count)))
		if d.MemoryInfo != nil && d.MemoryInfo.SizeInMiB != nil {
			labels[LabelInstanceGPUMemory] = strconv.Itoa(int(*d.MemoryInfo.SizeInMiB))
		}
	}
	switch {
	case info.NeuronInfo != nil:
		if len(info.NeuronInfo.NeuronDevices) != 1 {
			break
		}
		d := info.NeuronInfo.NeuronDevices[0]
		labels[LabelInstanceAcceleratorName] = kebab(deref(d.Name))
		labels[LabelInstanceAcceleratorMaker] = "aws"
		labels[LabelInstanceAcceleratorCount] = strconv.Itoa(int(deref(d.Count)))
	case info.InferenceAcceleratorInfo != nil && len(info.InferenceAcceleratorInfo.Accelerators) == 1:
		d := info.InferenceAcceleratorInfo.Accelerators[0]
		labels[LabelInstanceAcceleratorName] = kebab(deref(d.Name))
		labels[LabelInstanceAcceleratorMaker] = kebab(deref(d.Manufacturer))
		labels[LabelInstanceAcceleratorCount] = strconv.Itoa(int(deref(d.Count)))
	}
	if s := info.InstanceStorageInfo; s != nil && s.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported && s.TotalSizeInGB != nil {
		labels[LabelInstanceLocalNVMe] = strconv.FormatInt(*s.TotalSizeInGB, 10)
	}
	return labels
}

// categoryAndGeneration split a family as Karpenter does: the category is its
// leading letters, the generation the digits after them, past a "-<n>tb" memory
// size (m5d → m, 5; p6-b200 → p, 6; u-6tb1 → u, 1). A family without those
// digits has neither.
func categoryAndGeneration(family string) (string, string) {
	isLetter := func(r rune) bool { return r >= 'a' && r <= 'z' }
	isDigit := func(r rune) bool { return r >= '0' && r <= '9' }
	i := strings.IndexFunc(family, func(r rune) bool { return !isLetter(r) })
	if i <= 0 {
		return "", ""
	}
	category, rest := family[:i], family[i:]
	if tail, ok := strings.CutPrefix(rest, "-"); ok {
		digits := strings.IndexFunc(tail, func(r rune) bool { return !isDigit(r) })
		if after, isSize := strings.CutPrefix(tail[max(digits, 0):], "tb"); digits > 0 && isSize {
			rest = after
		}
	}
	end := strings.IndexFunc(rest, func(r rune) bool { return !isDigit(r) })
	if end < 0 {
		end = len(rest)
	}
	if end == 0 {
		return "", ""
	}
	return category, rest[:end]
}

// baselineBandwidthMbps is the type's baseline network bandwidth over all its
// network cards.
func baselineBandwidthMbps(n *ec2types.NetworkInfo) int64 {
	var gbps float64
	for _, c := range n.NetworkCards {
		gbps += deref(c.BaselineBandwidthInGbps)
	}
	return int64(math.Round(gbps * 1000))
}

// kebab lower-cases a device name and joins its words with dashes ("Radeon Pro V520"
// → "radeon-pro-v520"), as label values must not hold spaces.
func kebab(s string) string {
	return strings.ToLower(strings.Join(strings.Fields(s), "-"))
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
