// Package catalog reads instance-type catalogs in the Karpenter kwok JSON format and
// ships a realistic default: AWS EC2 in us-east-1 (public specs and on-demand prices,
// estimated spot prices). Names in AWS form ("m5.large") also get the labels AWS
// NodePools select on (karpenter.k8s.aws/instance-family, -cpu, …), so NodePools
// written for AWS work in simulation unchanged. A catalog lists what a type has; a
// model from package allocatable says what its nodes keep back: an EKS node's
// reservations, or kwok's flat 100m cpu and 10Mi memory.
package catalog

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

//go:embed aws-us-east-1.json
var awsUSEast1 []byte

var embedded = sync.OnceValues(func() (*Catalog, error) { return Parse(awsUSEast1) })

// EmbeddedAWSUSEast1 returns the embedded EC2 us-east-1 catalog, read once.
func EmbeddedAWSUSEast1() (*Catalog, error) { return embedded() }

// AWSUSEast1 returns the embedded EC2 us-east-1 instance types as EKS nodes with
// Karpenter's defaults (allocatable.DefaultEKS).
func AWSUSEast1() ([]*scheduling.InstanceType, error) {
	c, err := embedded()
	if err != nil {
		return nil, err
	}
	return c.InstanceTypes(allocatable.DefaultEKS())
}

