package fakeaws

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetailor/tailor/pkg/scheduling"
)

// instanceType is what DescribeInstanceTypes, the offerings, the price list and the
// kubelet know of a type. The catalog gives vCPUs, memory, the architecture and
// prices; EC2's own facts give the rest: network limits from AWS's VPC limits
// (vpclimits.json), processor, hypervisor, encryption in transit, instance store,
// EFA, GPUs and accelerators from DescribeInstanceTypes (ec2facts.json). Only a
// type neither lists falls back to the family heuristics below.
type instanceType struct {
	Name       string
	Family     string // c6in
	Category   string // c
	Generation int    // 6
	Attributes string // in
	Size       string // xlarge

	Arch           string // EC2's: x86_64 or arm64
	VCPUs          int32
	ThreadsPerCore int32
	MemoryMiB      int64
	Manufacturer   string  // Intel, AMD, AWS
	ClockGHz       float64 // sustained; 0 when EC2 gives none
	Hypervisor     string  // nitro, xen, or "" on bare metal

	EncryptionInTransit bool

	CurrentGeneration bool
	Burstable         bool
	FreeTier          bool

	ENIs       int32 // of the default network card
	IPv4PerENI int32
	// Cards are the maximum interfaces of each network card, by index, and
	// DefaultCard the one the primary interface is on, from AWS's VPC limits
	// table; nil for a type the table lacks (then one card of ENIs, or the EFA
	// table's count).
	Cards       []int32
	DefaultCard int32

	// GPUs counts the NVIDIA GPUs (what the NVIDIA device plugin advertises);
	// GPU is every GPU-like device EC2 lists in GpuInfo, Habana's Gaudi and
	// AMD's Radeon included.
	GPUs int32
	GPU  ec2GPU
	// Accelerator is the type's Neuron devices or inference accelerators.
	Accelerator ec2Accelerator
	EFA         int32 // maximum EFA interfaces

	StorageGB   int64
	Disks       int32
	DiskType    string // ssd or hdd
	StorageNVMe bool

	OnDemandPrice float64
	SpotPrice     map[string]float64 // by zone
	Zones         []string           // sorted; where any offering exists
}

var typeName = regexp.MustCompile(`^(([a-z]+)-?([0-9]+)([a-z0-9-]*))\.([a-z0-9-]+)$`)

func newInstanceType(it *scheduling.InstanceType, region string) (*instanceType, error) {
	m := typeName.FindStringSubmatch(it.Name)
	if m == nil {
		return nil, fmt.Errorf("not an EC2 instance type name")
	}
	gen, _ := strconv.Atoi(m[3])
	t := &instanceType{
		Name: it.Name, Family: m[1], Category: m[2], Generation: gen, Attributes: m[4], Size: m[5],
		SpotPrice: map[string]float64{},
	}
	arch := "amd64"
	if r, ok := it.Requirements.Get(corev1.LabelArchStable); ok {
		arch = r.Any()
	}
	switch arch {
	case "amd64":
		t.Arch = "x86_64"
	case "arm64":
		t.Arch = "arm64"
	default:
		return nil, fmt.Errorf("architecture %q", arch)
	}
	cpu, mem, pods := it.Capacity[corev1.ResourceCPU], it.Capacity[corev1.ResourceMemory], it.Capacity[corev1.ResourcePods]
	t.VCPUs = int32(cpu.Value())
	t.MemoryMiB = mem.Value() / (1 << 20)
	t.ENIs, t.IPv4PerENI = eniLimits(it.Name, int(pods.Value()))
	if l, ok := awsVPCLimits()[it.Name]; ok && len(l.Cards) > int(l.DefaultCard) {
		// AWS's own limits: ENIs counts those of one card.
		t.ENIs, t.IPv4PerENI, t.Cards, t.DefaultCard = l.Cards[l.DefaultCard], l.IPv4PerInterface, l.Cards, l.DefaultCard
	}
	if f, ok := awsEC2Facts()[it.Name]; ok {
		t.applyFacts(f)
	} else {
		t.guessFacts(it)
	}
	t.ThreadsPerCore = threadsPerCore(t)
	if t.GPU.Manufacturer == "NVIDIA" {
		t.GPUs = t.GPU.Count
	}
	t.CurrentGeneration = !previousGeneration[t.Family]
	t.Burstable = slices.Contains([]string{"t2", "t3", "t3a", "t4g"}, t.Family)
	t.FreeTier = it.Name == "t2.micro" || it.Name == "t3.micro"

	zones := map[string]bool{}
	for _, o := range it.Offerings {
		z := renameZone(o.Zone, region)
		zones[z] = true
		switch o.CapacityType {
		case "on-demand":
			t.OnDemandPrice = o.Price
		case "spot":
			t.SpotPrice[z] = o.Price
		}
	}
	t.Zones = slices.Sorted(maps.Keys(zones))
	return t, nil
}

