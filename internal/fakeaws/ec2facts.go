package fakeaws

import (
	_ "embed"
	"encoding/json"
	"sync"
)

// ec2FactsJSON is what EC2's DescribeInstanceTypes says of each type beyond its
// size and network limits: processor maker and clock, hypervisor ("" on bare
// metal), encryption in transit, NVMe instance store, EFA interfaces, GPUs and
// accelerators, in EC2's own spelling. It was read off the reference Karpenter's
// generator prints from DescribeInstanceTypes (aws/karpenter-provider-aws
// website/content/en/docs/reference/instance-types.md at commit 1d927085dd81, the
// same page the embedded catalog came from; for the 15 types that page no longer
// lists, its v1.14, v1.13, v1.12 and v1.0 copies), label values turned back into
// EC2's names ("a10g" → "A10G"), the neuroncore count divided back into cores per
// device. The fake serves these facts, not numbers derived from Tailor's catalog.
//
//go:embed ec2facts.json
var ec2FactsJSON []byte

// ec2Facts is one type's row.
type ec2Facts struct {
	Manufacturer        string          `json:"manufacturer"`
	ClockGHz            float64         `json:"clockGHz"`
	Hypervisor          string          `json:"hypervisor"`
	EncryptionInTransit bool            `json:"encryptionInTransit"`
	LocalNVMeGB         int64           `json:"localNVMeGB"`
	EFA                 int32           `json:"efa"`
	GPU                 *ec2GPU         `json:"gpu"`
	Accelerator         *ec2Accelerator `json:"accelerator"`
}

type ec2GPU struct {
	Name         string `json:"name"`
	Manufacturer string `json:"manufacturer"`
	Count        int32  `json:"count"`
	MemoryMiB    int64  `json:"memoryMiB"`
}

// ec2Accelerator is a type's Neuron devices (made by AWS: NeuronInfo) or other
// inference accelerators (InferenceAcceleratorInfo).
type ec2Accelerator struct {
	Name         string `json:"name"`
	Manufacturer string `json:"manufacturer"`
	Count        int32  `json:"count"`
	Cores        int32  `json:"cores"` // per Neuron device
}

var awsEC2Facts = sync.OnceValue(func() map[string]ec2Facts {
	m := map[string]ec2Facts{}
	if err := json.Unmarshal(ec2FactsJSON, &m); err != nil {
		panic("fakeaws: ec2facts.json: " + err.Error())
	}
	return m
})

// neuronDevice is what EC2's NeuronInfo says of a Neuron device beyond its count
// and cores: its memory and NeuronCore version (AWS Neuron documentation,
// "Neuron hardware": Inferentia 8 GiB and NeuronCore-v1, Inferentia2 and
// Trainium 32 GiB and v2, Trainium2 96 GiB and v3).
var neuronDevice = map[string]struct {
	MemoryMiB   int32
	CoreVersion int32
}{
	"Inferentia":  {8192, 1},
	"Inferentia2": {32768, 2},
	"Trainium":    {32768, 2},
	"Trainium2":   {98304, 3},
}

// inferenceAcceleratorMemoryMiB is InferenceAcceleratorInfo's memory per device.
var inferenceAcceleratorMemoryMiB = map[string]int64{
	"Inferentia":     8192,
	"Qualcomm AI100": 16384, // dl2q.24xlarge: 8 devices, 128 GiB in all
}

// capacityBlockTypes are the types EC2 sells as Capacity Blocks for ML (their
// supportedUsageClasses include capacity-block; EC2 User Guide, "Capacity Blocks
// for ML", supported instance types).
var capacityBlockTypes = map[string]bool{
	"p4d.24xlarge": true, "p4de.24xlarge": true, "p5.48xlarge": true, "p5e.48xlarge": true,
	"p5en.48xlarge": true, "p6-b200.48xlarge": true, "trn1.32xlarge": true, "trn2.48xlarge": true,
}

// instanceStore is a type's instance-store volumes: count × size in GB.
type instanceStore struct {
	Disks  int32
	SizeGB int64
	Type   string // ssd or hdd
}

// olderInstanceStores are the instance stores EC2 attaches without NVMe (the
// families before Nitro; EC2 User Guide, "Instance store volume limits"), which
// the NVMe facts above do not list.
var olderInstanceStores = map[string]instanceStore{
	"c3.large": {2, 16, "ssd"}, "c3.xlarge": {2, 40, "ssd"}, "c3.2xlarge": {2, 80, "ssd"}, "c3.4xlarge": {2, 160, "ssd"}, "c3.8xlarge": {2, 320, "ssd"},
	"m3.medium": {1, 4, "ssd"}, "m3.large": {1, 32, "ssd"}, "m3.xlarge": {2, 40, "ssd"}, "m3.2xlarge": {2, 80, "ssd"},
	"r3.large": {1, 32, "ssd"}, "r3.xlarge": {1, 80, "ssd"}, "r3.2xlarge": {1, 160, "ssd"}, "r3.4xlarge": {1, 320, "ssd"}, "r3.8xlarge": {2, 320, "ssd"},
	"i2.xlarge": {1, 800, "ssd"}, "i2.2xlarge": {2, 800, "ssd"}, "i2.4xlarge": {4, 800, "ssd"}, "i2.8xlarge": {8, 800, "ssd"},
	"x1.16xlarge": {1, 1920, "ssd"}, "x1.32xlarge": {2, 1920, "ssd"},
	"x1e.xlarge": {1, 120, "ssd"}, "x1e.2xlarge": {1, 240, "ssd"}, "x1e.4xlarge": {1, 480, "ssd"}, "x1e.8xlarge": {1, 960, "ssd"}, "x1e.16xlarge": {1, 1920, "ssd"}, "x1e.32xlarge": {2, 1920, "ssd"},
	"d2.xlarge": {3, 2000, "hdd"}, "d2.2xlarge": {6, 2000, "hdd"}, "d2.4xlarge": {12, 2000, "hdd"}, "d2.8xlarge": {24, 2000, "hdd"},
	"h1.2xlarge": {1, 2000, "hdd"}, "h1.4xlarge": {2, 2000, "hdd"}, "h1.8xlarge": {4, 2000, "hdd"}, "h1.16xlarge": {8, 2000, "hdd"},
}

// nvmeDisks splits an NVMe instance store of total GB into its volumes. EC2's
// facts give the total; the split is nominal (volumes of at most 3,800 GB, the
// size of the largest NVMe volume EC2 attaches to most families), HDD for the
// dense-storage d3 and d3en families.
func nvmeDisks(family string, total int64) instanceStore {
	kind := "ssd"
	per := int64(3800)
	switch family {
	case "d3":
		kind, per = "hdd", 1980
	case "d3en":
		kind, per = "hdd", 13980
	}
	disks := int32((total + per - 1) / per)
	return instanceStore{Disks: disks, SizeGB: total / int64(disks), Type: kind}
}
