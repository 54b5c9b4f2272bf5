package aws

import (
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// typeInfo builds an EC2 instance type description; edits adjust it.
func typeInfo(name string, vcpus int32, mib int64, edits ...func(*ec2types.InstanceTypeInfo)) ec2types.InstanceTypeInfo {
	info := ec2types.InstanceTypeInfo{
		InstanceType:          ec2types.InstanceType(name),
		VCpuInfo:              &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(vcpus)},
		MemoryInfo:            &ec2types.MemoryInfo{SizeInMiB: aws.Int64(mib)},
		ProcessorInfo:         &ec2types.ProcessorInfo{Manufacturer: aws.String("Intel"), SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureTypeX8664}, SustainedClockSpeedInGhz: aws.Float64(3.1)},
		Hypervisor:            ec2types.InstanceTypeHypervisorNitro,
		SupportedUsageClasses: []ec2types.UsageClassType{ec2types.UsageClassTypeOnDemand, ec2types.UsageClassTypeSpot},
		NetworkInfo: &ec2types.NetworkInfo{MaximumNetworkInterfaces: aws.Int32(3), Ipv4AddressesPerInterface: aws.Int32(10),
			EncryptionInTransitSupported: aws.Bool(false), NetworkCards: []ec2types.NetworkCardInfo{{BaselineBandwidthInGbps: aws.Float64(0.75)}}},
		EbsInfo: &ec2types.EbsInfo{EbsOptimizedSupport: ec2types.EbsOptimizedSupportDefault,
			EbsOptimizedInfo: &ec2types.EbsOptimizedInfo{MaximumBandwidthInMbps: aws.Int32(4750)}},
	}
	for _, e := range edits {
		e(&info)
	}
	return info
}

