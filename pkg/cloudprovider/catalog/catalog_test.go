package catalog

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
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
	// As an EKS node: Karpenter's reference lists 1930m, 6903Mi, 17Gi and 29 pods.
	if diff := cmp.Diff(map[string]string{"cpu": "1930m", "memory": "6903Mi", "ephemeral-storage": "17Gi", "pods": "29"},
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
		if diff := cmp.Diff(map[string]string{"cpu": "1900m", "memory": "8182Mi", "ephemeral-storage": "20Gi", "pods": "29"},
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
