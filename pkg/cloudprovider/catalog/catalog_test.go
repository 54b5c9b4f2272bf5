package catalog

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// view prints cpu in millicores and sizes in powers of two, as the node would show them.
func view(list corev1.ResourceList) map[string]string {
	out := map[string]string{}
	for name, q := range list {
		switch name {
		case corev1.ResourceCPU:
			out[string(name)] = resource.NewMilliQuantity(q.MilliValue(), resource.DecimalSI).String()
		case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
			out[string(name)] = resource.NewQuantity(q.Value(), resource.BinarySI).String()
		default:
			out[string(name)] = q.String()
		}
	}
	return out
}

func TestAWSCatalog(t *testing.T) {
	types, err := AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	if len(types) != 1209 {
		t.Errorf("%d instance types, want the catalog's 1209", len(types))
	}
	byName := map[string]int{}
	for i, it := range types {
		byName[it.Name] = i
	}
	m5 := types[byName["m5.large"]]
	for key, want := range map[string]string{
		v1.LabelInstanceType:                    "m5.large",
		v1.LabelArch:                            "amd64",
		v1.LabelOS:                              "linux",
		v1.LabelRegion:                          "us-east-1",
		"karpenter.k8s.aws/instance-family":     "m5",
		"karpenter.k8s.aws/instance-category":   "m",
		"karpenter.k8s.aws/instance-generation": "5",
		"karpenter.k8s.aws/instance-size":       "large",
		"karpenter.k8s.aws/instance-cpu":        "2",
		"karpenter.k8s.aws/instance-memory":     "8192",
		"karpenter.k8s.aws/instance-gpu-count":  "0",
	} {
		r, ok := m5.Requirements.Get(key)
		if !ok || !r.Has(want) || len(r.Values()) != 1 {
			t.Errorf("m5.large %s: got %v, want %s", key, r, want)
		}
	}
	zones, _ := m5.Requirements.Get(v1.LabelZone)
	if got := strings.Join(zones.Values(), ","); got != "us-east-1a,us-east-1b,us-east-1c" {
		t.Errorf("m5.large zones %s", got)
	}
	// As an EKS node: Karpenter's reference lists 1930m, 6903Mi, 17Gi, 29 pods and
	// 9 branch interfaces.
	if diff := cmp.Diff(map[string]string{"cpu": "1930m", "memory": "6903Mi", "ephemeral-storage": "17Gi", "pods": "29", "vpc.amazonaws.com/pod-eni": "9"},
		view(m5.Allocatable())); diff != "" {
		t.Errorf("m5.large allocatable (-want +got):\n%s", diff)
	}
	if mem := m5.Capacity[corev1.ResourceMemory]; mem.String() != "7577Mi" {
		t.Errorf("m5.large memory capacity %s, want 7577Mi (8Gi less 7.5%% VM overhead)", mem.String())
	}
	// 512Mi less 39Mi VM overhead, 299Mi kube-reserved and 100Mi eviction: a 256M pod
	// does not fit.
	nano := types[byName["t3a.nano"]].Allocatable()
	if mem := nano[corev1.ResourceMemory]; mem.String() != "74Mi" {
		t.Errorf("t3a.nano allocatable memory %s, want 74Mi", mem.String())
	}
	o, ok := m5.CheapestOffering(nil)
	if !ok || o.CapacityType != "spot" || o.Price != 0.037441 || o.Zone != "us-east-1b" {
		t.Errorf("m5.large cheapest offering %+v, want spot in us-east-1b at 0.037441", o)
	}
	p3 := types[byName["p3.2xlarge"]]
	if gpus := p3.Allocatable()["nvidia.com/gpu"]; gpus.Value() != 1 {
		t.Errorf("p3.2xlarge allocatable nvidia.com/gpu %s, want 1", gpus.String())
	}
	for key, want := range map[string]string{"karpenter.k8s.aws/instance-gpu-name": "v100", "karpenter.k8s.aws/instance-gpu-count": "1"} {
		if r, ok := p3.Requirements.Get(key); !ok || !r.Has(want) {
			t.Errorf("p3.2xlarge %s: got %v, want %s", key, r, want)
		}
	}
	flex := types[byName["c7i-flex.large"]]
	if r, _ := flex.Requirements.Get("karpenter.k8s.aws/instance-family"); !r.Has("c7i-flex") {
		t.Errorf("c7i-flex.large family %v", r)
	}
	if r, _ := flex.Requirements.Get("karpenter.k8s.aws/instance-generation"); !r.Has("7") {
		t.Errorf("c7i-flex.large generation %v", r)
	}
}