func TestLabels(t *testing.T) {
	tests := []struct {
		name string
		info ec2types.InstanceTypeInfo
		want map[string]string
	}{
		{
			name: "general purpose",
			info: typeInfo("m5.large", 2, 8192),
			want: map[string]string{
				v1.LabelInstanceType: "m5.large", v1.LabelOS: "linux", v1.LabelArch: "amd64",
				LabelInstanceCategory: "m", LabelInstanceFamily: "m5", LabelInstanceGeneration: "5", LabelInstanceSize: "large",
				LabelInstanceCPU: "2", LabelInstanceCPUManufacturer: "intel", LabelInstanceCPUClockSpeedMHz: "3100",
				LabelInstanceMemory: "8192", LabelInstanceHypervisor: "nitro", LabelInstanceEncryptionTransit: "false",
				LabelInstanceNetworkBandwidth: "750", LabelInstanceEBSBandwidth: "4750", LabelInstanceCapabilityFlex: "false",
			},
		},
		{
			name: "GPU and local NVMe",
			info: typeInfo("g5.xlarge", 4, 16384, func(i *ec2types.InstanceTypeInfo) {
				i.ProcessorInfo.Manufacturer = aws.String("AMD")
				i.ProcessorInfo.SustainedClockSpeedInGhz = nil
				i.NetworkInfo.EncryptionInTransitSupported = aws.Bool(true)
				i.NetworkInfo.NetworkCards = []ec2types.NetworkCardInfo{{BaselineBandwidthInGbps: aws.Float64(2.5)}}
				i.EbsInfo = nil
				i.GpuInfo = &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{Name: aws.String("A10G"), Manufacturer: aws.String("NVIDIA"),
					Count: aws.Int32(1), MemoryInfo: &ec2types.GpuDeviceMemoryInfo{SizeInMiB: aws.Int32(24576)}}}}
				i.InstanceStorageInfo = &ec2types.InstanceStorageInfo{TotalSizeInGB: aws.Int64(250), NvmeSupport: ec2types.EphemeralNvmeSupportRequired}
			}),
			want: map[string]string{
				v1.LabelInstanceType: "g5.xlarge", v1.LabelOS: "linux", v1.LabelArch: "amd64",
				LabelInstanceCategory: "g", LabelInstanceFamily: "g5", LabelInstanceGeneration: "5", LabelInstanceSize: "xlarge",
				LabelInstanceCPU: "4", LabelInstanceCPUManufacturer: "amd", LabelInstanceMemory: "16384",
				LabelInstanceHypervisor: "nitro", LabelInstanceEncryptionTransit: "true", LabelInstanceNetworkBandwidth: "2500",
				LabelInstanceGPUName: "a10g", LabelInstanceGPUManufacturer: "nvidia", LabelInstanceGPUCount: "1",
				LabelInstanceGPUMemory: "24576", LabelInstanceLocalNVMe: "250", LabelInstanceCapabilityFlex: "false",
			},
		},
		{
			name: "Graviton with Inferentia-style accelerator and a dashed family",
			info: typeInfo("inf2.xlarge", 4, 16384, func(i *ec2types.InstanceTypeInfo) {
				i.ProcessorInfo = &ec2types.ProcessorInfo{Manufacturer: aws.String("AWS"), SupportedArchitectures: []ec2types.ArchitectureType{ec2types.ArchitectureTypeArm64}}
				i.Hypervisor = ""
				i.NetworkInfo = nil
				i.EbsInfo = nil
				i.NeuronInfo = &ec2types.NeuronInfo{NeuronDevices: []ec2types.NeuronDeviceInfo{{Name: aws.String("Inferentia2"), Count: aws.Int32(1)}}}
			}),
			want: map[string]string{
				v1.LabelInstanceType: "inf2.xlarge", v1.LabelOS: "linux", v1.LabelArch: "arm64",
				LabelInstanceCategory: "inf", LabelInstanceFamily: "inf2", LabelInstanceGeneration: "2", LabelInstanceSize: "xlarge",
				LabelInstanceCPU: "4", LabelInstanceCPUManufacturer: "aws", LabelInstanceMemory: "16384",
				LabelInstanceAcceleratorName: "inferentia2", LabelInstanceAcceleratorMaker: "aws", LabelInstanceAcceleratorCount: "1",
				// As Karpenter: the hypervisor label is there, empty, when EC2 names none;
				// encryption in transit is false unless EC2 says it is supported.
				LabelInstanceCapabilityFlex: "false", LabelInstanceHypervisor: "", LabelInstanceEncryptionTransit: "false",
			},
		},
		{
			// Karpenter's published labels of c7i-flex.large, c5.metal and u-6tb1.56xlarge.
			name: "flex",
			info: typeInfo("c7i-flex.large", 2, 4096),
			want: map[string]string{
				v1.LabelInstanceType: "c7i-flex.large", v1.LabelOS: "linux", v1.LabelArch: "amd64",
				LabelInstanceCategory: "c", LabelInstanceFamily: "c7i-flex", LabelInstanceGeneration: "7", LabelInstanceSize: "large",
				LabelInstanceCPU: "2", LabelInstanceCPUManufacturer: "intel", LabelInstanceCPUClockSpeedMHz: "3100",
				LabelInstanceMemory: "4096", LabelInstanceHypervisor: "nitro", LabelInstanceEncryptionTransit: "false",
				LabelInstanceNetworkBandwidth: "750", LabelInstanceEBSBandwidth: "4750", LabelInstanceCapabilityFlex: "true",
			},
		},
		{
			name: "bare metal",
			info: typeInfo("c5.metal", 96, 196608, func(i *ec2types.InstanceTypeInfo) { i.Hypervisor = "" }),
			want: map[string]string{
				v1.LabelInstanceType: "c5.metal", v1.LabelOS: "linux", v1.LabelArch: "amd64",
				LabelInstanceCategory: "c", LabelInstanceFamily: "c5", LabelInstanceGeneration: "5", LabelInstanceSize: "metal",
				LabelInstanceCPU: "96", LabelInstanceCPUManufacturer: "intel", LabelInstanceCPUClockSpeedMHz: "3100",
				LabelInstanceMemory: "196608", LabelInstanceHypervisor: "", LabelInstanceEncryptionTransit: "false",
				LabelInstanceNetworkBandwidth: "750", LabelInstanceEBSBandwidth: "4750", LabelInstanceCapabilityFlex: "false",
			},
		},
		{
			name: "a memory size in the family; EBS-optimized only on request has no EBS bandwidth; two kinds of GPU have no GPU labels",
			info: typeInfo("u-6tb1.56xlarge", 224, 6291456, func(i *ec2types.InstanceTypeInfo) {
				i.EbsInfo.EbsOptimizedSupport = ec2types.EbsOptimizedSupportSupported
				i.GpuInfo = &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{Name: aws.String("A"), Count: aws.Int32(1)}, {Name: aws.String("B"), Count: aws.Int32(1)}}}
			}),
			want: map[string]string{
				v1.LabelInstanceType: "u-6tb1.56xlarge", v1.LabelOS: "linux", v1.LabelArch: "amd64",
				LabelInstanceCategory: "u", LabelInstanceFamily: "u-6tb1", LabelInstanceGeneration: "1", LabelInstanceSize: "56xlarge",
				LabelInstanceCPU: "224", LabelInstanceCPUManufacturer: "intel", LabelInstanceCPUClockSpeedMHz: "3100",
				LabelInstanceMemory: "6291456", LabelInstanceHypervisor: "nitro", LabelInstanceEncryptionTransit: "false",
				LabelInstanceNetworkBandwidth: "750", LabelInstanceCapabilityFlex: "false",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Labels(&tt.info)); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCategoryAndGeneration(t *testing.T) {
	for family, want := range map[string][2]string{
		"m5": {"m", "5"}, "m5d": {"m", "5"}, "c6in": {"c", "6"}, "p6-b200": {"p", "6"},
		// Karpenter's published labels: u-6tb1 is generation 1, u7i-12tb 7.
		"u-6tb1": {"u", "1"}, "u7i-12tb": {"u", "7"}, "c7i-flex": {"c", "7"}, "mac2-m2pro": {"mac", "2"},
		"mac2": {"mac", "2"}, "x2iedn": {"x", "2"}, "a": {"", ""},
	} {
		c, g := categoryAndGeneration(family)
		if c != want[0] || g != want[1] {
			t.Errorf("%s: got %s, %s; want %s, %s", family, c, g, want[0], want[1])
		}
	}
}