// applyFacts takes what EC2 says of the type (ec2facts.json), and the instance
// store of the older families, whose volumes are not NVMe.
func (t *instanceType) applyFacts(f ec2Facts) {
	t.Manufacturer, t.ClockGHz, t.Hypervisor, t.EncryptionInTransit = f.Manufacturer, f.ClockGHz, f.Hypervisor, f.EncryptionInTransit
	t.EFA = f.EFA
	if f.GPU != nil {
		t.GPU = *f.GPU
	}
	if f.Accelerator != nil {
		t.Accelerator = *f.Accelerator
	}
	if f.LocalNVMeGB > 0 {
		d := nvmeDisks(t.Family, f.LocalNVMeGB)
		t.StorageGB, t.Disks, t.DiskType, t.StorageNVMe = f.LocalNVMeGB, d.Disks, d.Type, true
	} else if d, ok := olderInstanceStores[t.Name]; ok {
		t.StorageGB, t.Disks, t.DiskType = int64(d.Disks)*d.SizeGB, d.Disks, d.Type
	}
}

// guessFacts fills in a type EC2's facts do not list (one a test invents) from
// its family: NVIDIA GPUs from its catalog entry, the rest from the heuristics
// below.
func (t *instanceType) guessFacts(it *scheduling.InstanceType) {
	if gpus, ok := it.Capacity["nvidia.com/gpu"]; ok && gpus.Value() > 0 {
		g := gpuOf(t.Family)
		t.GPU = ec2GPU{Name: g.name, Manufacturer: "NVIDIA", Count: int32(gpus.Value()), MemoryMiB: g.memoryMiB}
	}
	t.Manufacturer = manufacturerOf(t)
	t.Hypervisor = "nitro"
	switch {
	case t.metal():
		t.Hypervisor = ""
	case xenFamilies[t.Family]:
		t.Hypervisor = "xen"
	}
	if l, ok := awsVPCLimits()[t.Name]; ok && (l.Hypervisor != "" || l.BareMetal) {
		t.Hypervisor = l.Hypervisor
	}
	t.EncryptionInTransit = t.Hypervisor == "nitro" && t.Generation >= 5
	t.EFA = efaCards[t.Name][1]
	t.StorageGB, t.Disks, t.DiskType = localStorage(t)
	t.StorageNVMe = t.StorageGB > 0 && t.Hypervisor != "xen"
}

// nitro reports the Nitro System: its hypervisor, or bare metal on Nitro cards
// (every bare-metal type EC2 sells).
func (t *instanceType) nitro() bool { return t.Hypervisor == "nitro" || t.metal() }

// renameZone moves a catalog zone (us-east-1a) into the server's region.
func renameZone(z, region string) string {
	if len(z) < 2 {
		return z
	}
	return region + z[len(z)-1:]
}

// eniLimits gives the network interfaces and IPv4 addresses per interface of a type,
// consistent with its max pods as EKS computes it: ENIs × (IPv4 per ENI − 1) + 2.
//
// Derived, not looked up: EC2 offers only a few per-interface address counts
// (2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 40, 50, 64), so the largest of those that
// divides maxPods−2 into at least two interfaces recovers the real pair for the
// established families (m5.large 3×10, m5.xlarge 4×15, m5.4xlarge 8×30, m5.24xlarge
// 15×50, t3.micro 2×2, t3.large 3×12). The exceptions are the few types where a
// smaller count is real.
func eniLimits(name string, pods int) (enis, ipv4 int32) {
	if e, ok := eniExceptions[name]; ok && int(e[0]*(e[1]-1))+2 == pods {
		return e[0], e[1]
	}
	n := int32(pods - 2)
	if n < 2 {
		return 1, max(n+1, 1)
	}
	for _, ips := range []int32{64, 50, 40, 30, 20, 15, 12, 10, 6, 5, 4, 3, 2} {
		if n%(ips-1) == 0 && n/(ips-1) >= 2 {
			return n / (ips - 1), ips
		}
	}
	return n, 2 // unreachable: 2 divides everything
}

var eniExceptions = map[string][2]int32{
	"d3.xlarge":   {4, 3},
	"d3en.xlarge": {4, 3},
}

type gpuSpec struct {
	name      string
	memoryMiB int64
}

