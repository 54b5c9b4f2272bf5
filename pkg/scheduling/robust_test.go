package scheduling_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodetailor/tailor/api/v1"
	. "github.com/nodetailor/tailor/pkg/scheduling"
)

// smallType is an instance type with one on-demand offering in zone-a; extra adds
// to its capacity.
func smallType(name, cpu, memory string, price float64, extra corev1.ResourceList) *InstanceType {
	it := &InstanceType{Name: name, Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110")},
		Offerings: []Offering{{Zone: "zone-a", CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true}},
		Requirements: NewRequirements(
			MustRequirement(v1.LabelInstanceType, v1.NodeSelectorOpIn, name),
			MustRequirement(v1.LabelZone, v1.NodeSelectorOpIn, "zone-a"),
			MustRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeOnDemand))}
	for k, v := range extra {
		it.Capacity[k] = v
	}
	return it
}

// manyResources is n distinct extended resources, q of each.
func manyResources(n int, q string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := range n {
		out[corev1.ResourceName(fmt.Sprintf("example.com/device-%02d", i))] = resource.MustParse(q)
	}
	return out
}

func withRequests(list corev1.ResourceList) podOption {
	return func(p *corev1.Pod) {
		for k, v := range list {
			p.Spec.Containers[0].Resources.Requests[k] = v
		}
	}
}

func daemonSetPod(name, cpu, memory string, opts ...podOption) *corev1.Pod {
	p := makePod(name, cpu, memory, opts...)
	p.Namespace = "kube-system"
	return p
}

func failureList(plan *Plan) string {
	var out []string
	for _, f := range plan.Unschedulable {
		out = append(out, f.Pod.Name+": "+f.Reason)
	}
	return "[" + strings.Join(out, "; ") + "]"
}

func unschedulableReason(plan *Plan, pod string) (string, bool) {
	for _, f := range plan.Unschedulable {
		if f.Pod.Name == pod {
			return f.Reason, true
		}
	}
	return "", false
}