func TestBuildInstanceTypes(t *testing.T) {
	cat := Catalog{
		Region: "us-east-1",
		Types: []ec2types.InstanceTypeInfo{
			typeInfo("m5.large", 2, 8192),
			typeInfo("t3.micro", 2, 1024, func(i *ec2types.InstanceTypeInfo) {
				i.SupportedUsageClasses = []ec2types.UsageClassType{ec2types.UsageClassTypeOnDemand}
				i.NetworkInfo.MaximumNetworkInterfaces, i.NetworkInfo.Ipv4AddressesPerInterface = aws.Int32(2), aws.Int32(2)
			}),
			typeInfo("mac1.metal", 12, 32768, func(i *ec2types.InstanceTypeInfo) {
				i.ProcessorInfo.SupportedArchitectures = []ec2types.ArchitectureType{ec2types.ArchitectureTypeX8664Mac}
			}),
			typeInfo("c5.large", 2, 4096), // offered in no zone of the subnets
			typeInfo("g5.xlarge", 4, 16384, func(i *ec2types.InstanceTypeInfo) {
				i.GpuInfo = &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{Name: aws.String("A10G"), Manufacturer: aws.String("NVIDIA"), Count: aws.Int32(1)}}}
			}),
		},
		Zones: map[string][]string{"m5.large": {"us-east-1b", "us-east-1a"}, "t3.micro": {"us-east-1a"}, "mac1.metal": {"us-east-1a"}, "g5.xlarge": {"us-east-1a"}},
		Prices: Prices{
			OnDemand: map[string]float64{"m5.large": 0.096, "t3.micro": 0.0104, "mac1.metal": 1.083, "g5.xlarge": 1.006},
			// No spot price for m5.large in us-east-1b: that offering is not sold.
			Spot: map[string]map[string]float64{"m5.large": {"us-east-1a": 0.035}, "t3.micro": {"us-east-1a": 0.003}},
		},
	}
	types, err := BuildInstanceTypes(cat, allocatable.DefaultEKS(), resource.Quantity{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range types {
		names = append(names, it.Name)
	}
	if diff := cmp.Diff([]string{"g5.xlarge", "m5.large", "t3.micro"}, names); diff != "" {
		t.Fatalf("types (-want +got):\n%s", diff)
	}
	g5, m5, t3 := types[0], types[1], types[2]
	wantOfferings := []scheduling.Offering{
		{Zone: "us-east-1a", CapacityType: "spot", Price: 0.035, Available: true},
		{Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.096, Available: true},
		{Zone: "us-east-1b", CapacityType: "on-demand", Price: 0.096, Available: true},
	}
	if diff := cmp.Diff(wantOfferings, m5.Offerings); diff != "" {
		t.Errorf("m5.large offerings (-want +got):\n%s", diff)
	}
	if len(t3.Offerings) != 1 || t3.Offerings[0].CapacityType != "on-demand" {
		t.Errorf("t3.micro supports only on-demand, got %+v", t3.Offerings)
	}
	// Max pods from ENIs: 3 × (10 − 1) + 2 = 29 and 2 × (2 − 1) + 2 = 4.
	for it, want := range map[*scheduling.InstanceType]int64{m5: 29, t3: 4} {
		if pods := it.Capacity[corev1.ResourcePods]; pods.Value() != want {
			t.Errorf("%s: pods %d, want %d", it.Name, pods.Value(), want)
		}
	}
	// The EKS model's memory: 8192Mi less 7.5% (rounded up to a MiB) = 7577Mi.
	if mem := m5.Capacity[corev1.ResourceMemory]; mem.Value() != 7577*mebi {
		t.Errorf("m5.large memory capacity %s, want 7577Mi", mem.String())
	}
	if gpus := g5.Capacity[ResourceNVIDIAGPU]; gpus.Value() != 1 {
		t.Errorf("g5.xlarge nvidia.com/gpu %s, want 1", gpus.String())
	}
	if os, _ := m5.Requirements.Get(v1.LabelOS); !slices.Equal(os.Values(), []string{"linux"}) {
		t.Errorf("m5.large OS %v, want linux", os.Values())
	}
	// A Windows NodeClass's types are Windows nodes of its build.
	cat.OSLabels = OSLabels(awsv1.AMIFamilyWindows2022)
	windows, err := BuildInstanceTypes(cat, allocatable.DefaultEKS(), resource.Quantity{})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{v1.LabelOS: "windows", LabelWindowsBuild: "10.0.20348"} {
		if r, _ := windows[1].Requirements.Get(key); !slices.Equal(r.Values(), []string{want}) {
			t.Errorf("m5.large for Windows2022: %s %v, want %s", key, r.Values(), want)
		}
	}
	// Windows pods take the primary interface's addresses (10, less the node's):
	// 9 pods, and 9 of the PrivateIPv4Address every Windows pod requests.
	for _, res := range []corev1.ResourceName{corev1.ResourcePods, ResourcePrivateIPv4Address} {
		if q := windows[1].Capacity[res]; q.Value() != 9 {
			t.Errorf("m5.large for Windows2022: %s %s, want 9", res, q.String())
		}
	}
	for key, want := range map[string][]string{v1.LabelZone: {"us-east-1a", "us-east-1b"}, v1.CapacityTypeLabelKey: {"on-demand", "spot"}, v1.LabelRegion: {"us-east-1"}} {
		r, ok := m5.Requirements.Get(key)
		if !ok {
			t.Fatalf("m5.large has no %s requirement", key)
		}
		if diff := cmp.Diff(want, r.Values()); diff != "" {
			t.Errorf("m5.large %s (-want +got):\n%s", key, diff)
		}
	}
}

// A type's EBS attach limit is what the EBS CSI driver will report for its node:
// Nitro's shared 28 less the primary interface, the NVMe instance-store volumes and
// the root volume; a dedicated limit less the root volume; Xen's 39 less the root.
func TestEBSVolumeLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		info ec2types.InstanceTypeInfo
		want int32
	}{
		{"nitro", typeInfo("m5.large", 2, 8192), 26},
		{"nitro with two NVMe disks", typeInfo("m5d.2xlarge", 8, 32768, func(i *ec2types.InstanceTypeInfo) {
			i.InstanceStorageInfo = &ec2types.InstanceStorageInfo{NvmeSupport: ec2types.EphemeralNvmeSupportRequired,
				Disks: []ec2types.DiskInfo{{Count: aws.Int32(2), SizeInGB: aws.Int64(150)}}}
		}), 24},
		{"nitro, shared limit described", typeInfo("c6i.large", 2, 4096, func(i *ec2types.InstanceTypeInfo) {
			i.EbsInfo.AttachmentLimitType, i.EbsInfo.MaximumEbsAttachments = ec2types.AttachmentLimitTypeShared, aws.Int32(28)
		}), 26},
		{"dedicated", typeInfo("m7i.large", 2, 8192, func(i *ec2types.InstanceTypeInfo) {
			i.EbsInfo.AttachmentLimitType, i.EbsInfo.MaximumEbsAttachments = ec2types.AttachmentLimitTypeDedicated, aws.Int32(32)
		}), 31},
		{"xen", typeInfo("m4.large", 2, 8192, func(i *ec2types.InstanceTypeInfo) { i.Hypervisor = ec2types.InstanceTypeHypervisorXen }), 38},
		{"unknown hypervisor", typeInfo("x.large", 2, 8192, func(i *ec2types.InstanceTypeInfo) { i.Hypervisor = "" }), 0},
	} {
		got := ebsVolumeLimits(&tc.info)[EBSCSIDriver]
		if got != tc.want {
			t.Errorf("%s: %d EBS volumes, want %d", tc.name, got, tc.want)
		}
	}
	types, err := BuildInstanceTypes(Catalog{Region: "us-east-1", Types: []ec2types.InstanceTypeInfo{typeInfo("m5.large", 2, 8192)},
		Zones: map[string][]string{"m5.large": {"us-east-1a"}}, Prices: Prices{OnDemand: map[string]float64{"m5.large": 0.096}}},
		allocatable.DefaultEKS(), resource.Quantity{})
	if err != nil || len(types) != 1 || types[0].VolumeLimits[EBSCSIDriver] != 26 {
		t.Errorf("BuildInstanceTypes: %v, %v; want m5.large limited to 26 EBS volumes", types, err)
	}
}

