package state

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Build is table-tested on objects alone: what the controller and tailor simulate
// each make of the same cluster.
func TestBuild(t *testing.T) {
	deleting := &metav1.Time{}
	// pod is bound to node, or unschedulable without one.
	pod := func(name, node string, opts ...testobj.PodOption) *corev1.Pod {
		base := []testobj.PodOption{testobj.NodeName(node)}
		if node == "" {
			base = append(base, testobj.Unschedulable())
		}
		return testobj.Pod(name, "", "", append(base, opts...)...)
	}
	neverTried := func(p *corev1.Pod) { p.Status.Conditions = nil }
	beingDeleted := func(p *corev1.Pod) { p.DeletionTimestamp, p.Finalizers = deleting, []string{"x"} }
	owned := func(kind string) testobj.PodOption { return testobj.OwnedBy(kind, "o", "u") }
	ready := func(np *v1.NodePool, status metav1.ConditionStatus) *v1.NodePool {
		np.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: status, Reason: "R", ObservedGeneration: np.Generation}}
		return np
	}
	pool := func(name string) *v1.NodePool {
		np := testobj.NodePool(name)
		np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "agent-not-ready", Effect: corev1.TaintEffectNoSchedule}}
		return np
	}
	comingUpTaints := []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: cloudUninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "agent-not-ready", Effect: corev1.TaintEffectNoSchedule}, {Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
	node := func(name, providerID string, labels map[string]string, mutate ...func(*corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: providerID}}
		for _, m := range mutate {
			m(n)
		}
		return n
	}
	withTaints := func(n *corev1.Node) { n.Spec.Taints = slices.Clone(comingUpTaints) }
	managed := map[string]string{v1.NodePoolLabelKey: "default"}
	initialized := map[string]string{v1.NodePoolLabelKey: "default", v1.NodeInitializedLabelKey: "true"}
	claim := func(name, providerID string, initialized bool) *v1.NodeClaim {
		opts := []testobj.NodeClaimOption{testobj.ClaimLabels(v1.NodePoolLabelKey, "default"), testobj.ClaimNode(providerID, "")}
		if initialized {
			opts = append(opts, testobj.ClaimCondition(v1.ConditionTypeInitialized, metav1.ConditionTrue, time.Time{}))
		}
		nc := testobj.NodeClaim(name, opts...)
		nc.Spec.StartupTaints = []corev1.Taint{{Key: "agent-not-ready", Effect: corev1.TaintEffectNoSchedule}}
		return nc
	}

	type want struct {
		pending     []string          // names of the pods planned for
		nodes       map[string]string // name → "up" or "launching"
		taints      map[string]int    // node → taints left
		unavailable map[string]bool   // NodePool → unavailable
	}
	for _, tc := range []struct {
		name    string
		objs    Objects
		offline bool
		want    want
	}{{
		name: "pending pods: the unschedulable ones, not those being deleted, finished, a DaemonSet's or never tried",
		objs: Objects{Pods: []*corev1.Pod{pod("a", ""), pod("deleting", "", beingDeleted), pod("ds", "", owned("DaemonSet")),
			pod("done", "", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), pod("untried", "", neverTried)}},
		want: want{pending: []string{"a"}},
	}, {
		name:    "offline, every unbound pod is pending, but not those being deleted or a DaemonSet's",
		objs:    Objects{Pods: []*corev1.Pod{pod("a", "", neverTried), pod("deleting", "", neverTried, beingDeleted), pod("ds", "", neverTried, owned("DaemonSet"))}},
		offline: true,
		want:    want{pending: []string{"a"}},
	}, {
		name: "NodePools: not Ready or being deleted are not provisioned from",
		objs: Objects{NodePools: []*v1.NodePool{ready(pool("ready"), metav1.ConditionTrue), ready(pool("refused"), metav1.ConditionFalse), pool("new"),
			func() *v1.NodePool {
				np := ready(pool("going"), metav1.ConditionTrue)
				np.DeletionTimestamp = deleting
				return np
			}()}},
		want: want{unavailable: map[string]bool{"ready": false, "refused": true, "new": true}},
	}, {
		name: "NodePools: a static one, Ready or not, online or offline, is not provisioned from",
		objs: Objects{NodePools: []*v1.NodePool{ready(pool("dynamic"), metav1.ConditionTrue),
			func() *v1.NodePool {
				np := ready(pool("static"), metav1.ConditionTrue)
				np.Spec.Replicas = ptr(int64(3))
				return np
			}(),
			func() *v1.NodePool { np := pool("static-new"); np.Spec.Replicas = ptr(int64(0)); return np }()}},
		offline: true,
		want:    want{unavailable: map[string]bool{"dynamic": false, "static": true, "static-new": true}},
	}, {
		name: "offline, a NodePool never reconciled is Ready, one that says it is not is not",
		objs: Objects{NodePools: []*v1.NodePool{ready(pool("refused"), metav1.ConditionFalse), pool("new"),
			func() *v1.NodePool { np := pool("going"); np.DeletionTimestamp = deleting; return np }()}},
		offline: true,
		want:    want{unavailable: map[string]bool{"refused": true, "new": false}},
	}, {
		name: "pods on a node being deleted are planned for again; the node is no destination",
		objs: Objects{Pods: []*corev1.Pod{pod("web", "old"), pod("agent", "old", owned("DaemonSet"))},
			Nodes: []*corev1.Node{node("old", "p://old", managed, func(n *corev1.Node) { n.DeletionTimestamp = deleting })}},
		want: want{pending: []string{"web"}, nodes: map[string]string{}},
	}, {
		name: "a StatefulSet's pod terminating on a node being deleted is planned for (its replacement comes only once it is gone); a ReplicaSet's is not (its replacement is pending already)",
		objs: Objects{Pods: []*corev1.Pod{pod("db-0", "old", owned("StatefulSet"), beingDeleted), pod("web-x", "old", owned("ReplicaSet"), beingDeleted)},
			Nodes: []*corev1.Node{node("old", "p://old", managed, func(n *corev1.Node) { n.DeletionTimestamp = deleting })}},
		want: want{pending: []string{"db-0"}, nodes: map[string]string{}},
	}, {
		name: "offline too",
		objs: Objects{Pods: []*corev1.Pod{pod("web", "old")},
			Nodes: []*corev1.Node{node("old", "", managed, func(n *corev1.Node) { n.DeletionTimestamp = deleting })}},
		offline: true,
		want:    want{pending: []string{"web"}, nodes: map[string]string{}},
	}, {
		name: "a node coming up is seen without its passing taints; an initialized one keeps them",
		objs: Objects{Nodes: []*corev1.Node{node("new", "p://new", managed, withTaints), node("done", "p://done", initialized, withTaints)},
			NodeClaims: []*v1.NodeClaim{claim("new", "p://new", false), claim("done", "p://done", true), claim("launching", "", false)}},
		want: want{nodes: map[string]string{"new": "up", "done": "up", "nodeclaim/launching": "launching"},
			taints: map[string]int{"new": 1, "done": 4}},
	}, {
		name: "offline, a NodePool's node without the initialized label is coming up, as its claim would say",
		objs: Objects{NodePools: []*v1.NodePool{pool("default")},
			Nodes: []*corev1.Node{node("new", "", managed, withTaints), node("done", "", initialized, withTaints), node("other", "", nil, withTaints)}},
		offline: true,
		want: want{nodes: map[string]string{"new": "up", "done": "up", "other": "up"}, taints: map[string]int{"new": 1, "done": 4, "other": 4},
			unavailable: map[string]bool{"default": false}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			snap := Build(&tc.objs, func(*v1.NodePool) ([]*scheduling.InstanceType, error) { return nil, nil }, BuildOptions{Offline: tc.offline})
			var pending []string
			for _, p := range snap.Input.Pods {
				pending = append(pending, p.Name)
				if p.Spec.NodeName != "" {
					t.Errorf("pending pod %s is bound to %s", p.Name, p.Spec.NodeName)
				}
				if p.DeletionTimestamp != nil {
					t.Errorf("pending pod %s is planned as terminating", p.Name)
				}
			}
			if !slices.Equal(pending, tc.want.pending) {
				t.Errorf("pending %v, want %v", pending, tc.want.pending)
			}
			if tc.want.nodes != nil {
				got := map[string]string{}
				for _, n := range snap.Input.Nodes {
					got[n.Node.Name] = map[bool]string{true: "launching", false: "up"}[n.Launching]
				}
				if !mapsEqual(got, tc.want.nodes) {
					t.Errorf("nodes %v, want %v", got, tc.want.nodes)
				}
			}
			for _, n := range snap.Input.Nodes {
				if want, ok := tc.want.taints[n.Node.Name]; ok && len(n.Node.Spec.Taints) != want {
					t.Errorf("node %s: taints %v, want %d", n.Node.Name, n.Node.Spec.Taints, want)
				}
			}
			if tc.want.unavailable != nil {
				got := map[string]bool{}
				for _, p := range snap.Input.NodePools {
					got[p.NodePool.Name] = p.Unavailable != ""
				}
				if !mapsEqual(got, tc.want.unavailable) {
					t.Errorf("NodePools unavailable %v, want %v", got, tc.want.unavailable)
				}
			}
			for _, n := range tc.objs.Nodes {
				if len(n.Spec.Taints) > 0 && len(n.Spec.Taints) != len(comingUpTaints) {
					t.Errorf("input node %s was modified", n.Name)
				}
			}
		})
	}
}

func mapsEqual[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func ptr[T any](v T) *T { return &v }
