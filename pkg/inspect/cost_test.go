package inspect

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/state"
)

func usage(cpu, memory string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
}

// A pod pays for the larger of its requests and its usage, in each resource; pods
// using more than the node has share its price and leave no idle room.
func TestSharesByUsage(t *testing.T) {
	node := testobj.Node("n", "2", "8Gi")
	price := []NodePrice{{Node: "n", Known: true, Instance: 0.115}}
	// By hand: $0.115 over 2 cores × 0.031611 + 8 GiB × 0.004237 = 0.097118:
	// $0.0374314/core-hour, $0.0050171/GiB-hour.
	cpuRate, memRate := 0.115*0.031611/0.097118, 0.115*0.004237/0.097118
	for _, tc := range []struct {
		name    string
		usage   map[string]corev1.ResourceList
		want    map[string]float64
		byUsage map[string]bool
		idle    float64
	}{
		{name: "requests", want: map[string]float64{"a": 0.5*cpuRate + 1*memRate, "b": 0.5*cpuRate + 1*memRate},
			idle: 0.115 - cpuRate - 2*memRate},
		{name: "usage above requests in cpu only", usage: map[string]corev1.ResourceList{"default/a": usage("1", "512Mi")},
			want: map[string]float64{"a": 1*cpuRate + 1*memRate, "b": 0.5*cpuRate + 1*memRate}, byUsage: map[string]bool{"a": true},
			idle: 0.115 - 1.5*cpuRate - 2*memRate},
		{name: "usage over capacity", usage: map[string]corev1.ResourceList{"default/a": usage("3", "1Gi")},
			// 3.5 cores and 2 GiB charged, $0.1410 > $0.115: scaled to the price.
			want:    map[string]float64{"a": (3*cpuRate + memRate) * 0.115 / (3.5*cpuRate + 2*memRate), "b": (0.5*cpuRate + memRate) * 0.115 / (3.5*cpuRate + 2*memRate)},
			byUsage: map[string]bool{"a": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Cluster{Objects: &state.Objects{Nodes: []*corev1.Node{node}, Pods: []*corev1.Pod{
				testobj.Pod("a", "500m", "1Gi", testobj.NodeName("n")), testobj.Pod("b", "500m", "1Gi", testobj.NodeName("n"))}}, Usage: tc.usage}
			pods, idle := c.Shares(price)
			if len(pods) != 2 {
				t.Fatalf("pods %+v", pods)
			}
			for _, pc := range pods {
				if math.Abs(pc.PerHour-tc.want[pc.Name]) > 1e-9 || pc.ByUsage != tc.byUsage[pc.Name] {
					t.Errorf("%s: $%.6f/hour (by usage %v), want $%.6f (%v)", pc.Name, pc.PerHour, pc.ByUsage, tc.want[pc.Name], tc.byUsage[pc.Name])
				}
			}
			if math.Abs(idle["n"]-tc.idle) > 1e-9 {
				t.Errorf("idle $%.6f/hour, want $%.6f", idle["n"], tc.idle)
			}
		})
	}
}

func TestPoolReasons(t *testing.T) {
	got := poolReasons("NodePool a: limit cpu=10 leaves 2; no instance type offers 4 cpu; NodePool gpu-x: taint gpu=true:NoSchedule not tolerated")
	if len(got) != 2 || got[0].NodePool != "a" || got[0].Reason != "limit cpu=10 leaves 2; no instance type offers 4 cpu" ||
		got[1].NodePool != "gpu-x" || got[1].Reason != "taint gpu=true:NoSchedule not tolerated" || got[1].Fix == "" || got[0].Fix == "" {
		t.Errorf("%+v", got)
	}
	if got := poolReasons("no NodePool, and no existing node fits"); len(got) != 1 || got[0].NodePool != "" || got[0].Fix == "" {
		t.Errorf("%+v", got)
	}
}

// A node's NodeClaim is the first in the list that names the node or has its
// provider ID, as a scan of the list finds it.
func TestClaimOf(t *testing.T) {
	byID := testobj.NodeClaim("by-id", testobj.ClaimNode("sim://a", ""))
	byName := testobj.NodeClaim("by-name", testobj.ClaimNode("sim://other", "a"))
	late := testobj.NodeClaim("late", testobj.ClaimNode("sim://b", "b"))
	for _, tc := range []struct {
		claims []*v1.NodeClaim
		node   *corev1.Node
		want   string
	}{
		{[]*v1.NodeClaim{byID, byName}, testobj.Node("a", "2", "8Gi", testobj.ProviderID("sim://a")), "by-id"},
		{[]*v1.NodeClaim{byName, byID}, testobj.Node("a", "2", "8Gi", testobj.ProviderID("sim://a")), "by-name"},
		{[]*v1.NodeClaim{byID, late}, testobj.Node("b", "2", "8Gi"), "late"},
		{[]*v1.NodeClaim{byID, byName}, testobj.Node("c", "2", "8Gi"), ""},
	} {
		c := &Cluster{Objects: &state.Objects{NodeClaims: tc.claims}}
		got := ""
		if nc := c.claimOf(tc.node); nc != nil {
			got = nc.Name
		}
		if got != tc.want {
			t.Errorf("node %s among %d claims: claim %q, want %q", tc.node.Name, len(tc.claims), got, tc.want)
		}
	}
}
