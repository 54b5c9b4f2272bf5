package catalog

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

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
	alloc := m5.Allocatable()
	if cpu := alloc[corev1.ResourceCPU]; cpu.MilliValue() != 1900 {
		t.Errorf("m5.large allocatable cpu %s, want 1900m (2 less kwok's 100m)", cpu.String())
	}
	if pods := alloc[corev1.ResourcePods]; pods.Value() != 29 {
		t.Errorf("m5.large pods %s, want 29", pods.String())
	}
	o, ok := m5.CheapestOffering(nil)
	if !ok || o.CapacityType != "spot" || o.Price != 0.037441 || o.Zone != "us-east-1b" {
		t.Errorf("m5.large cheapest offering %+v, want spot in us-east-1b at 0.037441", o)
	}
	p3 := types[byName["p3.2xlarge"]]
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
