package operator

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	cpmetrics "github.com/nodetailor/tailor/pkg/cloudprovider/metrics"
)

// node and withResourceType are the label sets of Karpenter's per-node gauges:
// Karpenter v1.14's own well-known labels, those its AWS provider adds, the node's
// name and phase, and managed.
var (
	node = []string{"arch", "capacity_reservation_id", "capacity_reservation_type", "capacity_type",
		"instance_accelerator_count", "instance_accelerator_manufacturer", "instance_accelerator_name", "instance_capability_flex",
		"instance_category", "instance_cpu", "instance_cpu_manufacturer", "instance_cpu_sustained_clock_speed_mhz",
		"instance_ebs_bandwidth", "instance_encryption_in_transit_supported", "instance_family", "instance_generation",
		"instance_gpu_count", "instance_gpu_manufacturer", "instance_gpu_memory", "instance_gpu_name", "instance_hypervisor",
		"instance_local_nvme", "instance_memory", "instance_network_bandwidth", "instance_size", "instance_type",
		"managed", "node_name", "nodepool", "os", "phase", "region", "windows_build", "zone", "zone_id"}
	withResourceType = append(slices.Clone(node), "resource_type")
)

// karpenterMetrics are the families Tailor exports under Karpenter v1's names, with
// the label names Karpenter gives them (docs/metrics.md). A Karpenter dashboard
// depends on both, so a rename here is a breaking change for users.
var karpenterMetrics = map[string][]string{
	"karpenter_build_info": {"version", "goversion", "goarch", "commit"},

	"karpenter_scheduler_scheduling_duration_seconds":          {"controller"},
	"karpenter_scheduler_queue_depth":                          {"controller", "scheduling_id"},
	"karpenter_scheduler_unfinished_work_seconds":              {"controller", "scheduling_id"},
	"karpenter_scheduler_unschedulable_pods_count":             {"controller"},
	"karpenter_scheduler_pending_pods_by_effective_zone_count": {"controller", "zone"},

	"karpenter_nodeclaims_created_total":                         {"reason", "nodepool", "min_values_relaxed"},
	"karpenter_nodeclaims_terminated_total":                      {"nodepool", "capacity_type", "zone"},
	"karpenter_nodeclaims_disrupted_total":                       {"reason", "nodepool", "capacity_type"},
	"karpenter_nodeclaims_termination_duration_seconds":          {"nodepool"},
	"karpenter_nodeclaims_instance_termination_duration_seconds": {"nodepool"},
	"karpenter_nodeclaims_unhealthy_disrupted_total":             {"condition", "nodepool", "capacity_type", "image_id"},

	"karpenter_nodes_created_total":                {"nodepool", "zone"},
	"karpenter_nodes_terminated_total":             {"nodepool", "zone"},
	"karpenter_nodes_termination_duration_seconds": {"nodepool"},
	"karpenter_nodes_lifetime_duration_seconds":    {"nodepool"},
	"karpenter_nodes_drained_total":                {"nodepool"},
	"karpenter_nodes_allocatable":                  withResourceType,
	"karpenter_nodes_total_pod_requests":           withResourceType,
	"karpenter_nodes_total_pod_limits":             withResourceType,
	"karpenter_nodes_total_daemon_requests":        withResourceType,
	"karpenter_nodes_total_daemon_limits":          withResourceType,
	"karpenter_nodes_system_overhead":              withResourceType,
	"karpenter_nodes_current_lifetime_seconds":     node,

	"karpenter_pods_state": {"name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch", "capacity_type",
		"instance_type", "phase", "ready", "managed"},
	"karpenter_pods_startup_duration_seconds": nil,
	"karpenter_pods_bound_duration_seconds":   nil,
	"karpenter_pods_unstarted_time_seconds":   {"name", "namespace"},
	"karpenter_pods_unbound_time_seconds":     {"name", "namespace"},
	"karpenter_pods_eviction_requests_total":  {"code"},
	"karpenter_pods_drained_total":            {"reason"},

	"karpenter_pods_scheduling_decision_duration_seconds":           nil,
	"karpenter_pods_provisioning_startup_duration_seconds":          nil,
	"karpenter_pods_provisioning_bound_duration_seconds":            nil,
	"karpenter_pods_provisioning_unstarted_time_seconds":            {"name", "namespace"},
	"karpenter_pods_provisioning_unbound_time_seconds":              {"name", "namespace"},
	"karpenter_pods_provisioning_scheduling_undecided_time_seconds": {"name", "namespace"},

	"karpenter_nodepools_usage":                   {"nodepool", "resource_type"},
	"karpenter_nodepools_limit":                   {"nodepool", "resource_type"},
	"karpenter_nodepools_allowed_disruptions":     {"nodepool", "reason"},
	"karpenter_nodepools_nodes_consuming_budgets": {"nodepool", "reason"},
	"karpenter_nodepools_cost_total":              {"nodepool"},

	"karpenter_voluntary_disruption_decisions_total":                      {"decision", "reason", "consolidation_type"},
	"karpenter_voluntary_disruption_eligible_nodes":                       {"reason"},
	"karpenter_voluntary_disruption_decision_evaluation_duration_seconds": {"reason", "consolidation_type"},
	"karpenter_voluntary_disruption_queue_failures_total":                 {"decision", "reason", "consolidation_type"},
	"karpenter_voluntary_disruption_decisions_by_nodepool_total":          {"nodepool", "decision", "reason", "consolidation_type"},
	"karpenter_voluntary_disruption_failed_validations_total":             {"consolidation_type"},

	"karpenter_interruption_received_messages_total":        {"message_type"},
	"karpenter_interruption_deleted_messages_total":         nil,
	"karpenter_interruption_message_queue_duration_seconds": nil,

	"karpenter_cluster_state_node_count":            nil,
	"karpenter_cluster_state_synced":                nil,
	"karpenter_cluster_state_unsynced_time_seconds": nil,
	"karpenter_cluster_utilization_percent":         {"resource_type"},

	"karpenter_cloudprovider_duration_seconds":                      {"controller", "method", "provider"},
	"karpenter_cloudprovider_errors_total":                          {"controller", "method", "provider", "error"},
	"karpenter_cloudprovider_instance_type_offering_price_estimate": {"instance_type", "capacity_type", "zone"},
	"karpenter_cloudprovider_instance_type_offering_available":      {"instance_type", "capacity_type", "zone"},
	"karpenter_cloudprovider_instance_type_cpu_cores":               {"instance_type"},
	"karpenter_cloudprovider_instance_type_memory_bytes":            {"instance_type"},
	"karpenter_cloudprovider_instance_launch_failures_total":        {"zone", "zone_id", "capacity_type", "reason"},
	"karpenter_cloudprovider_instance_termination_failures_total":   {"zone", "zone_id"},

	// operatorpkg's status controllers as Karpenter v1.14 makes them: NodeClaims
	// with their EC2NodeClass and NodePool labels, Nodes with those and
	// karpenter.sh/initialized, and the kind-less families of the kinds made with
	// EmitDeprecatedMetrics (NodeClaim, NodePool, EC2NodeClass, CapacityBuffer).
	"operator_nodeclaim_status_condition_count":                  {"namespace", "name", "type", "status", "reason", "karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool"},
	"operator_nodeclaim_status_condition_current_status_seconds": {"namespace", "name", "type", "status", "reason", "karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool"},
	"operator_nodeclaim_termination_current_time_seconds":        {"namespace", "name", "karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool"},
	"operator_nodeclaim_status_condition_transitions_total":      {"type", "status", "reason", "karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool"},
	"operator_nodeclaim_status_condition_transition_seconds":     {"type", "status", "karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool"},
	"operator_nodeclaim_termination_duration_seconds":            {"karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool"},

	"operator_nodepool_status_condition_count":                  {"namespace", "name", "type", "status", "reason"},
	"operator_nodepool_status_condition_current_status_seconds": {"namespace", "name", "type", "status", "reason"},
	"operator_nodepool_termination_current_time_seconds":        {"namespace", "name"},
	"operator_nodepool_status_condition_transitions_total":      {"type", "status", "reason"},
	"operator_nodepool_status_condition_transition_seconds":     {"type", "status"},
	"operator_nodepool_termination_duration_seconds":            nil,

	"operator_node_status_condition_count":                  {"namespace", "name", "type", "status", "reason", "karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool", "karpenter_sh_initialized"},
	"operator_node_status_condition_current_status_seconds": {"namespace", "name", "type", "status", "reason", "karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool", "karpenter_sh_initialized"},
	"operator_node_termination_current_time_seconds":        {"namespace", "name", "karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool", "karpenter_sh_initialized"},
	"operator_node_status_condition_transitions_total":      {"type", "status", "reason", "karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool", "karpenter_sh_initialized"},
	"operator_node_status_condition_transition_seconds":     {"type", "status", "karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool", "karpenter_sh_initialized"},
	"operator_node_termination_duration_seconds":            {"karpenter_k8s_aws_ec2nodeclass", "karpenter_sh_nodepool", "karpenter_sh_initialized"},

	"operator_ec2nodeclass_status_condition_count":                  {"namespace", "name", "type", "status", "reason"},
	"operator_ec2nodeclass_status_condition_current_status_seconds": {"namespace", "name", "type", "status", "reason"},
	"operator_ec2nodeclass_termination_current_time_seconds":        {"namespace", "name"},
	"operator_ec2nodeclass_status_condition_transitions_total":      {"type", "status", "reason"},
	"operator_ec2nodeclass_status_condition_transition_seconds":     {"type", "status"},
	"operator_ec2nodeclass_termination_duration_seconds":            nil,

	// With the CapacityBuffer gate, Karpenter's generic status controller of
	// CapacityBuffers: no object labels, and the kind-less families.
	"operator_capacitybuffer_status_condition_count":                  {"namespace", "name", "type", "status", "reason"},
	"operator_capacitybuffer_status_condition_current_status_seconds": {"namespace", "name", "type", "status", "reason"},
	"operator_capacitybuffer_termination_current_time_seconds":        {"namespace", "name"},
	"operator_capacitybuffer_status_condition_transitions_total":      {"type", "status", "reason"},
	"operator_capacitybuffer_status_condition_transition_seconds":     {"type", "status"},
	"operator_capacitybuffer_termination_duration_seconds":            nil,

	"operator_status_condition_count":                  {"namespace", "name", "type", "status", "reason", "group", "kind"},
	"operator_status_condition_current_status_seconds": {"namespace", "name", "type", "status", "reason", "group", "kind"},
	"operator_termination_current_time_seconds":        {"namespace", "name", "group", "kind"},
	"operator_status_condition_transitions_total":      {"type", "status", "reason", "group", "kind"},
	"operator_status_condition_transition_seconds":     {"type", "status", "group", "kind"},
	"operator_termination_duration_seconds":            {"group", "kind"},
}