// Load reads a catalog file, gzipped or not.
func Load(path string) (*Catalog, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(data, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// The kwok format, as Karpenter's kwok provider writes it.
type entry struct {
	Name             string            `json:"name"`
	Offerings        []offering        `json:"offerings"`
	Architecture     string            `json:"architecture"`
	OperatingSystems []string          `json:"operatingSystems"`
	Resources        map[string]string `json:"resources"`
}

type offering struct {
	Price        float64       `json:"Price"`
	Available    bool          `json:"Available"`
	Requirements []requirement `json:"Requirements"`
}

type requirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

// Catalog is an instance-type catalog as listed: each type's resources, labels and
// offerings. What a node of a type keeps back for itself is a model's choice (see
// InstanceTypes), so one catalog serves EKS-like nodes and kwok's alike.
type Catalog struct {
	types []listed
}

// listed is one type of a catalog, before a model gives its capacity and overhead.
type listed struct {
	it    scheduling.InstanceType // name, requirements and offerings
	shape allocatable.Shape
	// other are the listed resources the models take as they are (GPUs).
	other corev1.ResourceList
}

// Parse reads a catalog.
func Parse(data []byte) (*Catalog, error) {
	var entries []entry
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf("instance types: %w", err)
	}
	c := &Catalog{types: make([]listed, 0, len(entries))}
	seen := map[string]bool{}
	for i, e := range entries {
		if e.Name == "" {
			return nil, fmt.Errorf("instance type #%d: name is empty", i)
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("instance type %q: listed twice", e.Name)
		}
		seen[e.Name] = true
		l, err := convert(e)
		if err != nil {
			return nil, fmt.Errorf("instance type %q: %w", e.Name, err)
		}
		c.types = append(c.types, l)
	}
	return c, nil
}

// InstanceTypes returns the catalog's types with the capacity and overhead model
// gives their nodes. The types share their requirements and offerings, which the
// engine only reads.
func (c *Catalog) InstanceTypes(model allocatable.Model) ([]*scheduling.InstanceType, error) {
	out := make([]*scheduling.InstanceType, len(c.types))
	for i := range c.types {
		l := &c.types[i]
		node, err := model.Node(l.shape)
		if err != nil {
			return nil, fmt.Errorf("instance type %s: %w", l.it.Name, err)
		}
		it := l.it
		it.Capacity, it.Overhead = node.Capacity, node.Overhead
		for name, q := range l.other {
			it.Capacity[name] = q.DeepCopy()
		}
		out[i] = &it
	}
	return out, nil
}

func convert(e entry) (listed, error) {
	l := listed{it: scheduling.InstanceType{Name: e.Name}, other: corev1.ResourceList{}}
	resources := corev1.ResourceList{}
	for name, v := range e.Resources {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return listed{}, fmt.Errorf("resources.%s: %q is not a quantity", name, v)
		}
		if q.Sign() < 0 {
			return listed{}, fmt.Errorf("resources.%s: %q is negative", name, v)
		}
		resources[corev1.ResourceName(name)] = q
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if _, ok := resources[name]; !ok {
			return listed{}, fmt.Errorf("resources.%s is missing", name)
		}
	}
	// pods, as the network limits them (0: not listed), and ephemeral-storage, the
	// root volume, are the models' to turn into capacity.
	pods := resources[corev1.ResourcePods]
	l.shape = allocatable.Shape{CPU: resources[corev1.ResourceCPU], Memory: resources[corev1.ResourceMemory],
		Pods: pods.Value(), RootVolume: resources[corev1.ResourceEphemeralStorage], Arch: e.Architecture}
	for name, q := range resources {
		switch name {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage:
		default:
			l.other[name] = q
		}
	}
	it := &l.it
	if len(e.Offerings) == 0 {
		return listed{}, fmt.Errorf("no offerings")
	}
	var zones, captypes []string
	for i, o := range e.Offerings {
		off := scheduling.Offering{Price: o.Price, Available: o.Available}
		for _, r := range o.Requirements {
			if r.Operator != "In" || len(r.Values) != 1 {
				return listed{}, fmt.Errorf("offering %d: requirement %s must be In with one value", i, r.Key)
			}
			switch r.Key {
			case v1.LabelZone:
				off.Zone = r.Values[0]
			case v1.CapacityTypeLabelKey:
				off.CapacityType = r.Values[0]
			}
		}
		if off.Zone == "" || off.CapacityType == "" {
			return listed{}, fmt.Errorf("offering %d: needs a %s and a %s requirement", i, v1.LabelZone, v1.CapacityTypeLabelKey)
		}
		if o.Price < 0 {
			return listed{}, fmt.Errorf("offering %d: negative price %v", i, o.Price)
		}
		it.Offerings = append(it.Offerings, off)
		zones = append(zones, off.Zone)
		captypes = append(captypes, off.CapacityType)
	}
	// Labels name the type as listed (instance-memory 8192 for m5.large), not the node.
	labels := Labels(e.Name, resources)
	labels[v1.LabelArch] = e.Architecture
	reqs := scheduling.LabelRequirements(labels)
	oses := e.OperatingSystems
	if len(oses) == 0 {
		oses = []string{"linux"}
	}
	regions := make([]string, 0, len(zones))
	for _, z := range zones {
		regions = append(regions, regionOf(z))
	}
	for key, values := range map[string][]string{
		v1.LabelOS: oses, v1.LabelZone: zones, v1.CapacityTypeLabelKey: captypes, v1.LabelRegion: regions,
	} {
		reqs = reqs.With(scheduling.MustRequirement(key, v1.NodeSelectorOpIn, values...))
	}
	it.Requirements = reqs
	return l, nil
}

// regionOf strips the zone letter: us-east-1a → us-east-1.
func regionOf(zone string) string {
	if i := len(zone) - 1; i > 0 && zone[i] >= 'a' && zone[i] <= 'z' && zone[i-1] >= '0' && zone[i-1] <= '9' {
		return zone[:i]
	}
	return zone
}

var awsName = regexp.MustCompile(`^(([a-z]+)-?([0-9]+)?[a-z0-9-]*)\.([a-z0-9-]+)$`)

