package operator

import (
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Per-node gauges carry managed and the AWS provider's well-known labels; claims,
// NodePools, Nodes, EC2NodeClasses and CapacityBuffers get the operator_*
// status-condition gauges.
func TestNodeLabelsAndStatusConditions(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	ready := metav1.NewTime(now.Add(-time.Minute))
	tailors := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{v1.NodePoolLabelKey: "default",
		"karpenter.k8s.aws/instance-family": "m5", "topology.k8s.aws/zone-id": "use1-az1"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: ready}}}}
	other := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	deleting := metav1.NewTime(now.Add(-30 * time.Second))
	tailors.Labels[v1.NodeInitializedLabelKey] = "true"
	claim := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-x", DeletionTimestamp: &deleting, Labels: map[string]string{v1.NodePoolLabelKey: "default"}},
		Spec:   v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "al2023"}},
		Status: v1.NodeClaimStatus{Conditions: []metav1.Condition{{Type: "Drifted", Status: metav1.ConditionTrue, Reason: "NodePoolDrifted", LastTransitionTime: ready}}}}
	pool := v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Status: v1.NodePoolStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: ready}}}}
	class := awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "al2023", DeletionTimestamp: &deleting},
		Status: awsv1.EC2NodeClassStatus{Conditions: []metav1.Condition{{Type: "SubnetsReady", Status: metav1.ConditionFalse, Reason: "SubnetsNotFound", LastTransitionTime: ready}}}}
	buffer := cb.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "room", Namespace: "web", DeletionTimestamp: &deleting},
		Status: cb.CapacityBufferStatus{Conditions: []metav1.Condition{{Type: cb.ConditionReadyForProvisioning, Status: metav1.ConditionFalse, Reason: "PodTemplateNotFound", LastTransitionTime: ready}}}}
	out := clusterMetrics(clusterView{Now: now, Listed: true, Nodes: []corev1.Node{tailors, other}, Claims: []v1.NodeClaim{claim},
		NodePools: []v1.NodePool{pool}, EC2NodeClasses: []awsv1.EC2NodeClass{class}, CapacityBuffers: []cb.CapacityBuffer{buffer}})
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
		// Karpenter v1.14's operatorpkg: namespace, name, type, status, reason and
		// the object labels; no group (that is the kind-less families').
		{"operator_node_status_condition_count", "name=a,type=Ready,status=True,reason=KubeletReady,karpenter_sh_nodepool=default,karpenter_sh_initialized=true,", 1},
		{"operator_node_status_condition_current_status_seconds", "name=a,type=Ready,status=True,reason=KubeletReady,karpenter_sh_nodepool=default,karpenter_sh_initialized=true,", 60},
		{"operator_nodeclaim_status_condition_count", "name=default-x,type=Drifted,status=True,reason=NodePoolDrifted,karpenter_k8s_aws_ec2nodeclass=al2023,karpenter_sh_nodepool=default,", 1},
		{"operator_nodeclaim_termination_current_time_seconds", "name=default-x,karpenter_k8s_aws_ec2nodeclass=al2023,karpenter_sh_nodepool=default,", 30},
		{"operator_nodepool_status_condition_count", "name=default,type=Ready,status=True,reason=Ready,", 1},
		{"operator_ec2nodeclass_status_condition_count", "name=al2023,type=SubnetsReady,status=False,reason=SubnetsNotFound,", 1},
		{"operator_ec2nodeclass_status_condition_current_status_seconds", "name=al2023,type=SubnetsReady,status=False,reason=SubnetsNotFound,", 60},
		{"operator_ec2nodeclass_termination_current_time_seconds", "name=al2023,", 30},
		// The deprecated kind-less families, for the kinds Karpenter emits them for.
		{"operator_status_condition_count", "name=default-x,type=Drifted,status=True,reason=NodePoolDrifted,group=karpenter.sh,kind=NodeClaim,", 1},
		{"operator_status_condition_current_status_seconds", "name=default,type=Ready,status=True,reason=Ready,group=karpenter.sh,kind=NodePool,", 60},
		{"operator_status_condition_count", "name=al2023,type=SubnetsReady,status=False,reason=SubnetsNotFound,group=karpenter.k8s.aws,kind=EC2NodeClass,", 1},
		{"operator_termination_current_time_seconds", "name=default-x,group=karpenter.sh,kind=NodeClaim,", 30},
		{"operator_termination_current_time_seconds", "name=al2023,group=karpenter.k8s.aws,kind=EC2NodeClass,", 30},
		// CapacityBuffers (Karpenter's CapacityBuffer gate): namespaced, no object
		// labels, and in the kind-less families.
		{"operator_capacitybuffer_status_condition_count", "namespace=web,name=room,type=ReadyForProvisioning,status=False,reason=PodTemplateNotFound,", 1},
		{"operator_capacitybuffer_status_condition_current_status_seconds", "namespace=web,name=room,type=ReadyForProvisioning,status=False,reason=PodTemplateNotFound,", 60},
		{"operator_capacitybuffer_termination_current_time_seconds", "namespace=web,name=room,", 30},
		{"operator_status_condition_count", "namespace=web,name=room,type=ReadyForProvisioning,status=False,reason=PodTemplateNotFound,group=autoscaling.x-k8s.io,kind=CapacityBuffer,", 1},
		{"operator_status_condition_current_status_seconds", "namespace=web,name=room,type=ReadyForProvisioning,status=False,reason=PodTemplateNotFound,group=autoscaling.x-k8s.io,kind=CapacityBuffer,", 60},
		{"operator_termination_current_time_seconds", "namespace=web,name=room,group=autoscaling.x-k8s.io,kind=CapacityBuffer,", 30},
	} {
		got, ok := series[want.family][want.labels]
		if !ok || got != want.value {
			t.Errorf("%s{%s} = %v (present %v), want %v; have %v", want.family, want.labels, got, ok, want.value, series[want.family])
		}
	}
	// Nodes are not in the kind-less families: Karpenter makes their controller
	// without the deprecated metrics.
	for key := range series["operator_status_condition_count"] {
		if strings.Contains(key, "kind=Node,") {
			t.Errorf("operator_status_condition_count{%s}: Karpenter reports no kind-less series for Nodes", key)
		}
	}
}