// One malformed or outlandish object may make only itself unschedulable (a pod),
// unavailable (a NodePool) or left out with a warning (a DaemonSet); the other
// pods are planned as usual, and the solve never fails.
func TestBadObjectsStayLocal(t *testing.T) {
	plain := smallType("plain", "4", "16Gi", 0.2, nil)
	devices := smallType("devices", "4", "16Gi", 0.5, manyResources(24, "2"))
	gtBad := []corev1.NodeSelectorRequirement{{Key: "example.com/generation", Operator: corev1.NodeSelectorOpGt, Values: []string{"new"}}}

	for _, tc := range []struct {
		name string
		in   func() *Input
		// unschedulable maps each pod expected unschedulable to a part of its reason.
		unschedulable map[string]string
		// warning is part of a warning the plan must carry ("" for none).
		warning string
		// bound maps pods expected on an existing node to that node.
		bound map[string]string
	}{{
		name: "a pod requesting more distinct resources than the inline table holds",
		in: func() *Input {
			return &Input{Pods: []*corev1.Pod{makePod("many", "1", "1Gi", withRequests(manyResources(20, "1"))), makePod("web", "1", "1Gi")},
				NodePools: []*NodePool{pool(makeNodePool("default"), []*InstanceType{plain, devices})}}
		},
	}, {
		name: "an existing node with more distinct resources than the inline table holds",
		in: func() *Input {
			n := existingNode("big", "8", "32Gi", nil)
			for k, v := range manyResources(20, "4") {
				n.Node.Status.Allocatable[k] = v
			}
			return &Input{Pods: []*corev1.Pod{makePod("many", "1", "1Gi", withRequests(manyResources(18, "1"))), makePod("web", "1", "1Gi")},
				Nodes: []*Node{n}, NodePools: []*NodePool{pool(makeNodePool("default"), []*InstanceType{plain})}}
		},
		bound: map[string]string{"many": "big", "web": "big"},
	}, {
		name: "a DaemonSet with more distinct resources than the inline table holds",
		in: func() *Input {
			return &Input{Pods: []*corev1.Pod{makePod("web", "1", "1Gi")},
				DaemonSets: []*corev1.Pod{daemonSetPod("agent", "100m", "100Mi", withRequests(manyResources(20, "1")))},
				NodePools:  []*NodePool{pool(makeNodePool("default"), []*InstanceType{devices})}}
		},
	}, {
		name: "a DaemonSet whose node affinity has Gt on a word",
		in: func() *Input {
			return &Input{Pods: []*corev1.Pod{makePod("web", "1", "1Gi")},
				DaemonSets: []*corev1.Pod{daemonSetPod("agent", "100m", "100Mi", withNodeAffinity(gtBad))},
				NodePools:  []*NodePool{pool(makeNodePool("default"), []*InstanceType{plain})}}
		},
		warning: `DaemonSet kube-system/agent: node affinity term 0 matches no node: requirement example.com/generation has operator Gt, which needs a single integer value, not "new"`,
	}, {
		name: "a DaemonSet requesting more cpu than can be represented",
		in: func() *Input {
			return &Input{Pods: []*corev1.Pod{makePod("web", "1", "1Gi")},
				DaemonSets: []*corev1.Pod{daemonSetPod("agent", "1e100", "100Mi")},
				NodePools:  []*NodePool{pool(makeNodePool("default"), []*InstanceType{plain})}}
		},
		warning: "DaemonSet kube-system/agent is left out of new nodes' sizes: it requests cpu 10e99, more than any node can offer",
	}, {
		name: "a pod whose node affinity has Gt on a word",
		in: func() *Input {
			return &Input{Pods: []*corev1.Pod{makePod("odd", "1", "1Gi", withNodeAffinity(gtBad)), makePod("web", "1", "1Gi")},
				NodePools: []*NodePool{pool(makeNodePool("default"), []*InstanceType{plain})}}
		},
		unschedulable: map[string]string{"odd": "needs a single integer value"},
	}, {
		name: "a pod requesting more cpu than can be represented",
		in: func() *Input {
			huge := smallType("huge", "1e100", "1e100", 9, nil)
			return &Input{Pods: []*corev1.Pod{makePod("greedy", "1e100", "1Gi"), makePod("web", "1", "1Gi")},
				NodePools: []*NodePool{pool(makeNodePool("default"), []*InstanceType{plain, huge})}}
		},
		unschedulable: map[string]string{"greedy": "pod requests cpu 10e99, more than any node can offer"},
	}, {
		name: "a pod requesting more memory than int64 holds",
		in: func() *Input {
			return &Input{Pods: []*corev1.Pod{makePod("greedy", "1", "100Ei"), makePod("web", "1", "1Gi")},
				NodePools: []*NodePool{pool(makeNodePool("default"), []*InstanceType{plain})}}
		},
		// The quantity parser already caps 100Ei at the int64 maximum.
		unschedulable: map[string]string{"greedy": "pod requests memory 9223372036854775807, more than any node can offer"},
	}, {
		name: "a pod with a negative request",
		in: func() *Input {
			return &Input{Pods: []*corev1.Pod{makePod("negative", "-2", "1Gi"), makePod("web", "1", "1Gi")},
				NodePools: []*NodePool{pool(makeNodePool("default"), []*InstanceType{plain})}}
		},
		unschedulable: map[string]string{"negative": "pod requests cpu -2, which is negative"},
	}, {
		name: "a NodePool cpu limit too large to represent is practically unlimited",
		in: func() *Input {
			return &Input{Pods: pods(3, "web", "3", "1Gi"),
				NodePools: []*NodePool{pool(makeNodePool("default", limit(corev1.ResourceCPU, "1e16"), limit(corev1.ResourceMemory, "1e100")), []*InstanceType{plain})}}
		},
	}, {
		name: "a NodePool whose requirements cannot be read",
		in: func() *Input {
			bad := makeNodePool("bad", weight(100), requirement("example.com/generation", v1.NodeSelectorOpGt, "new"))
			return &Input{Pods: []*corev1.Pod{makePod("web", "1", "1Gi")},
				NodePools: []*NodePool{pool(bad, []*InstanceType{plain}), pool(makeNodePool("default"), []*InstanceType{plain})}}
		},
	}, {
		name: "a NodePool whose requirements cannot be read says so when no other pool can help",
		in: func() *Input {
			bad := makeNodePool("bad", requirement("example.com/generation", v1.NodeSelectorOpGt, "new"))
			return &Input{Pods: []*corev1.Pod{makePod("web", "1", "1Gi")}, NodePools: []*NodePool{pool(bad, []*InstanceType{plain})}}
		},
		unschedulable: map[string]string{"web": "NodePool bad: its requirements cannot be read: requirement example.com/generation has operator Gt"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in()
			plan := solve(t, in)
			if len(plan.Unschedulable) != len(tc.unschedulable) {
				t.Errorf("unschedulable %s, want only %v", failureList(plan), tc.unschedulable)
			}
			for pod, want := range tc.unschedulable {
				reason, ok := unschedulableReason(plan, pod)
				if !ok || !strings.Contains(reason, want) {
					t.Errorf("pod %s: unschedulable=%v reason %q, want one saying %q", pod, ok, reason, want)
				}
			}
			if got := strings.Join(plan.Warnings, "\n"); (tc.warning == "") != (got == "") || !strings.Contains(got, tc.warning) {
				t.Errorf("warnings %q, want one saying %q", got, tc.warning)
			}
			bound := map[string]string{}
			for _, b := range plan.Bindings {
				bound[b.Pod.Name] = b.Node
			}
			for pod, node := range tc.bound {
				if bound[pod] != node {
					t.Errorf("pod %s bound to %q, want %s", pod, bound[pod], node)
				}
			}
		})
	}
}

