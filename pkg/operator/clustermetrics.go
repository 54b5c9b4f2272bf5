package operator

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/metrics"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// family is a gauge family the cluster collector reports.
type family struct {
	name, help string
	labels     []string
	desc       *prometheus.Desc
}

func gauge(name, help string, labels ...string) *family {
	return &family{name: name, help: help, labels: labels, desc: prometheus.NewDesc(name, help, labels, nil)}
}

// nodeLabels are the labels of Karpenter's per-node gauges: the well-known node
// labels (their names after the last '/', snake case), Karpenter's and those its
// AWS provider adds (always there, empty on other clouds: Prometheus drops an
// empty label), the node's name and phase, and whether Tailor manages the node.
var nodeLabels, nodeLabelKeys = nodeLabelSet()

// Not labels of the node: its name, phase and whether it is managed.
const (
	nodeNameLabel = "node_name"
	phaseLabel    = "phase"
	managedLabel  = "managed"
)

func nodeLabelSet() (names, keys []string) {
	const aws = "karpenter.k8s.aws/"
	wellKnown := []string{v1.LabelArch, v1.CapacityTypeLabelKey, v1.LabelInstanceType, v1.NodePoolLabelKey, v1.LabelOS,
		v1.LabelRegion, corev1.LabelWindowsBuild, v1.LabelZone, "topology.k8s.aws/zone-id",
		aws + "capacity-reservation-id", aws + "capacity-reservation-type", aws + "instance-hypervisor",
		aws + "instance-encryption-in-transit-supported", aws + "instance-category", aws + "instance-capability-flex",
		aws + "instance-family", aws + "instance-generation", aws + "instance-size", aws + "instance-local-nvme",
		aws + "instance-cpu", aws + "instance-cpu-manufacturer", aws + "instance-cpu-sustained-clock-speed-mhz",
		aws + "instance-memory", aws + "instance-ebs-bandwidth", aws + "instance-network-bandwidth",
		aws + "instance-gpu-name", aws + "instance-gpu-manufacturer", aws + "instance-gpu-count", aws + "instance-gpu-memory",
		aws + "instance-accelerator-name", aws + "instance-accelerator-manufacturer", aws + "instance-accelerator-count"}
	byName := map[string]string{nodeNameLabel: "", phaseLabel: "", managedLabel: ""}
	for _, key := range wellKnown {
		name := key[strings.LastIndex(key, "/")+1:]
		byName[strings.ReplaceAll(strings.ToLower(name), "-", "_")] = key
	}
	names = slices.Sorted(maps.Keys(byName))
	for _, n := range names {
		keys = append(keys, byName[n])
	}
	return names, keys
}

var withResource = append(slices.Clone(nodeLabels), "resource_type")

