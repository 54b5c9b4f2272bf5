package console

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/internal/kubescheme"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/inspect"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

func TestLifecycle(t *testing.T) {
	since := time.Now().Add(-time.Hour)
	node := testobj.Node("n", "2", "8Gi")
	tainted := testobj.Node("n", "2", "8Gi", testobj.NodeTaints(v1.DisruptedNoScheduleTaint))
	deleted := metav1.NewTime(since)
	drifted := testobj.NodeClaim("c", testobj.Initialized(since))
	drifted.Status.Conditions = append(drifted.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue,
		Reason: "NodePoolDrifted", Message: "the NodePool's template changed"})
	deleting := testobj.NodeClaim("c", testobj.Initialized(since))
	deleting.DeletionTimestamp = &deleted
	for _, tc := range []struct {
		name   string
		node   *corev1.Node
		claim  *v1.NodeClaim
		state  string
		reason string
	}{
		{"no claim", node, nil, StateUnmanaged, "no NodeClaim: not launched by Tailor"},
		{"not launched", nil, testobj.NodeClaim("c"), StateLaunching, "waiting for the cloud to launch it"},
		{"launched", nil, testobj.NodeClaim("c", testobj.ClaimCondition(v1.ConditionTypeLaunched, metav1.ConditionTrue, since)), StateLaunching,
			"launched; waiting for its node to register"},
		{"registered", node, testobj.NodeClaim("c", testobj.ClaimCondition(v1.ConditionTypeLaunched, metav1.ConditionTrue, since),
			testobj.ClaimCondition(v1.ConditionTypeRegistered, metav1.ConditionTrue, since)), StateRegistered, "waiting to be initialized (ready, startup taints gone)"},
		{"initialized", node, testobj.NodeClaim("c", testobj.Initialized(since)), StateInitialized, ""},
		{"drifted", node, drifted, StateDrifted, "the NodePool's template changed"},
		{"disrupted", tainted, drifted, StateDraining, "tainted karpenter.sh/disrupted: Tailor is disrupting it"},
		{"deleted", node, deleting, StateDraining, "its NodeClaim is being deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, reason, _ := lifecycle(tc.node, tc.claim)
			if state != tc.state || reason != tc.reason {
				t.Errorf("%s (%q), want %s (%q)", state, reason, tc.state, tc.reason)
			}
		})
	}
}

func TestDecisions(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(time.Unix(1_800_000_000+int64(s), 0)) }
	events := []*corev1.Event{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Reason: "Launched", Source: corev1.EventSource{Component: EventSource}, LastTimestamp: at(1),
			InvolvedObject: corev1.ObjectReference{Kind: "NodeClaim", Name: "c1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Reason: "DisruptionTerminating", ReportingController: EventSource, EventTime: metav1.NewMicroTime(at(3).Time),
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Reason: "Scheduled", Source: corev1.EventSource{Component: "default-scheduler"}, LastTimestamp: at(2),
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "x", Name: "p"}},
	}
	got := decisions(events)
	if len(got) != 2 || got[0].Reason != "DisruptionTerminating" || got[0].Category != "disruption" || got[1].Category != "launch" {
		t.Errorf("%+v", got)
	}
	if last := latestPodEvents(events)["x/p"]; last.Reason != "Scheduled" || last.From != "default-scheduler" {
		t.Errorf("latest pod event %+v", last)
	}
}

// cluster is n nodes of one NodePool with podsPerNode pods each, and a tenth of n
// pods pending, read from an in-memory client.
func cluster(tb testing.TB, n, podsPerNode int) client.Client {
	tb.Helper()
	since := time.Now().Add(-time.Hour)
	ref := testobj.SimClass("default")
	objs := []client.Object{testobj.NodePool("default", testobj.NodeClassRef(ref)), &v1alpha1.SimNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}}
	for i := range n {
		name := fmt.Sprintf("node-%05d", i)
		captype := v1.CapacityTypeOnDemand
		if i%3 == 0 {
			captype = v1.CapacityTypeSpot
		}
		objs = append(objs,
			testobj.Node(name, "8", "32Gi", testobj.NodeLabels(v1.NodePoolLabelKey, "default", v1.LabelInstanceType, "m5.2xlarge",
				v1.LabelZone, "us-east-1a", v1.CapacityTypeLabelKey, captype), testobj.ProviderID("sim://"+name), testobj.NodeReady(corev1.ConditionTrue, since)),
			testobj.NodeClaim("claim-"+name, testobj.ClaimLabels(v1.NodePoolLabelKey, "default"), testobj.ClaimNodeClassRef(ref),
				testobj.ClaimNode("sim://"+name, name), testobj.Initialized(since)))
		for j := range podsPerNode {
			objs = append(objs, testobj.Pod(fmt.Sprintf("p-%05d-%02d", i, j), "500m", "1Gi", testobj.Namespace(fmt.Sprintf("team-%d", i%20)),
				testobj.NodeName(name), testobj.Phase(corev1.PodRunning)))
		}
	}
	for i := range n / 10 {
		objs = append(objs, testobj.Pod(fmt.Sprintf("pending-%05d", i), "1", "2Gi", testobj.Unschedulable()))
	}
	scheme, err := kubescheme.New()
	if err != nil {
		tb.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

// The model of a small cluster: every node priced from its SimNodeClass's
// catalog, its room summed, the cost lines and idle
// adding up to the total, and every pending pod explained.
func TestBuild(t *testing.T) {
	kube := cluster(t, 30, 10)
	c, err := inspect.Read(t.Context(), kube, inspect.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := Build(c, nil, scheduling.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Nodes) != 30 || m.Totals.Nodes != 30 || m.Totals.SpotNodes != 10 || m.Totals.PendingPods != 3 || len(m.Pending) != 3 {
		t.Fatalf("%d nodes, totals %+v, pending %d", len(m.Nodes), m.Totals, len(m.Pending))
	}
	if n := m.Nodes[0]; n.CPURequested != 5 || n.CPUAllocatable != 8 || n.MemRequested != 10 || n.Pods != 10 || n.Unpriced != "" || n.PerHour <= 0 {
		t.Errorf("node %+v", n)
	}
	sum := m.Cost.Idle.PerHour
	for _, l := range m.Cost.ByNamespace {
		sum += l.PerHour
	}
	if d := sum - m.Totals.PerHour; d > 1e-4 || d < -1e-4 {
		t.Errorf("by namespace and idle add up to $%.6f, the total is $%.6f", sum, m.Totals.PerHour)
	}
	for _, p := range m.Pending {
		if p.Plan == "" {
			t.Errorf("pending %+v has no plan", p)
		}
	}
}

// BenchmarkBuild measures what the console does on each change at 5,000 nodes
// and 50,000 pods: Source.Read (inspect.Read over the informers' caches, here
// objects held in memory and copied out as controller-runtime's cache reader
// copies them) and Build.
func BenchmarkBuild(b *testing.B) {
	src := cacheOf(b, cluster(b, 5000, 10))
	b.ResetTimer()
	for b.Loop() {
		c, events, err := src.Read(b.Context(), inspect.Options{Now: time.Now()})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Build(c, events, scheduling.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