// Labels derives the instance-type labels from a name and capacity: the well-known
// instance-type label, the kwok provider's, and for AWS-style names ("family.size")
// the Karpenter AWS provider's.
func Labels(name string, capacity corev1.ResourceList) map[string]string {
	cpu := capacity[corev1.ResourceCPU]
	mem := capacity[corev1.ResourceMemory]
	mib := strconv.FormatInt(mem.Value()/(1<<20), 10)
	labels := map[string]string{
		v1.LabelInstanceType:                name,
		"karpenter.kwok.sh/instance-cpu":    strconv.FormatInt(cpu.Value(), 10),
		"karpenter.kwok.sh/instance-memory": mib,
	}
	m := awsName.FindStringSubmatch(name)
	if m == nil {
		return labels
	}
	family, category, generation, size := m[1], m[2], m[3], m[4]
	labels["karpenter.kwok.sh/instance-family"] = strings.FieldsFunc(family, func(r rune) bool { return r == '-' })[0]
	labels["karpenter.kwok.sh/instance-size"] = size
	labels[awsPrefix+"instance-family"] = family
	labels[awsPrefix+"instance-category"] = category
	if generation != "" {
		labels[awsPrefix+"instance-generation"] = generation
	}
	labels[awsPrefix+"instance-size"] = size
	labels[awsPrefix+"instance-cpu"] = strconv.FormatInt(cpu.Value(), 10)
	labels[awsPrefix+"instance-memory"] = mib
	labels[awsPrefix+"instance-gpu-count"] = "0"
	for _, gpu := range gpuResources {
		if n, ok := capacity[gpu.resource]; ok && n.Value() > 0 {
			labels[awsPrefix+"instance-gpu-count"] = strconv.FormatInt(n.Value(), 10)
			labels[awsPrefix+"instance-gpu-manufacturer"] = gpu.manufacturer
			if name, ok := gpuNames[family]; ok {
				labels[awsPrefix+"instance-gpu-name"] = name
			}
			break
		}
	}
	if n, ok := capacity[ResourceNeuron]; ok && n.Value() > 0 {
		labels[awsPrefix+"instance-accelerator-count"] = strconv.FormatInt(n.Value(), 10)
		labels[awsPrefix+"instance-accelerator-manufacturer"] = "aws"
		if name, ok := neuronNames[family]; ok {
			labels[awsPrefix+"instance-accelerator-name"] = name
		}
	}
	return labels
}

const awsPrefix = "karpenter.k8s.aws/"

// The extended resources of EC2 types, as Karpenter's AWS provider names them.
const (
	ResourceNVIDIAGPU  corev1.ResourceName = "nvidia.com/gpu"
	ResourceAMDGPU     corev1.ResourceName = "amd.com/gpu"
	ResourceNeuron     corev1.ResourceName = "aws.amazon.com/neuron"     // Neuron devices (Inferentia, Trainium)
	ResourceNeuronCore corev1.ResourceName = "aws.amazon.com/neuroncore" // their cores: devices × cores per device
	ResourceGaudi      corev1.ResourceName = "habana.ai/gaudi"
	ResourceEFA        corev1.ResourceName = "vpc.amazonaws.com/efa"     // EFA interfaces
	ResourcePodENI     corev1.ResourceName = "vpc.amazonaws.com/pod-eni" // branch interfaces, for security groups per pod
)

// gpuResources are the GPUs a type may list, with the manufacturer its
// instance-gpu-manufacturer label names (Habana's Gaudi counts as a GPU there, as
// EC2 lists it among the GPUs).
var gpuResources = []struct {
	resource     corev1.ResourceName
	manufacturer string
}{{ResourceNVIDIAGPU, "nvidia"}, {ResourceAMDGPU, "amd"}, {ResourceGaudi, "habana"}}

// gpuNames are the GPUs of EC2 families, as the AWS provider labels them.
var gpuNames = map[string]string{
	"g3": "m60", "g3s": "m60", "g4dn": "t4", "g5": "a10g", "g5g": "t4g", "g6": "l4", "gr6": "l4",
	"g6e": "l40s", "p3": "v100", "p3dn": "v100", "p4d": "a100", "p4de": "a100", "p5": "h100",
	"p5e": "h200", "p5en": "h200", "p6-b200": "b200", "p6-b300": "b300",
	"g7": "rtx-pro-4500", "g7e": "rtx-pro-server-6000", "g4ad": "radeon-pro-v520", "dl1": "gaudi-hl-205",
}

// neuronNames are the Neuron devices of EC2 families, as the AWS provider labels
// them (instance-accelerator-name).
var neuronNames = map[string]string{
	"inf1": "inferentia", "inf2": "inferentia2", "trn1": "trainium", "trn1n": "trainium", "trn2": "trainium2",
}