// The collector's families, under Karpenter's names and labels; tailor_ ones are
// Tailor's own.
var (
	famPending = gauge("tailor_pods_pending", "Pods the kube-scheduler could not place and Tailor provisions for.")
	famPrice   = gauge("tailor_cluster_price_per_hour", "Hourly price of the nodes Tailor launched, at their offerings' prices.")
	famCost    = gauge("tailor_cluster_cost_per_hour", "Hourly cost of the nodes Tailor launched, by NodePool and what is paid for: instances (their offerings' prices), volumes, addresses and per_node (the NodeClass's and the operator's per-node costs).", "nodepool", "component")
	// Karpenter's cost tracker sums the offering prices of each NodePool's
	// NodeClaims: the instances component of famCost.
	famPoolCost = gauge("karpenter_nodepools_cost_total", "Total cost of the nodepool from Karpenter's perspective: the hourly offering prices of its NodeClaims. Not an authoritative source for billing.", "nodepool")
	famUsage    = gauge("karpenter_nodepools_usage", "The amount of resources provisioned for a NodePool, by NodePool and resource type.", "nodepool", "resource_type")
	famLimit    = gauge("karpenter_nodepools_limit", "A NodePool's limits, by NodePool and resource type.", "nodepool", "resource_type")
	famAlloc    = gauge("karpenter_nodes_allocatable", "Node allocatable are the resources allocatable by nodes.", withResource...)
	famPodReq   = gauge("karpenter_nodes_total_pod_requests", "Node total pod requests are the resources requested by pods bound to nodes, including the DaemonSet pods.", withResource...)
	famPodLim   = gauge("karpenter_nodes_total_pod_limits", "Node total pod limits are the resources specified by pod limits, including the DaemonSet pods.", withResource...)
	famDSReq    = gauge("karpenter_nodes_total_daemon_requests", "Node total daemon requests are the resources requested by DaemonSet pods bound to nodes.", withResource...)
	famDSLim    = gauge("karpenter_nodes_total_daemon_limits", "Node total daemon limits are the resources specified by DaemonSet pod limits.", withResource...)
	famOverhead = gauge("karpenter_nodes_system_overhead", "Node system daemon overhead: the difference between the node's capacity and allocatable.", withResource...)
	famLifetime = gauge("karpenter_nodes_current_lifetime_seconds", "Node age in seconds.", nodeLabels...)
	famUtil     = gauge("karpenter_cluster_utilization_percent", "Utilization of allocatable resources by pod requests, by resource type.", "resource_type")
	famPodState = gauge("karpenter_pods_state", "Pod state: 1 for each pod, labeled by name, namespace, owner, node, whether scheduled, NodePool, zone, architecture, capacity type, instance type, phase, readiness and whether its node is Karpenter-managed.",
		"name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch", "capacity_type", "instance_type", "phase", "ready", "managed")
	famNodeCount = gauge("karpenter_cluster_state_node_count", "Current count of nodes in cluster state.")
	famSynced    = gauge("karpenter_cluster_state_synced", "1 if cluster state is synced (the informers hold their initial lists) and 0 otherwise.")
	famUnsynced  = gauge("karpenter_cluster_state_unsynced_time_seconds", "The time for which cluster state has not been synced.")
	famPrice1    = gauge("karpenter_cloudprovider_instance_type_offering_price_estimate", "Instance type offering estimated hourly price, by instance type, capacity type and zone.", "instance_type", "capacity_type", "zone")
	famAvail     = gauge("karpenter_cloudprovider_instance_type_offering_available", "Instance type offering availability (1 or 0), by instance type, capacity type and zone.", "instance_type", "capacity_type", "zone")
	famCPU       = gauge("karpenter_cloudprovider_instance_type_cpu_cores", "VCPU cores for a given instance type.", "instance_type")
	famMemory    = gauge("karpenter_cloudprovider_instance_type_memory_bytes", "Memory, in bytes, for a given instance type.", "instance_type")
)

// statusGauges are one kind's status-condition gauges as Karpenter's operator
// library makes them (operatorpkg's status.Controller), one series per object and
// condition, from the informer cache at each scrape: per kind, labeled namespace,
// name, type, status and reason and then the object labels Karpenter adds; for a
// kind whose controller Karpenter makes with EmitDeprecatedMetrics, the kind-less
// families too, labeled by group and kind instead of the object labels.
type statusGauges struct {
	count, age, term *family
	labels           []string // the object labels' keys
	group, kind      string
	kindless         bool
}

func newStatusGauges(kind string, labels ...string) *statusGauges {
	names := statusLabelNames(labels)
	cond := append([]string{"namespace", "name", "type", "status", "reason"}, names...)
	return &statusGauges{labels: labels,
		count: gauge("operator_"+kind+"_status_condition_count", "The number of a condition for a given object, type and status.", cond...),
		age:   gauge("operator_"+kind+"_status_condition_current_status_seconds", "The current amount of time in seconds that a status condition has been in a specific state.", cond...),
		term:  gauge("operator_"+kind+"_termination_current_time_seconds", "The current amount of time in seconds that an object has been in terminating state.", append([]string{"namespace", "name"}, names...)...)}
}

func (g *statusGauges) alsoKindless(group, kind string) *statusGauges {
	g.group, g.kind, g.kindless = group, kind, true
	return g
}

func (g *statusGauges) families() []*family { return []*family{g.count, g.age, g.term} }

// The status-condition gauges of Karpenter v1.14 (see the transitions' families):
// NodePools, NodeClaims, EC2NodeClasses and CapacityBuffers with the kind-less
// families, Nodes without.
var (
	famKindlessCount = gauge("operator_status_condition_count", "The number of a condition for a given object, type and status.", "namespace", "name", "type", "status", "reason", "group", "kind")
	famKindlessAge   = gauge("operator_status_condition_current_status_seconds", "The current amount of time in seconds that a status condition has been in a specific state.", "namespace", "name", "type", "status", "reason", "group", "kind")
	famKindlessTerm  = gauge("operator_termination_current_time_seconds", "The current amount of time in seconds that an object has been in terminating state.", "namespace", "name", "group", "kind")

	poolStatus      = newStatusGauges("nodepool").alsoKindless(v1.Group, "NodePool")
	claimStatus     = newStatusGauges("nodeclaim", nodeClaimStatusLabels...).alsoKindless(v1.Group, "NodeClaim")
	nodeStatus      = newStatusGauges("node", nodeStatusLabels...)
	nodeClassStatus = newStatusGauges("ec2nodeclass").alsoKindless(awsv1.Group, "EC2NodeClass")
	bufferStatus    = newStatusGauges("capacitybuffer").alsoKindless(cb.Group, "CapacityBuffer")
)

