package fidelity

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/nodetailor/tailor/pkg/scheduling"
)

// TestFidelityRegressions replays, shrunk, every disagreement the random search
// has found, so each stays covered whatever the generator draws. want is the
// kube-scheduler's verdict on the node in question, which keeps each case about
// what it was written for.
func TestFidelityRegressions(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	k, err := newKubeFilters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		c    *testCase
		node string
		want bool // the pod fits there
	}{{
		name: "pod-level requests replace the containers' (PodLevelResources)",
		c: regCase(withPod(regPod("team-a", "incoming", nil), func(p *corev1.Pod) {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}}
		}), regNode("node-1", nil)),
		node: "node-1", want: false,
	}, {
		name: "a plain init container's host port holds nothing",
		c: regCase(withPod(regPod("team-b", "incoming", nil), func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.k8s.io/pause:3.10",
				Ports: []corev1.ContainerPort{{ContainerPort: 9090, HostPort: 9090, Protocol: corev1.ProtocolTCP}}}}
		}), regNode("node-2", nil, withPod(regPod("team-b", "bound", nil), func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9090, HostPort: 9090, Protocol: corev1.ProtocolTCP, HostIP: "0.0.0.0"}}
		}))),
		node: "node-2", want: true,
	}, {
		name: "a nil selector (no pod) and an empty one (every pod) are different terms",
		c: regCase(regPod("team-b", "incoming", nil),
			regNode("node-0", nil, withAnti(regPod("team-b", "a", nil), labelArch, nil)),
			regNode("node-1", map[string]string{labelArch: "amd64"}, withAnti(regPod("team-b", "b", nil), labelArch, &metav1.LabelSelector{}))),
		node: "node-1", want: false,
	}, {
		name: "a spread with an empty selector counts no pod",
		c: regCase(withSpread(regPod("team-a", "incoming", nil), labelZone, 1, &metav1.LabelSelector{}),
			regNode("node-0", map[string]string{labelZone: "zone-b"}),
			regNode("node-3", map[string]string{labelZone: "zone-c"}),
			regNode("node-4", map[string]string{labelZone: "zone-b"}, regPod("team-a", "bound", nil))),
		node: "node-0", want: true,
	}, {
		name: "a spread counts only nodes with the keys of all the pod's constraints",
		c: regCase(withSpread(withSpread(regPod("default", "incoming", nil), labelZone, 2, &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"cache"}}}},
			func(c *corev1.TopologySpreadConstraint) { c.MinDomains = ptr.To[int32](3) }), labelArch, 1, &metav1.LabelSelector{}),
			regNode("node-3", map[string]string{labelZone: "zone-b", labelArch: "amd64"}),
			regNode("node-1", map[string]string{labelZone: "zone-b"}, regPod("default", "a", nil), regPod("default", "b", nil))),
		node: "node-3", want: true,
	}, {
		name: "one pod must match all the required affinity terms",
		c: regCase(withAffinity(withAffinity(regPod("default", "incoming", nil), labelZone, &metav1.LabelSelector{}),
			labelZone, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}}),
			regNode("node-0", map[string]string{labelZone: "zone-b"}),
			regNode("node-2", map[string]string{labelZone: "zone-a"}, regPod("default", "bound", map[string]string{"tier": "fe"}))),
		node: "node-0", want: true,
	}, {
		name: "the first pod of a self-affine group still needs the topology key",
		c: regCase(withAffinity(regPod("team-a", "incoming", nil), labelZone, &metav1.LabelSelector{}),
			regNode("node-1", nil)),
		node: "node-1", want: false,
	}, {
		name: "a terminating pod's anti-affinity still holds",
		c: regCase(regPod("default", "incoming", nil),
			regNode("node-1", map[string]string{labelZone: "zone-a"}, terminating(withAnti(regPod("default", "bound", nil), labelZone, &metav1.LabelSelector{})))),
		node: "node-1", want: false,
	}, {
		name: "a terminating pod still repels the pod's anti-affinity",
		c: regCase(withAnti(regPod("team-b", "incoming", nil), labelZone, &metav1.LabelSelector{}),
			regNode("node-2", map[string]string{labelZone: "zone-a"}),
			regNode("node-3", map[string]string{labelZone: "zone-a"}, terminating(regPod("team-b", "bound", nil)))),
		node: "node-2", want: false,
	}, {
		name: "a terminating pod does not count for a spread",
		c: regCase(withSpread(regPod("default", "incoming", map[string]string{"app": "web"}), labelZone, 1, &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}),
			regNode("node-0", map[string]string{labelZone: "zone-a"},
				terminating(regPod("default", "a", map[string]string{"app": "web"})), terminating(regPod("default", "b", map[string]string{"app": "web"}))),
			regNode("node-1", map[string]string{labelZone: "zone-b"})),
		node: "node-0", want: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if err := validate(tc.c); err != nil {
				t.Fatal(err)
			}
			ours, kube, err := verdicts(ctx, k, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if got := kube[tc.node] == ""; got != tc.want {
				t.Fatalf("the kube-scheduler says %q on %s; the case expects fits=%v", kube[tc.node], tc.node, tc.want)
			}
			for _, n := range tc.c.nodes {
				name := n.Node.Name
				if (ours[name] == "") != (kube[name] == "") {
					t.Errorf("node %s: ours %q, the kube-scheduler %q", name, ours[name], kube[name])
				}
			}
		})
	}
}

func regCase(pod *corev1.Pod, nodes ...*scheduling.Node) *testCase {
	pod.Status.Phase = corev1.PodPending
	c := &testCase{pod: pod, nodes: nodes}
	for _, name := range namespaceNames {
		c.namespaces = append(c.namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("ns-" + name),
			Labels: map[string]string{labelNSName: name}}})
	}
	return c
}

// regNode is a roomy node; its hostname label is its name.
func regNode(name string, labels map[string]string, pods ...*corev1.Pod) *scheduling.Node {
	l := map[string]string{labelHostname: name}
	for k, v := range labels {
		l[k] = v
	}
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	for _, p := range pods {
		p.Spec.NodeName = name
		p.UID = types.UID(name + "-" + p.Name)
	}
	return &scheduling.Node{Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Labels: l},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc.DeepCopy()}}, Pods: pods}
}

// regPod is a running pod that requests nothing.
func regPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Labels: labels},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func withPod(p *corev1.Pod, f func(*corev1.Pod)) *corev1.Pod {
	f(p)
	return p
}

func terminating(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = &metav1.Time{Time: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	p.DeletionGracePeriodSeconds = ptr.To[int64](30)
	return p
}

func affinityOf(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

func withAffinity(p *corev1.Pod, key string, sel *metav1.LabelSelector) *corev1.Pod {
	a := affinityOf(p)
	if a.PodAffinity == nil {
		a.PodAffinity = &corev1.PodAffinity{}
	}
	a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
		corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: sel})
	return p
}

func withAnti(p *corev1.Pod, key string, sel *metav1.LabelSelector) *corev1.Pod {
	a := affinityOf(p)
	if a.PodAntiAffinity == nil {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{}
	}
	a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
		corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: sel})
	return p
}

func withSpread(p *corev1.Pod, key string, maxSkew int32, sel *metav1.LabelSelector, opts ...func(*corev1.TopologySpreadConstraint)) *corev1.Pod {
	c := corev1.TopologySpreadConstraint{TopologyKey: key, MaxSkew: maxSkew, WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}
	for _, o := range opts {
		o(&c)
	}
	p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
	return p
}
