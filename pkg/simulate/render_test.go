package simulate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The table puts the new nodes of one NodePool and instance type on one line, with
// their zones and capacity types (alone when shared, else counted), their price
// together and their pods by workload; pods on existing nodes by node and
// workload; and the pods that fit nowhere by workload and reason.
func TestTableGroupsNodesAndPods(t *testing.T) {
	node := func(name, pool, typ, zone, captype string, price float64, pods ...string) NodeView {
		return NodeView{Name: name, NodePool: pool, InstanceType: typ, Zone: zone, CapacityType: captype, PricePerHour: price, Pods: pods}
	}
	rep := &Report{
		Summary: Summary{Pods: 14, Scheduled: 11, Unschedulable: 3, Nodes: 5, CostPerHour: 0.5, SolveSeconds: 0.0123},
		NewNodes: []NodeView{
			node("planned-1", "default", "c6a.xlarge", "us-east-1a", "spot", 0.06, "default/web-0", "default/web-1", "default/db-0"),
			node("planned-2", "default", "c6a.xlarge", "us-east-1b", "spot", 0.07, "default/web-2", "default/web-3"),
			node("planned-3", "gpu", "g4ad.xlarge", "us-east-1a", "on-demand", 0.3785, "ml/train-0"),
			node("planned-4", "default", "c6a.xlarge", "us-east-1a", "on-demand", 0.153, "default/web-4"),
			node("planned-5", "default", "c6a.large", "us-east-1c", "spot", 0.03, "default/db-1"),
		},
		Bindings:      []BindingView{{Pod: "default/batch-0", Node: "node-b"}, {Pod: "default/batch-1", Node: "node-a"}, {Pod: "default/batch-2", Node: "node-a"}},
		Unschedulable: []FailureView{{Pod: "default/huge-0", Reason: "no room"}, {Pod: "default/huge-1", Reason: "no room"}, {Pod: "default/odd", Reason: "other"}},
		LowerBound:    0.25,
		workloads: map[string]string{"default/web-0": "web", "default/web-1": "web", "default/web-2": "web", "default/web-3": "web", "default/web-4": "web",
			"default/db-0": "db", "default/db-1": "db", "ml/train-0": "ml/train", "default/batch-0": "batch", "default/batch-1": "batch", "default/batch-2": "batch",
			"default/huge-0": "huge", "default/huge-1": "huge", "default/odd": "odd"},
	}
	var out strings.Builder
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	want := `NEW NODES      NODEPOOL  ZONE                       CAPACITY            $/HOUR  PODS
c6a.xlarge ×3  default   us-east-1a ×2, us-east-1b  on-demand, spot ×2  0.2830  web ×5, db
g4ad.xlarge    gpu       us-east-1a                 on-demand           0.3785  ml/train
c6a.large      default   us-east-1c                 spot                0.0300  db

EXISTING NODE  PODS
node-a         batch ×2
node-b         batch

14 pods: 11 scheduled (3 on existing nodes), 3 unschedulable.
5 new nodes (3 spot, 2 on-demand) at $0.5000/hour; lower bound $0.2500/hour (no plan for these pods costs less). Solved in 0.012s.

UNSCHEDULABLE
huge ×2: no room
default/odd: other
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
}

// A node with pods of many workloads names the largest few and sums up the rest.
func TestTableSumsUpManyWorkloads(t *testing.T) {
	var pods []string
	workloads := map[string]string{}
	for w := range 8 {
		for i := range 8 - w {
			pod := fmt.Sprintf("default/w%d-%d", w, i)
			pods = append(pods, pod)
			workloads[pod] = fmt.Sprintf("w%d", w)
		}
	}
	rep := &Report{Summary: Summary{Pods: len(pods), Scheduled: len(pods), Nodes: 1},
		NewNodes:  []NodeView{{Name: "planned-1", NodePool: "default", InstanceType: "m5.24xlarge", Zone: "us-east-1a", CapacityType: "spot", Pods: pods}},
		workloads: workloads}
	var out strings.Builder
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if want := "w0 ×8, w1 ×7, w2 ×6, w3 ×5, w4 ×4, w5 ×3 and 3 more pods of 2 other workloads\n"; !strings.Contains(out.String(), want) {
		t.Errorf("table does not say %q:\n%s", want, out.String())
	}
}

// Pods a workload of the input made are named for it; pods listed from a cluster
// for their Deployment (through the ReplicaSet, less its pod-template-hash), their
// other controller or their generateName; bare pods for themselves.
func TestWorkloadOf(t *testing.T) {
	controller := func(kind, name string) []metav1.OwnerReference {
		yes := true
		return []metav1.OwnerReference{{Kind: kind, Name: name, Controller: &yes}}
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "inflate-3", Namespace: "default"}}, "inflate"},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-5d8f7c-x2x9z", Namespace: "default", Labels: map[string]string{"pod-template-hash": "5d8f7c"},
			OwnerReferences: controller("ReplicaSet", "web-5d8f7c")}}, "web"},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "team", OwnerReferences: controller("StatefulSet", "db")}}, "team/db"},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job-abcde", Namespace: "default", GenerateName: "job-"}}, "job"},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "huge", Namespace: "default"}}, "huge"},
	} {
		if got := workloadOf(tc.pod, map[string]string{"default/inflate-3": "inflate"}); got != tc.want {
			t.Errorf("%s/%s: %q, want %q", tc.pod.Namespace, tc.pod.Name, got, tc.want)
		}
	}
}