var clusterFamilies = slices.Concat([]*family{famPending, famPrice, famCost, famPoolCost, famUsage, famLimit, famAlloc, famPodReq, famPodLim, famDSReq, famDSLim,
	famOverhead, famLifetime, famUtil, famPodState, famNodeCount, famSynced, famUnsynced, famPrice1, famAvail, famCPU, famMemory,
	famKindlessCount, famKindlessAge, famKindlessTerm},
	poolStatus.families(), claimStatus.families(), nodeStatus.families(), nodeClassStatus.families(), bufferStatus.families())

// podInfo is what the metrics need of a pod.
type podInfo struct {
	Name, Namespace, Owner, Node string
	Phase                        corev1.PodPhase
	Ready, Daemon, Terminal      bool
	Pending                      bool // state.Provisionable
	Requests, Limits             corev1.ResourceList
}

func newPodInfo(pod *corev1.Pod) *podInfo {
	info := &podInfo{Name: pod.Name, Namespace: pod.Namespace, Node: pod.Spec.NodeName, Phase: pod.Status.Phase,
		Daemon: scheduling.IsDaemonSetPod(pod), Terminal: scheduling.IsTerminal(pod), Pending: state.Provisionable(pod)}
	if len(pod.OwnerReferences) > 0 {
		o := pod.OwnerReferences[0]
		info.Owner = fmt.Sprintf("/apis/%s/namespaces/%s/%ss/%s", o.APIVersion, pod.Namespace, strings.ToLower(o.Kind), o.Name)
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			info.Ready = true
		}
	}
	if info.Node != "" && !info.Terminal {
		info.Requests = scheduling.PodRequests(pod)
		delete(info.Requests, corev1.ResourcePods) // Karpenter counts what pods ask for, not their slot
		info.Limits = resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	}
	return info
}

// clusterView is what the collector read for one scrape.
type clusterView struct {
	Now         time.Time
	Synced      bool
	UnsyncedFor time.Duration
	// PodsKnown says Pods and Pending hold the pod informer's full list.
	PodsKnown bool
	Pods      []*podInfo
	Pending   int
	// Listed says NodePools, Claims, Nodes and Types were read.
	Listed    bool
	NodePools []v1.NodePool
	Claims    []v1.NodeClaim
	Nodes     []corev1.Node
	Types     map[string][]*scheduling.InstanceType // by NodePool
	// NodeCosts are each NodePool's per-node costs besides the instance; a pool
	// whose costs could not be read is missing.
	NodeCosts map[string]scheduling.NodeCost
	// EC2NodeClasses, on AWS, for their status-condition gauges.
	EC2NodeClasses []awsv1.EC2NodeClass
	// CapacityBuffers, with the CapacityBuffer gate where the API server serves
	// them, for their status-condition gauges.
	CapacityBuffers []cb.CapacityBuffer
}

// sample is one series of a family.
type sample struct {
	family *family
	value  float64
	labels []string
}