// Every extended resource an EC2 type has is in the catalog, with the counts
// Karpenter's AWS provider gives (its instance-type reference, from EC2's
// DescribeInstanceTypes: GPUs by manufacturer, Neuron devices and their cores,
// Gaudi accelerators, EFA interfaces, branch interfaces), and the labels AWS
// NodePools select accelerators by.
func TestExtendedResources(t *testing.T) {
	types, err := AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*scheduling.InstanceType{}
	for _, it := range types {
		byName[it.Name] = it
	}
	for name, tc := range map[string]struct {
		resources map[string]string
		labels    map[string]string
	}{
		"g4ad.xlarge": {map[string]string{"amd.com/gpu": "1", "vpc.amazonaws.com/pod-eni": "12"},
			map[string]string{"instance-gpu-count": "1", "instance-gpu-manufacturer": "amd", "instance-gpu-name": "radeon-pro-v520"}},
		"g4ad.16xlarge": {map[string]string{"amd.com/gpu": "4", "vpc.amazonaws.com/pod-eni": "6"},
			map[string]string{"instance-gpu-count": "4", "instance-gpu-manufacturer": "amd"}},
		// Inferentia: 4 NeuronCores a device; Inferentia2 and Trainium: 2.
		"inf1.xlarge": {map[string]string{"aws.amazon.com/neuron": "1", "aws.amazon.com/neuroncore": "4", "vpc.amazonaws.com/pod-eni": "38"},
			map[string]string{"instance-accelerator-count": "1", "instance-accelerator-manufacturer": "aws", "instance-accelerator-name": "inferentia", "instance-gpu-count": "0"}},
		"inf1.24xlarge": {map[string]string{"aws.amazon.com/neuron": "16", "aws.amazon.com/neuroncore": "64", "vpc.amazonaws.com/efa": "1", "vpc.amazonaws.com/pod-eni": "111"},
			map[string]string{"instance-accelerator-count": "16"}},
		"inf2.xlarge": {map[string]string{"aws.amazon.com/neuron": "1", "aws.amazon.com/neuroncore": "2", "vpc.amazonaws.com/pod-eni": "18"},
			map[string]string{"instance-accelerator-name": "inferentia2"}},
		"inf2.48xlarge": {map[string]string{"aws.amazon.com/neuron": "12", "aws.amazon.com/neuroncore": "24", "vpc.amazonaws.com/pod-eni": "107"}, nil},
		"trn1.2xlarge": {map[string]string{"aws.amazon.com/neuron": "1", "aws.amazon.com/neuroncore": "2", "vpc.amazonaws.com/pod-eni": "17"},
			map[string]string{"instance-accelerator-name": "trainium"}},
		"trn1.32xlarge": {map[string]string{"aws.amazon.com/neuron": "16", "aws.amazon.com/neuroncore": "32", "vpc.amazonaws.com/efa": "8", "vpc.amazonaws.com/pod-eni": "82"}, nil},
		"trn1n.32xlarge": {map[string]string{"aws.amazon.com/neuron": "16", "aws.amazon.com/neuroncore": "32", "vpc.amazonaws.com/efa": "16", "vpc.amazonaws.com/pod-eni": "120"},
			map[string]string{"instance-accelerator-name": "trainium"}},
		"dl1.24xlarge": {map[string]string{"habana.ai/gaudi": "8", "vpc.amazonaws.com/efa": "4", "vpc.amazonaws.com/pod-eni": "62"},
			map[string]string{"instance-gpu-count": "8", "instance-gpu-manufacturer": "habana", "instance-gpu-name": "gaudi-hl-205"}},
		"p5.48xlarge": {map[string]string{"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32", "vpc.amazonaws.com/pod-eni": "120"},
			map[string]string{"instance-gpu-count": "8", "instance-gpu-manufacturer": "nvidia", "instance-gpu-name": "h100"}},
		"c5n.18xlarge": {map[string]string{"vpc.amazonaws.com/efa": "1", "vpc.amazonaws.com/pod-eni": "107"}, nil},
		// Older types the current reference no longer lists, from earlier copies of it.
		"p3.2xlarge": {map[string]string{"nvidia.com/gpu": "1"}, nil},
		"g3.4xlarge": {map[string]string{"nvidia.com/gpu": "1", "vpc.amazonaws.com/pod-eni": "6"}, nil},
	} {
		it := byName[name]
		if it == nil {
			t.Errorf("%s is not in the catalog", name)
			continue
		}
		got := map[string]string{}
		for r, q := range it.Capacity {
			if strings.Contains(string(r), "/") {
				got[string(r)] = q.String()
			}
		}
		if diff := cmp.Diff(tc.resources, got); diff != "" {
			t.Errorf("%s extended resources (-want +got):\n%s", name, diff)
		}
		alloc := it.Allocatable()
		for r, want := range tc.resources {
			if q := alloc[corev1.ResourceName(r)]; q.String() != want {
				t.Errorf("%s allocatable %s: %s, want %s: a node keeps back none of it", name, r, q.String(), want)
			}
		}
		for key, want := range tc.labels {
			if r, ok := it.Requirements.Get("karpenter.k8s.aws/" + key); !ok || !r.Has(want) || len(r.Values()) != 1 {
				t.Errorf("%s karpenter.k8s.aws/%s: %v, want %s", name, key, r, want)
			}
		}
	}
	count := map[corev1.ResourceName]int{}
	for _, it := range types {
		for r := range it.Capacity {
			count[r]++
		}
	}
	// trn2.48xlarge is left out of the catalog (no us-east-1 price), so 11 Neuron types.
	for r, want := range map[corev1.ResourceName]int{ResourceNVIDIAGPU: 64, ResourceAMDGPU: 5, ResourceNeuron: 11, ResourceNeuronCore: 11,
		ResourceGaudi: 1, ResourceEFA: 174, ResourcePodENI: 1087} {
		if count[r] != want {
			t.Errorf("%d types have %s, want %d", count[r], r, want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for name, tc := range map[string]struct{ json, want string }{
		"not json":         {`{`, "instance types"},
		"unknown field":    {`[{"name":"a","bogus":1}]`, "unknown field"},
		"no name":          {`[{"offerings":[]}]`, "instance type #0: name is empty"},
		"bad quantity":     {`[{"name":"a","resources":{"cpu":"two","memory":"1Gi"},"offerings":[]}]`, `instance type "a": resources.cpu: "two" is not a quantity`},
		"no memory":        {`[{"name":"a","resources":{"cpu":"2"},"offerings":[]}]`, `instance type "a": resources.memory is missing`},
		"no offerings":     {`[{"name":"a","resources":{"cpu":"2","memory":"1Gi"}}]`, `instance type "a": no offerings`},
		"negative":         {`[{"name":"a","resources":{"cpu":"2","memory":"-1Gi"}}]`, `instance type "a": resources.memory: "-1Gi" is negative`},
		"offering no zone": {`[{"name":"a","resources":{"cpu":"2","memory":"1Gi"},"offerings":[{"Price":1,"Available":true,"Requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]}]}]}]`, `instance type "a": offering 0: needs a topology.kubernetes.io/zone`},
		"duplicate":        {`[{"name":"a","resources":{"cpu":"2","memory":"1Gi"},"offerings":[{"Price":1,"Available":true,"Requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]},{"key":"topology.kubernetes.io/zone","operator":"In","values":["z"]}]}]},{"name":"a","resources":{"cpu":"2","memory":"1Gi"},"offerings":[{"Price":1,"Available":true,"Requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]},{"key":"topology.kubernetes.io/zone","operator":"In","values":["z"]}]}]}]`, `instance type "a": listed twice`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// The kwok model reads the file as Karpenter's kwok provider does, so plans compare
// with its own: capacity as listed, less 100m cpu and 10Mi memory.
func TestKwokModel(t *testing.T) {
	c, err := EmbeddedAWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	types, err := c.InstanceTypes(allocatable.Kwok{})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		if it.Name != "m5.large" {
			continue
		}
		if diff := cmp.Diff(map[string]string{"cpu": "1900m", "memory": "8182Mi", "ephemeral-storage": "20Gi", "pods": "29", "vpc.amazonaws.com/pod-eni": "9"},
			view(it.Allocatable())); diff != "" {
			t.Errorf("m5.large allocatable (-want +got):\n%s", diff)
		}
		if r, _ := it.Requirements.Get("karpenter.k8s.aws/instance-memory"); !r.Has("8192") {
			t.Errorf("m5.large instance-memory %v, want 8192", r)
		}
		return
	}
	t.Fatal("no m5.large")
}

// Types made under different models share nothing a model sets.
func TestModelsDoNotShareCapacity(t *testing.T) {
	c, err := Parse([]byte(`[{"name":"a.large","architecture":"amd64","resources":{"cpu":"2","memory":"8Gi","pods":"29","nvidia.com/gpu":"1"},"offerings":[{"Price":1,"Available":true,"Requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]},{"key":"topology.kubernetes.io/zone","operator":"In","values":["z1a"]}]}]}]`))
	if err != nil {
		t.Fatal(err)
	}
	eks, err := c.InstanceTypes(allocatable.DefaultEKS())
	if err != nil {
		t.Fatal(err)
	}
	kwok, _ := c.InstanceTypes(allocatable.Kwok{})
	eks[0].Capacity["nvidia.com/gpu"] = resource.MustParse("0")
	if gpus := kwok[0].Capacity["nvidia.com/gpu"]; gpus.Value() != 1 {
		t.Errorf("kwok's type lost its GPU to a change of the EKS type's: %s", gpus.String())
	}
	if mem := kwok[0].Capacity[corev1.ResourceMemory]; mem.String() != "8Gi" {
		t.Errorf("kwok capacity memory %s, want 8Gi as listed", mem.String())
	}
	bad := allocatable.EKS{Kubelet: allocatable.Kubelet{KubeReserved: map[string]string{"memory": "lots"}}}
	if _, err := c.InstanceTypes(bad); err == nil || !strings.Contains(err.Error(), `instance type a.large: kubelet.kubeReserved.memory: "lots" is not a quantity`) {
		t.Errorf("got %v, want the kubelet setting named", err)
	}
}