// gpuOf names the NVIDIA GPU of a family and its memory as EC2 reports it, for a
// type EC2's facts do not list. The newest families (g7, p6-b300) are nominal.
func gpuOf(family string) gpuSpec {
	switch family {
	case "g3", "g3s":
		return gpuSpec{"M60", 8192}
	case "g4dn":
		return gpuSpec{"T4", 16384}
	case "g5":
		return gpuSpec{"A10G", 22888}
	case "g5g":
		return gpuSpec{"T4g", 16384}
	case "g6", "gr6", "g6f", "gr6f":
		return gpuSpec{"L4", 22888}
	case "g6e":
		return gpuSpec{"L40S", 45776}
	case "g7", "g7e":
		return gpuSpec{"RTX PRO 6000", 97887}
	case "p3":
		return gpuSpec{"V100", 16384}
	case "p3dn":
		return gpuSpec{"V100", 32768}
	case "p4d":
		return gpuSpec{"A100", 40960}
	case "p4de":
		return gpuSpec{"A100", 81920}
	case "p5":
		return gpuSpec{"H100", 81920}
	case "p5e", "p5en":
		return gpuSpec{"H200", 143771}
	case "p6-b200":
		return gpuSpec{"B200", 183359}
	case "p6-b300":
		return gpuSpec{"B300", 275040}
	}
	return gpuSpec{"GPU", 16384}
}

// amdFamilies are the AMD families whose names do not carry the "a" attribute.
var amdFamilies = map[string]bool{
	"g5": true, "g6": true, "g6e": true, "g6f": true, "gr6": true, "gr6f": true,
	"p5": true, "inf2": true, "f2": true, "hpc6a": true, "hpc7a": true,
}

// manufacturerOf: Graviton for arm64, AMD for the "a" families (c5a, m7a, t3a, g4ad)
// and the GPU families built on EPYC, Intel otherwise.
func manufacturerOf(t *instanceType) string {
	switch {
	case t.Arch == "arm64":
		return "AWS"
	case amdFamilies[t.Family] || strings.Contains(t.Attributes, "a"):
		return "AMD"
	}
	return "Intel"
}

// threadsPerCore: Graviton has no SMT, nor do AMD's 7th and later generations,
// nor the HPC families (hpc6a, hpc6id, hpc7a run one thread a core).
func threadsPerCore(t *instanceType) int32 {
	if t.Arch == "arm64" || (t.Manufacturer == "AMD" && t.Generation >= 7) || t.Category == "hpc" || t.VCPUs == 1 {
		return 1
	}
	return 2
}

var xenFamilies = map[string]bool{
	"c3": true, "c4": true, "d2": true, "f1": true, "g3": true, "g3s": true, "h1": true, "i2": true,
	"i3": true, "m3": true, "m4": true, "p3": true, "r3": true, "r4": true, "t2": true, "x1": true, "x1e": true,
}

var previousGeneration = map[string]bool{
	"c3": true, "c4": true, "d2": true, "g3": true, "g3s": true, "i2": true, "m3": true, "m4": true,
	"r3": true, "r4": true,
}

// localStorage approximates a type's instance store: which families have one is
// public (the "d" attribute, the storage-optimized d/h/i families, GPU and
// accelerator families with NVMe), the size is scaled from the family's size per
// vCPU (m5d.large 75 GB, m6id.large 118 GB, i3.large 475 GB, d3.xlarge 3×2 TB HDD),
// so totals are close to, not equal to, EC2's.
func localStorage(t *instanceType) (gb int64, disks int32, kind string) {
	perVCPU, hddDisk := 0.0, int64(0)
	switch {
	case t.Family == "d2" || t.Family == "d3":
		perVCPU, hddDisk = 1500, 2000
	case t.Family == "d3en":
		perVCPU, hddDisk = 7000, 14000
	case t.Family == "h1":
		perVCPU, hddDisk = 250, 2000
	case t.Family == "i3" || t.Family == "i4i" || t.Family == "i4g" || t.Family == "i7i" || t.Family == "i8g" || t.Family == "i2":
		perVCPU = 234
	case t.Family == "i3en" || t.Family == "i7ie" || t.Family == "i8ge":
		perVCPU = 625
	case t.Family == "im4gn":
		perVCPU = 468
	case t.Family == "is4gen":
		perVCPU = 937
	case nvmeGPUFamilies[t.Family]:
		perVCPU = 60
	case strings.Contains(t.Attributes, "d"):
		switch {
		case t.Family == "c5d" || t.Family == "c5ad":
			perVCPU = 25
		case t.Generation <= 5:
			perVCPU = 37.5
		default:
			perVCPU = 59
		}
	default:
		return 0, 0, ""
	}
	gb = int64(math.Round(perVCPU * float64(t.VCPUs)))
	if hddDisk > 0 {
		disks = int32(max(1, (gb+hddDisk/2)/hddDisk))
		return int64(disks) * hddDisk, disks, "hdd"
	}
	disks = int32((gb + 3799) / 3800)
	per := gb / int64(disks)
	return per * int64(disks), disks, "ssd"
}

var nvmeGPUFamilies = map[string]bool{
	"g4dn": true, "g4ad": true, "g5": true, "g6": true, "g6e": true, "gr6": true, "g7e": true,
	"p3dn": true, "p4d": true, "p4de": true, "p5": true, "p5e": true, "p5en": true,
	"p6-b200": true, "p6-b300": true, "trn1": true, "trn1n": true, "dl1": true, "f1": true, "f2": true,
}
