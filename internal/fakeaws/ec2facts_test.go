package fakeaws

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodetailor/tailor/pkg/scheduling"
)

// describedType is what testdata/ec2-describe-instance-types.json holds of a type:
// the facts EC2's DescribeInstanceTypes returned, field names as in its API. The
// file was copied (facts, not code) from Karpenter's AWS provider, module
// github.com/aws/karpenter-provider-aws v1.15.2, file
// pkg/fake/zz_generated.describe_instance_types.go, which its generator
// (hack/code/instancetype_testdata_gen) wrote from the real DescribeInstanceTypes
// in us-east-1; the file's "source" says so too.
type describedType struct {
	InstanceType             string            `json:"instanceType"`
	SupportedUsageClasses    []string          `json:"supportedUsageClasses"`
	BareMetal                bool              `json:"bareMetal"`
	Burstable                bool              `json:"burstablePerformanceSupported"`
	Hypervisor               string            `json:"hypervisor"`
	ProcessorManufacturer    string            `json:"processorManufacturer"`
	Architectures            []string          `json:"architectures"`
	DefaultVCpus             int32             `json:"defaultVCpus"`
	DefaultCores             int32             `json:"defaultCores"`
	MemorySizeInMiB          int64             `json:"memorySizeInMiB"`
	GPUs                     []describedGPU    `json:"gpus"`
	NeuronDevices            []describedNeuron `json:"neuronDevices"`
	InstanceStorageGB        int64             `json:"instanceStorageTotalSizeInGB"`
	InstanceStorageNvme      string            `json:"instanceStorageNvmeSupport"`
	MaximumEfaInterfaces     int32             `json:"maximumEfaInterfaces"`
	MaximumNetworkInterfaces int32             `json:"maximumNetworkInterfaces"`
	IPv4PerInterface         int32             `json:"ipv4AddressesPerInterface"`
	EncryptionInTransit      bool              `json:"encryptionInTransitSupported"`
	DefaultNetworkCardIndex  int32             `json:"defaultNetworkCardIndex"`
	NetworkCards             []describedCard   `json:"networkCards"`
	PlacementStrategies      []string          `json:"placementGroupStrategies"`
}

type describedGPU struct {
	Name         string `json:"name"`
	Manufacturer string `json:"manufacturer"`
	Count        int32  `json:"count"`
	MemoryMiB    int32  `json:"memorySizeInMiB"`
}

type describedNeuron struct {
	Name        string `json:"name"`
	Count       int32  `json:"count"`
	CoreCount   int32  `json:"coreCount"`
	CoreVersion int32  `json:"coreVersion"`
	MemoryMiB   int32  `json:"memorySizeInMiB"`
}

type describedCard struct {
	Index         int32 `json:"networkCardIndex"`
	MaxInterfaces int32 `json:"maximumNetworkInterfaces"`
}