// A pod with many extended resources lands on the one type offering them all, and
// a DaemonSet with as many is counted on that type's nodes: positions past the
// inline table are added, compared and reported like the first ones.
func TestManyResourcesArePacked(t *testing.T) {
	devices := smallType("devices", "4", "16Gi", 0.5, manyResources(24, "2"))
	fewer := smallType("fewer", "4", "16Gi", 0.3, manyResources(22, "2"))
	agent := daemonSetPod("agent", "100m", "100Mi", withRequests(corev1.ResourceList{"example.com/device-23": resource.MustParse("1")}))
	in := &Input{
		// Each pod takes one of device-23 and the agent another: two pods per node.
		Pods:       pods(4, "many", "1", "1Gi", withRequests(manyResources(24, "1"))),
		DaemonSets: []*corev1.Pod{agent},
		NodePools:  []*NodePool{pool(makeNodePool("default"), []*InstanceType{fewer, devices})},
	}
	plan := solve(t, in)
	if len(plan.Unschedulable) != 0 {
		t.Fatalf("unschedulable: %s", failureList(plan))
	}
	if len(plan.NewNodes) != 4 {
		t.Fatalf("%d new nodes, want 4 (one pod each: device-23 is 2 per node and the agent takes one)", len(plan.NewNodes))
	}
	for _, n := range plan.NewNodes {
		if n.InstanceType.Name != "devices" {
			t.Errorf("node %s is %s; only devices offers device-22 and device-23", n.Name, n.InstanceType.Name)
		}
		if got := n.Requests["example.com/device-23"]; got.Cmp(resource.MustParse("2")) != 0 {
			t.Errorf("node %s requests %s device-23, want 2 (a pod and the agent)", n.Name, got.String())
		}
	}
}

// The vector arithmetic saturates instead of wrapping around, and values that
// share their overflow part do not see each other's changes.
func TestResourcesArithmetic(t *testing.T) {
	idx := NewResourceIndex()
	big := idx.Vector(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1e16"), corev1.ResourceMemory: resource.MustParse("1e100"),
		"example.com/x": resource.MustParse("9223372036854775808")})
	for i := range idx.Len() {
		if v := big.At(i); v != 0 && v != MaxQuantity {
			t.Errorf("%s reads %d, want it saturated at %d", idx.Name(i), v, int64(MaxQuantity))
		}
	}
	if got := big.At(ResourceCPU); got != MaxQuantity {
		t.Errorf("cpu 1e16 reads %d millicores, want %d", got, int64(MaxQuantity))
	}
	if sum := big.Add(big, idx.Len()); sum.At(ResourceCPU) != MaxQuantity {
		t.Errorf("saturated + saturated = %d, want %d", sum.At(ResourceCPU), int64(MaxQuantity))
	}
	neg := idx.Vector(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("-1e100")})
	if d := neg.Sub(big, idx.Len()); d.At(ResourceCPU) != -MaxQuantity {
		t.Errorf("-saturated - saturated = %d, want %d", d.At(ResourceCPU), -int64(MaxQuantity))
	}

	list := manyResources(40, "3")
	a := idx.Vector(list)
	b := a // shares the overflow part
	last := idx.Len() - 1
	c := b.Add(a, idx.Len())
	b.Set(last, 7)
	if a.At(last) != 3 || c.At(last) != 6 || b.At(last) != 7 {
		t.Errorf("after c = b+a and b[last] = 7: a=%d b=%d c=%d, want 3 7 6", a.At(last), b.At(last), c.At(last))
	}
	room := a.Add(a, idx.Len()) // 6 of each
	if r := Fits(&a, &a, &room, idx.Len()); r != -1 {
		t.Errorf("3+3 within 6 fails at %s", idx.Name(r))
	}
	over := a.Add(a, idx.Len())
	over.Set(last, 5)
	if r := Fits(&a, &a, &over, idx.Len()); r != last {
		t.Errorf("3+3 within 5 at position %d: Fits says %d", last, r)
	}
	if !(&Resources{}).IsZero() || a.IsZero() {
		t.Error("IsZero is wrong")
	}
	if got := idx.List(c)[corev1.ResourceName("example.com/device-39")]; got.Cmp(resource.MustParse("6")) != 0 {
		t.Errorf("List gives device-39=%s, want 6", got.String())
	}
}
