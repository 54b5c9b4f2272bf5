package operator

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Per-node gauges carry managed and the AWS provider's well-known labels; claims,
// NodePools and Nodes get the operator_* status-condition gauges.
func TestNodeLabelsAndStatusConditions(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	ready := metav1.NewTime(now.Add(-time.Minute))
	tailors := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{v1.NodePoolLabelKey: "default",
		"karpenter.k8s.aws/instance-family": "m5", "topology.k8s.aws/zone-id": "use1-az1"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: ready}}}}
	other := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	deleting := metav1.NewTime(now.Add(-30 * time.Second))
	claim := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-x", DeletionTimestamp: &deleting},
		Status: v1.NodeClaimStatus{Conditions: []metav1.Condition{{Type: "Drifted", Status: metav1.ConditionTrue, Reason: "NodePoolDrifted", LastTransitionTime: ready}}}}
	out := clusterMetrics(clusterView{Now: now, Listed: true, Nodes: []corev1.Node{tailors, other}, Claims: []v1.NodeClaim{claim}})
	series := map[string]map[string]float64{}
	for _, s := range out {
		key := ""
		for i, l := range s.family.labels {
			if s.labels[i] != "" {
				key += l + "=" + s.labels[i] + ","
			}
		}
		if series[s.family.name] == nil {
			series[s.family.name] = map[string]float64{}
		}
		series[s.family.name][key] = s.value
	}
	for _, want := range []struct {
		family, labels string
		value          float64
	}{
		{"karpenter_nodes_current_lifetime_seconds", "instance_family=m5,managed=true,node_name=a,nodepool=default,zone_id=use1-az1,", now.Sub(time.Time{}).Seconds()},
		{"karpenter_nodes_current_lifetime_seconds", "managed=false,node_name=b,", now.Sub(time.Time{}).Seconds()},
		{"operator_node_status_condition_count", "name=a,type=Ready,status=True,reason=KubeletReady,", 1},
		{"operator_node_status_condition_current_status_seconds", "name=a,type=Ready,status=True,reason=KubeletReady,", 60},
		{"operator_nodeclaim_status_condition_count", "group=karpenter.sh,name=default-x,type=Drifted,status=True,reason=NodePoolDrifted,", 1},
		{"operator_nodeclaim_termination_current_time_seconds", "group=karpenter.sh,name=default-x,", 30},
	} {
		got, ok := series[want.family][want.labels]
		if !ok || got != want.value {
			t.Errorf("%s{%s} = %v (present %v), want %v; have %v", want.family, want.labels, got, ok, want.value, series[want.family])
		}
	}
}