// described is the same view of an SDK answer.
func described(info ec2types.InstanceTypeInfo) describedType {
	d := describedType{
		InstanceType: string(info.InstanceType), BareMetal: aws.ToBool(info.BareMetal),
		Burstable: aws.ToBool(info.BurstablePerformanceSupported), Hypervisor: string(info.Hypervisor),
	}
	for _, u := range info.SupportedUsageClasses {
		d.SupportedUsageClasses = append(d.SupportedUsageClasses, string(u))
	}
	if p := info.ProcessorInfo; p != nil {
		d.ProcessorManufacturer = aws.ToString(p.Manufacturer)
		for _, a := range p.SupportedArchitectures {
			d.Architectures = append(d.Architectures, string(a))
		}
	}
	if c := info.VCpuInfo; c != nil {
		d.DefaultVCpus, d.DefaultCores = aws.ToInt32(c.DefaultVCpus), aws.ToInt32(c.DefaultCores)
	}
	if m := info.MemoryInfo; m != nil {
		d.MemorySizeInMiB = aws.ToInt64(m.SizeInMiB)
	}
	if g := info.GpuInfo; g != nil {
		for _, x := range g.Gpus {
			gpu := describedGPU{Name: aws.ToString(x.Name), Manufacturer: aws.ToString(x.Manufacturer), Count: aws.ToInt32(x.Count)}
			if x.MemoryInfo != nil {
				gpu.MemoryMiB = aws.ToInt32(x.MemoryInfo.SizeInMiB)
			}
			d.GPUs = append(d.GPUs, gpu)
		}
	}
	if n := info.NeuronInfo; n != nil {
		for _, x := range n.NeuronDevices {
			dev := describedNeuron{Name: aws.ToString(x.Name), Count: aws.ToInt32(x.Count)}
			if x.CoreInfo != nil {
				dev.CoreCount, dev.CoreVersion = aws.ToInt32(x.CoreInfo.Count), aws.ToInt32(x.CoreInfo.Version)
			}
			if x.MemoryInfo != nil {
				dev.MemoryMiB = aws.ToInt32(x.MemoryInfo.SizeInMiB)
			}
			d.NeuronDevices = append(d.NeuronDevices, dev)
		}
	}
	if s := info.InstanceStorageInfo; s != nil {
		d.InstanceStorageGB, d.InstanceStorageNvme = aws.ToInt64(s.TotalSizeInGB), string(s.NvmeSupport)
	}
	if n := info.NetworkInfo; n != nil {
		if n.EfaInfo != nil {
			d.MaximumEfaInterfaces = aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces)
		}
		d.MaximumNetworkInterfaces, d.IPv4PerInterface = aws.ToInt32(n.MaximumNetworkInterfaces), aws.ToInt32(n.Ipv4AddressesPerInterface)
		d.EncryptionInTransit, d.DefaultNetworkCardIndex = aws.ToBool(n.EncryptionInTransitSupported), aws.ToInt32(n.DefaultNetworkCardIndex)
		for _, c := range n.NetworkCards {
			d.NetworkCards = append(d.NetworkCards, describedCard{Index: aws.ToInt32(c.NetworkCardIndex), MaxInterfaces: aws.ToInt32(c.MaximumNetworkInterfaces)})
		}
	}
	if p := info.PlacementGroupInfo; p != nil {
		for _, s := range p.SupportedStrategies {
			d.PlacementStrategies = append(d.PlacementStrategies, string(s))
		}
	}
	return d
}

// mismatches names every field in which the fake's answer differs from EC2's.
func mismatches(fake, real describedType) []string {
	var out []string
	fv, rv := reflect.ValueOf(fake), reflect.ValueOf(real)
	for i := range fv.NumField() {
		f, r := fv.Field(i).Interface(), rv.Field(i).Interface()
		if !reflect.DeepEqual(f, r) {
			name, _, _ := strings.Cut(fv.Type().Field(i).Tag.Get("json"), ",")
			out = append(out, fmt.Sprintf("%s: fake %+v, EC2 %+v", name, f, r))
		}
	}
	return out
}

// metalTypes are the fixture's types the embedded catalog lacks: it lists no
// bare-metal type. The test serves m5.metal as EC2 sizes and prices it (the size
// and price of m5.24xlarge: 96 vCPUs, 384 GiB, 15 interfaces of 50 addresses),
// so that what the fake derives for bare metal (no hypervisor, the BareMetal
// flag, cores) is still judged.
func metalTypes() []*scheduling.InstanceType {
	return []*scheduling.InstanceType{{
		Name: "m5.metal",
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse("96"),
			corev1.ResourceMemory: resource.MustParse("384Gi"),
			corev1.ResourcePods:   resource.MustParse("737"),
		},
		Offerings: []scheduling.Offering{
			{Zone: "us-east-1a", CapacityType: "on-demand", Price: 4.608, Available: true},
			{Zone: "us-east-1a", CapacityType: "spot", Price: 1.5, Available: true},
		},
	}}
}

// TestDescribeInstanceTypesMatchesEC2 asks the fake's DescribeInstanceTypes,
// through the SDK, for the 17 types whose real answers Karpenter recorded, and
// compares every fact the fixture holds.
func TestDescribeInstanceTypesMatchesEC2(t *testing.T) {
	data, err := os.ReadFile("testdata/ec2-describe-instance-types.json")
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		InstanceTypes []describedType `json:"instanceTypes"`
	}
	if err := json.Unmarshal(data, &fixture); err != nil {
		t.Fatal(err)
	}
	if len(fixture.InstanceTypes) != 17 {
		t.Fatalf("the fixture holds %d types, want 17", len(fixture.InstanceTypes))
	}
	catalogServer := ec2Client(start(t, Options{}))
	metalServer := ec2Client(start(t, Options{InstanceTypes: metalTypes()}))
	for _, want := range fixture.InstanceTypes {
		t.Run(want.InstanceType, func(t *testing.T) {
			c := catalogServer
			if slices.ContainsFunc(metalTypes(), func(it *scheduling.InstanceType) bool { return it.Name == want.InstanceType }) {
				c = metalServer
			}
			out := must(c.DescribeInstanceTypes(ctx(t), &ec2.DescribeInstanceTypesInput{
				InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(want.InstanceType)}})).ok(t)
			if len(out.InstanceTypes) != 1 {
				t.Fatalf("the fake answers %d types", len(out.InstanceTypes))
			}
			for _, m := range mismatches(described(out.InstanceTypes[0]), want) {
				t.Errorf("%s %s", want.InstanceType, m)
			}
		})
	}
}