// Max pods follow the ENIs of the default network card, as EKS's published max
// pods (amazon-eks-ami's eni-max-pods.txt) do: the VPC CNI takes pod addresses
// from that card only. The facts are EC2's DescribeInstanceTypes answers.
func TestMaxPodsFromTheDefaultNetworkCard(t *testing.T) {
	cards := func(n, enisEach int32) []ec2types.NetworkCardInfo {
		var out []ec2types.NetworkCardInfo
		for i := range n {
			out = append(out, ec2types.NetworkCardInfo{NetworkCardIndex: aws.Int32(i), MaximumNetworkInterfaces: aws.Int32(enisEach)})
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		enis, perENI  int32
		cards         []ec2types.NetworkCardInfo
		wantPublished int64
	}{
		{"m5.large", 3, 10, cards(1, 3), 29},
		{"p5.48xlarge", 64, 50, cards(32, 2), 100},
		{"p4d.24xlarge", 60, 50, cards(4, 15), 737},
		{"trn1.32xlarge", 40, 50, cards(8, 5), 247},
		{"c6in.32xlarge", 16, 50, cards(2, 8), 394},
		// No card list (an older answer): all the type's ENIs.
		{"m5.xlarge", 4, 15, nil, 58},
	} {
		info := typeInfo(tc.name, 4, 8192, func(i *ec2types.InstanceTypeInfo) {
			i.NetworkInfo = &ec2types.NetworkInfo{MaximumNetworkInterfaces: aws.Int32(tc.enis), Ipv4AddressesPerInterface: aws.Int32(tc.perENI),
				MaximumNetworkCards: aws.Int32(int32(max(len(tc.cards), 1))), DefaultNetworkCardIndex: aws.Int32(0), NetworkCards: tc.cards}
		})
		if got := shapeOf(&info, "amd64", resource.Quantity{}).Pods; got != tc.wantPublished {
			t.Errorf("%s: max pods %d, EKS publishes %d", tc.name, got, tc.wantPublished)
		}
	}
}

// The extended resources of EC2's accelerated types, from their
// DescribeInstanceTypes facts, as the device plugins advertise them.
func TestAcceleratorResources(t *testing.T) {
	efa := func(n int32) func(*ec2types.InstanceTypeInfo) {
		return func(i *ec2types.InstanceTypeInfo) {
			i.NetworkInfo = &ec2types.NetworkInfo{EfaSupported: aws.Bool(true), EfaInfo: &ec2types.EfaInfo{MaximumEfaInterfaces: aws.Int32(n)}}
		}
	}
	gpus := func(maker string, n int32) func(*ec2types.InstanceTypeInfo) {
		return func(i *ec2types.InstanceTypeInfo) {
			i.GpuInfo = &ec2types.GpuInfo{Gpus: []ec2types.GpuDeviceInfo{{Manufacturer: aws.String(maker), Count: aws.Int32(n)}}}
		}
	}
	neuron := func(devices, cores int32) func(*ec2types.InstanceTypeInfo) {
		return func(i *ec2types.InstanceTypeInfo) {
			i.NeuronInfo = &ec2types.NeuronInfo{NeuronDevices: []ec2types.NeuronDeviceInfo{
				{Count: aws.Int32(devices), CoreInfo: &ec2types.NeuronDeviceCoreInfo{Count: aws.Int32(cores)}}}}
		}
	}
	inference := func(maker string, n int32) func(*ec2types.InstanceTypeInfo) {
		return func(i *ec2types.InstanceTypeInfo) {
			i.InferenceAcceleratorInfo = &ec2types.InferenceAcceleratorInfo{Accelerators: []ec2types.InferenceDeviceInfo{
				{Manufacturer: aws.String(maker), Count: aws.Int32(n)}}}
		}
	}
	for _, tc := range []struct {
		info ec2types.InstanceTypeInfo
		want map[corev1.ResourceName]int64
	}{
		// EC2 lists Inferentia in both NeuronInfo and InferenceAcceleratorInfo.
		{typeInfo("inf1.xlarge", 4, 8192, neuron(1, 4), inference("AWS", 1)),
			map[corev1.ResourceName]int64{ResourceNeuron: 1, ResourceNeuronCore: 4}},
		// Qualcomm's AI100 is no Neuron device: it was counted as 8 of them.
		{typeInfo("dl2q.24xlarge", 96, 786432, inference("Qualcomm", 8)), map[corev1.ResourceName]int64{}},
		{typeInfo("trn1.32xlarge", 128, 524288, neuron(16, 2), efa(8)),
			map[corev1.ResourceName]int64{ResourceNeuron: 16, ResourceNeuronCore: 32, ResourceEFA: 8}},
		{typeInfo("inf2.48xlarge", 192, 786432, neuron(12, 2)),
			map[corev1.ResourceName]int64{ResourceNeuron: 12, ResourceNeuronCore: 24}},
		{typeInfo("dl1.24xlarge", 96, 786432, gpus("Habana", 8), efa(4)),
			map[corev1.ResourceName]int64{ResourceGaudi: 8, ResourceEFA: 4}},
		{typeInfo("p5.48xlarge", 192, 2097152, gpus("NVIDIA", 8), efa(32)),
			map[corev1.ResourceName]int64{ResourceNVIDIAGPU: 8, ResourceEFA: 32}},
		{typeInfo("g4ad.xlarge", 4, 16384, gpus("AMD", 1)), map[corev1.ResourceName]int64{ResourceAMDGPU: 1}},
		{typeInfo("m5.large", 2, 8192), map[corev1.ResourceName]int64{}},
	} {
		if diff := cmp.Diff(tc.want, acceleratorResources(&tc.info)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.info.InstanceType, diff)
		}
	}
}