// tailorMetrics are Tailor's own families, for what Karpenter has no metric.
var tailorMetrics = map[string][]string{
	"tailor_pods_pending":           nil,
	"tailor_cluster_price_per_hour": nil,
	"tailor_cluster_cost_per_hour":  {"nodepool", "component"},
}

// descPattern reads a Desc's name and variable labels from its String form, which
// ends with the labels (the help text before them may hold anything).
var descPattern = regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*variableLabels: \{([^{}]*)\}\}$`)

// registeredMetrics are the families the controller registers (see Run), by name,
// with their label names.
func registeredMetrics(t *testing.T) map[string][]string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := registerMetrics(reg); err != nil {
		t.Fatal(err)
	}
	cpm, err := cpmetrics.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	collectors := append(metricCollectors(), cpm.Collectors()...)
	collectors = append(collectors, &clusterCollector{})
	ch := make(chan *prometheus.Desc, 256)
	go func() {
		for _, c := range collectors {
			c.Describe(ch)
		}
		close(ch)
	}()
	out := map[string][]string{}
	for d := range ch {
		m := descPattern.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the metric description %s", d)
		}
		var labels []string
		if m[2] != "" {
			labels = strings.Split(m[2], ",")
		}
		if _, dup := out[m[1]]; dup {
			t.Errorf("%s is described twice", m[1])
		}
		out[m[1]] = labels
	}
	return out
}

// Every family Tailor registers is in the list under Karpenter's name and label
// names (karpenter_, or operator_ for its operator library's status-condition
// families; or is one of Tailor's own, prefixed tailor_), and every listed family
// is registered.
func TestMetricNamesAndLabels(t *testing.T) {
	want := maps.Clone(karpenterMetrics)
	maps.Copy(want, tailorMetrics)
	got := registeredMetrics(t)
	for name := range got {
		if !strings.HasPrefix(name, "karpenter_") && !strings.HasPrefix(name, "operator_") && !strings.HasPrefix(name, "tailor_") {
			t.Errorf("%s is neither a Karpenter name (karpenter_, operator_) nor prefixed tailor_", name)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("registered metrics (-want +got):\n%s", diff)
	}
}