// TestAcceleratorsAsEC2ListsThem covers what the fixture has no example of:
// Gaudi and AMD GPUs in GpuInfo, Inferentia in both NeuronInfo and
// InferenceAcceleratorInfo, Qualcomm's accelerators in InferenceAcceleratorInfo
// only, and instance stores without NVMe.
func TestAcceleratorsAsEC2ListsThem(t *testing.T) {
	c := ec2Client(start(t, Options{}))
	out := must(c.DescribeInstanceTypes(ctx(t), &ec2.DescribeInstanceTypesInput{
		InstanceTypes: []ec2types.InstanceType{"dl1.24xlarge", "g4ad.xlarge", "inf1.xlarge", "trn1.32xlarge", "d2.xlarge"}})).ok(t)
	got := map[string]ec2types.InstanceTypeInfo{}
	for _, it := range out.InstanceTypes {
		got[string(it.InstanceType)] = it
	}
	gpu := func(name string) string {
		g := got[name].GpuInfo
		if g == nil || len(g.Gpus) != 1 {
			return "none"
		}
		d := g.Gpus[0]
		return fmt.Sprintf("%d %s %s %d MiB", aws.ToInt32(d.Count), aws.ToString(d.Manufacturer), aws.ToString(d.Name), aws.ToInt32(d.MemoryInfo.SizeInMiB))
	}
	if g := gpu("dl1.24xlarge"); g != "8 Habana Gaudi HL-205 32768 MiB" {
		t.Errorf("dl1.24xlarge GPUs: %s", g)
	}
	if g := gpu("g4ad.xlarge"); g != "1 AMD Radeon Pro V520 8192 MiB" {
		t.Errorf("g4ad.xlarge GPUs: %s", g)
	}
	inf1 := got["inf1.xlarge"]
	if n := inf1.NeuronInfo; n == nil || len(n.NeuronDevices) != 1 || aws.ToString(n.NeuronDevices[0].Name) != "Inferentia" ||
		aws.ToInt32(n.NeuronDevices[0].CoreInfo.Count) != 4 || aws.ToInt32(n.NeuronDevices[0].CoreInfo.Version) != 1 {
		t.Errorf("inf1.xlarge NeuronInfo: %+v", n)
	}
	if a := inf1.InferenceAcceleratorInfo; a == nil || len(a.Accelerators) != 1 || aws.ToString(a.Accelerators[0].Manufacturer) != "AWS" || aws.ToInt32(a.Accelerators[0].Count) != 1 {
		t.Errorf("inf1.xlarge InferenceAcceleratorInfo: %+v", a)
	}
	trn := got["trn1.32xlarge"]
	if n := trn.NeuronInfo; n == nil || aws.ToInt32(n.NeuronDevices[0].Count) != 16 || aws.ToInt32(n.NeuronDevices[0].CoreInfo.Count) != 2 {
		t.Errorf("trn1.32xlarge NeuronInfo: %+v", n)
	}
	if !slices.Contains(trn.SupportedUsageClasses, ec2types.UsageClassTypeCapacityBlock) {
		t.Errorf("trn1.32xlarge usage classes %v: EC2 sells it as Capacity Blocks", trn.SupportedUsageClasses)
	}
	if e := trn.NetworkInfo.EfaInfo; e == nil || aws.ToInt32(e.MaximumEfaInterfaces) != 8 {
		t.Errorf("trn1.32xlarge EFA: %+v", e)
	}
	if s := got["d2.xlarge"].InstanceStorageInfo; s == nil || aws.ToInt64(s.TotalSizeInGB) != 6000 || s.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported ||
		len(s.Disks) != 1 || aws.ToInt32(s.Disks[0].Count) != 3 || s.Disks[0].Type != ec2types.DiskTypeHdd {
		t.Errorf("d2.xlarge instance store: %+v", s)
	}
}