// tailor_cluster_cost_per_hour splits each NodePool's hourly cost: its claims'
// offering prices, and per launched claim the NodePool's per-node costs.
func TestCostPerHourByComponent(t *testing.T) {
	labels := map[string]string{v1.NodePoolLabelKey: "default", v1.LabelInstanceType: "m5.large",
		v1.LabelZone: "zone-a", v1.CapacityTypeLabelKey: v1.CapacityTypeSpot}
	launched := func(name string) v1.NodeClaim {
		return v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: v1.NodeClaimStatus{ProviderID: "sim:///" + name}}
	}
	pending := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{v1.NodePoolLabelKey: "default"}}}
	types := []*scheduling.InstanceType{{Name: "m5.large", Offerings: []scheduling.Offering{{Zone: "zone-a", CapacityType: v1.CapacityTypeSpot, Price: 0.04}}}}
	out := clusterMetrics(clusterView{Now: time.Now(), Listed: true,
		NodePools: []v1.NodePool{{ObjectMeta: metav1.ObjectMeta{Name: "default"}}},
		Claims:    []v1.NodeClaim{launched("a"), launched("b"), pending},
		Types:     map[string][]*scheduling.InstanceType{"default": types},
		NodeCosts: map[string]scheduling.NodeCost{"default": {Volumes: 0.002, Addresses: 0.005, PerNode: 0.01}}})
	got := map[string]float64{}
	for _, s := range out {
		switch s.family.name {
		case "tailor_cluster_cost_per_hour":
			got[s.labels[0]+"/"+s.labels[1]] = s.value
		case "tailor_cluster_price_per_hour":
			got["price"] = s.value
		case "karpenter_nodepools_cost_total":
			got["cost_total/"+s.labels[0]] = s.value
		}
	}
	// karpenter_nodepools_cost_total is Karpenter's cost tracker's sum: the
	// offering prices of the NodePool's claims, nothing per node.
	want := map[string]float64{"default/instances": 0.08, "default/volumes": 0.004, "default/addresses": 0.01, "default/per_node": 0.02, "price": 0.08,
		"cost_total/default": 0.08}
	for k, w := range want {
		if g, ok := got[k]; !ok || math.Abs(g-w) > 1e-9 {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
}