// clusterMetrics computes the collector's series from what it read. It is pure:
// the same view gives the same series, in the same order.
func clusterMetrics(in clusterView) []sample {
	var out []sample
	add := func(f *family, v float64, labels ...string) {
		out = append(out, sample{family: f, value: v, labels: labels})
	}
	add(famSynced, boolValue(in.Synced))
	add(famUnsynced, in.UnsyncedFor.Seconds())
	if in.PodsKnown {
		add(famPending, float64(in.Pending))
	}
	if !in.Listed {
		return out
	}
	nodes := slices.Clone(in.Nodes)
	slices.SortFunc(nodes, func(a, b corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	add(famNodeCount, float64(len(nodes)))

	pools := slices.Clone(in.NodePools)
	slices.SortFunc(pools, func(a, b v1.NodePool) int { return strings.Compare(a.Name, b.Name) })
	price := 0.0
	for i := range pools {
		np := &pools[i]
		for _, name := range sortedNames(np.Status.Resources) {
			add(famUsage, metrics.Value(name, np.Status.Resources[name]), np.Name, metrics.ResourceType(name))
		}
		for _, name := range sortedNames(corev1.ResourceList(np.Spec.Limits)) {
			add(famLimit, metrics.Value(name, np.Spec.Limits[name]), np.Name, metrics.ResourceType(name))
		}
		instances, launched := 0.0, 0
		for _, nc := range in.Claims {
			if nc.Labels[v1.NodePoolLabelKey] == np.Name {
				p, _ := scheduling.OfferingPrice(in.Types[np.Name], nc.Labels)
				instances += p
				if nc.Status.ProviderID != "" {
					launched++
				}
			}
		}
		price += instances
		add(famCost, instances, np.Name, "instances")
		add(famPoolCost, instances, np.Name)
		if cost, ok := in.NodeCosts[np.Name]; ok {
			n := float64(launched)
			add(famCost, n*cost.Volumes, np.Name, "volumes")
			add(famCost, n*cost.Addresses, np.Name, "addresses")
			add(famCost, n*cost.PerNode, np.Name, "per_node")
		}
	}
	add(famPrice, price)

	// Status conditions and termination, per object, as Karpenter's operator library
	// reports them.
	conditions := func(g *statusGauges, o client.Object, conds []metav1.Condition) {
		extra := statusLabelValues(o, g.labels)
		for _, c := range conds {
			labels := []string{o.GetNamespace(), o.GetName(), c.Type, string(c.Status), c.Reason}
			age := in.Now.Sub(c.LastTransitionTime.Time).Seconds()
			add(g.count, 1, append(slices.Clone(labels), extra...)...)
			add(g.age, age, append(slices.Clone(labels), extra...)...)
			if g.kindless {
				add(famKindlessCount, 1, append(slices.Clone(labels), g.group, g.kind)...)
				add(famKindlessAge, age, append(slices.Clone(labels), g.group, g.kind)...)
			}
		}
		if d := o.GetDeletionTimestamp(); d != nil {
			took := in.Now.Sub(d.Time).Seconds()
			add(g.term, took, append([]string{o.GetNamespace(), o.GetName()}, extra...)...)
			if g.kindless {
				add(famKindlessTerm, took, o.GetNamespace(), o.GetName(), g.group, g.kind)
			}
		}
	}
	for i := range pools {
		conditions(poolStatus, &pools[i], pools[i].Status.Conditions)
	}
	claims := slices.Clone(in.Claims)
	slices.SortFunc(claims, func(a, b v1.NodeClaim) int { return strings.Compare(a.Name, b.Name) })
	for i := range claims {
		conditions(claimStatus, &claims[i], claims[i].Status.Conditions)
	}
	for i := range nodes {
		conditions(nodeStatus, &nodes[i], nodeConditionsOf(&nodes[i]))
	}
	classes := slices.Clone(in.EC2NodeClasses)
	slices.SortFunc(classes, func(a, b awsv1.EC2NodeClass) int { return strings.Compare(a.Name, b.Name) })
	for i := range classes {
		conditions(nodeClassStatus, &classes[i], classes[i].Status.Conditions)
	}
	buffers := slices.Clone(in.CapacityBuffers)
	slices.SortFunc(buffers, func(a, b cb.CapacityBuffer) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	for i := range buffers {
		conditions(bufferStatus, &buffers[i], buffers[i].Status.Conditions)
	}

	// Per node: what its pods ask for, and the node's own numbers.
	byNode := make(map[string]*nodeSums, len(nodes))
	for _, n := range nodes {
		byNode[n.Name] = &nodeSums{}
	}
	for _, p := range in.Pods {
		s := byNode[p.Node]
		if s == nil || p.Terminal {
			continue
		}
		addTo(&s.podReq, p.Requests)
		addTo(&s.podLim, p.Limits)
		if p.Daemon {
			addTo(&s.dsReq, p.Requests)
			addTo(&s.dsLim, p.Limits)
		}
	}
	allocatable, requested := corev1.ResourceList{}, corev1.ResourceList{}
	for i := range nodes {
		n := &nodes[i]
		labels := nodeLabelValues(n)
		s := byNode[n.Name]
		overhead := corev1.ResourceList{}
		for name, c := range n.Status.Capacity {
			if a, ok := n.Status.Allocatable[name]; ok {
				c.Sub(a)
				overhead[name] = c
			}
		}
		for _, g := range []struct {
			f    *family
			list corev1.ResourceList
		}{{famAlloc, n.Status.Allocatable}, {famPodReq, s.podReq}, {famPodLim, s.podLim}, {famDSReq, s.dsReq}, {famDSLim, s.dsLim}, {famOverhead, overhead}} {
			for _, name := range sortedNames(g.list) {
				add(g.f, metrics.Value(name, g.list[name]), append(slices.Clone(labels), metrics.ResourceType(name))...)
			}
		}
		add(famLifetime, in.Now.Sub(n.CreationTimestamp.Time).Seconds(), labels...)
		addTo(&allocatable, n.Status.Allocatable)
		addTo(&requested, s.podReq)
	}
	for _, name := range sortedNames(allocatable) {
		a := metrics.Value(name, allocatable[name])
		if a == 0 {
			continue
		}
		add(famUtil, 100*metrics.Value(name, requested[name])/a, metrics.ResourceType(name))
	}

	if in.PodsKnown {
		index := nodeIndex(nodes)
		pods := slices.Clone(in.Pods)
		slices.SortFunc(pods, func(a, b *podInfo) int {
			return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
		})
		for _, p := range pods {
			var nl map[string]string
			if n := index[p.Node]; n != nil {
				nl = n.Labels
			}
			_, managed := nl[v1.NodePoolLabelKey]
			add(famPodState, 1, p.Name, p.Namespace, p.Owner, p.Node, metrics.Bool(p.Node != ""), nl[v1.NodePoolLabelKey], nl[v1.LabelZone],
				nl[v1.LabelArch], nl[v1.CapacityTypeLabelKey], nl[v1.LabelInstanceType], string(p.Phase), metrics.Bool(p.Ready), metrics.Bool(managed))
		}
	}

	for _, o := range offerings(pools, in.Types) {
		add(famPrice1, o.price, o.typ, o.captype, o.zone)
		add(famAvail, boolValue(o.available), o.typ, o.captype, o.zone)
	}
	for _, it := range instanceTypes(pools, in.Types) {
		if q, ok := it.Capacity[corev1.ResourceCPU]; ok {
			add(famCPU, metrics.Value(corev1.ResourceCPU, q), it.Name)
		}
		if q, ok := it.Capacity[corev1.ResourceMemory]; ok {
			add(famMemory, metrics.Value(corev1.ResourceMemory, q), it.Name)
		}
	}
	return out
}

type nodeSums struct{ podReq, podLim, dsReq, dsLim corev1.ResourceList }

func addTo(sum *corev1.ResourceList, list corev1.ResourceList) {
	if *sum == nil {
		*sum = corev1.ResourceList{}
	}
	for name, q := range list {
		have := (*sum)[name]
		have.Add(q)
		(*sum)[name] = have
	}
}

func nodeIndex(nodes []corev1.Node) map[string]*corev1.Node {
	out := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		out[nodes[i].Name] = &nodes[i]
	}
	return out
}

func nodeLabelValues(n *corev1.Node) []string {
	out := make([]string, len(nodeLabels))
	for i, key := range nodeLabelKeys {
		switch nodeLabels[i] {
		case nodeNameLabel:
			out[i] = n.Name
		case phaseLabel:
			out[i] = string(n.Status.Phase)
		case managedLabel:
			// A node of a NodePool, as karpenter_pods_state's managed says.
			_, managed := n.Labels[v1.NodePoolLabelKey]
			out[i] = metrics.Bool(managed)
		default:
			out[i] = n.Labels[key]
		}
	}
	return out
}

func sortedNames(list corev1.ResourceList) []corev1.ResourceName {
	return slices.Sorted(maps.Keys(list))
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

type offering struct {
	typ, captype, zone string
	price              float64
	available          bool
}

// offerings are the instance-type offerings of every NodePool, once each: NodePools
// share a provider's catalog, so the first NodePool's price stands, and an offering
// is available if it is for any NodePool.
func offerings(pools []v1.NodePool, types map[string][]*scheduling.InstanceType) []offering {
	seen := map[[3]string]int{}
	var out []offering
	for _, np := range pools {
		for _, it := range types[np.Name] {
			for _, o := range it.Offerings {
				key := [3]string{it.Name, o.CapacityType, o.Zone}
				if i, ok := seen[key]; ok {
					out[i].available = out[i].available || o.Available
					continue
				}
				seen[key] = len(out)
				out = append(out, offering{typ: it.Name, captype: o.CapacityType, zone: o.Zone, price: o.Price, available: o.Available})
			}
		}
	}
	slices.SortFunc(out, func(a, b offering) int {
		return strings.Compare(a.typ+"\x00"+a.captype+"\x00"+a.zone, b.typ+"\x00"+b.captype+"\x00"+b.zone)
	})
	return out
}

// instanceTypes are the instance types of every NodePool, once each, by name.
func instanceTypes(pools []v1.NodePool, types map[string][]*scheduling.InstanceType) []*scheduling.InstanceType {
	byName := map[string]*scheduling.InstanceType{}
	for _, np := range pools {
		for _, it := range types[np.Name] {
			if _, ok := byName[it.Name]; !ok {
				byName[it.Name] = it
			}
		}
	}
	out := make([]*scheduling.InstanceType, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, byName[name])
	}
	return out
}
