package scheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Input is a snapshot of everything one scheduling decision depends on.
type Input struct {
	// Pods are the pending pods to place.
	Pods []*corev1.Pod
	// Nodes are the existing nodes, and the nodes being launched, with their pods.
	Nodes []*Node
	// NodePools are the pools new nodes may come from, each with its instance types.
	NodePools []*NodePool
	// DaemonSets are the pods DaemonSets would run on a new node (their templates);
	// each takes room on the nodes of the NodePools it tolerates and selects.
	DaemonSets []*corev1.Pod
	// Namespaces give namespace labels for pod affinity namespaceSelectors.
	Namespaces []*corev1.Namespace
	// Volumes decide the zones of pods with zonal persistent volumes.
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	PersistentVolumes      []*corev1.PersistentVolume
	StorageClasses         []*storagev1.StorageClass
	// CSINodes give existing nodes' CSI volume attach limits, by node name: a pod
	// whose volumes would take a driver past its allocatable count does not go there.
	CSINodes []*storagev1.CSINode
	// Demand are pods the solve does not place but counts, beside Pods, in the
	// demand that sizes new nodes: the rest of a workload whose pods are placed a
	// part at a time, so that each part gets the nodes a plan of the whole would.
	Demand []Demand
}

// Demand stands for Count pods like Pod (see Input.Demand). One of a shape no pod
// in Pods has is ignored.
type Demand struct {
	Pod   *corev1.Pod
	Count int
}

// Node is an existing node, or one being launched, with the pods bound to it.
type Node struct {
	// Node carries labels, taints, allocatable and capacity. For a node being
	// launched, they are what its NodeClaim promises.
	Node *corev1.Node
	Pods []*corev1.Pod
	// Launching marks a NodeClaim whose node is not ready yet; it is tried after the
	// existing nodes.
	Launching bool
	// Requests, when set, is the sum of the requests of Pods (those not finished),
	// so callers solving the same cluster many times need not have it recomputed.
	Requests corev1.ResourceList
}

// NodePool is a NodePool and the instance types its cloud offers for it.
type NodePool struct {
	NodePool      *v1.NodePool
	InstanceTypes []*InstanceType
	// Unavailable, when set, says why the pool cannot launch anything now (its
	// NodeClass is missing, say); pods get it as the pool's reason.
	Unavailable string
	// Draining is the capacity of the pool's nodes that are going away (their
	// NodeClaims deleted, their instances not yet gone): no pod goes there, but it
	// counts against the pool's limits.
	Draining corev1.ResourceList
	// NodeCost is what each of the pool's nodes costs besides its instance (its
	// volumes, its public address, the operator's per-node cost): the engine
	// minimises instance prices plus these.
	NodeCost NodeCost
}

// NodeCost is what a node costs per hour besides its instance, in the currency
// of the offerings' prices.
type NodeCost struct {
	// Volumes are the node class's block devices (size, provisioned IOPS and
	// throughput).
	Volumes float64
	// Addresses are the node's public IPv4 addresses.
	Addresses float64
	// PerNode is what the cloud does not bill: licences, agents (set by the
	// operator), or a simulated NodeClass's per-node cost.
	PerNode float64
}

// Total is the node's whole cost besides its instance.
func (c NodeCost) Total() float64 { return c.Volumes + c.Addresses + c.PerNode }

// CostSplit is a plan's hourly price by what it pays for.
type CostSplit struct {
	Instances float64
	NodeCost
}

// Total is the whole hourly price.
func (c CostSplit) Total() float64 { return c.Instances + c.NodeCost.Total() }

// Options tune a solve.
type Options struct {
	// MaxInstanceTypes bounds the ranked instance-type options kept per new node, so a
	// launch can fall back when capacity is short. Zero means 60.
	MaxInstanceTypes int
	// PreferencePolicy Ignore plans as if pods had no preferences (preferred node
	// and pod affinity, ScheduleAnyway spreads), as Karpenter's --preference-policy.
	PreferencePolicy PreferencePolicy
	// MinValuesPolicy BestEffort lets a node keep fewer values than a NodePool's
	// minValues when that is what lets pods be placed, as Karpenter's
	// --min-values-policy; the node says so (NewNode.MinValuesRelaxed).
	MinValuesPolicy MinValuesPolicy
}

// PreferencePolicy says whether pods' scheduling preferences are honoured.
type PreferencePolicy string

const (
	PreferencePolicyRespect PreferencePolicy = "Respect"
	PreferencePolicyIgnore  PreferencePolicy = "Ignore"
)

// ParsePreferencePolicy reads Respect or Ignore ("" is Respect).
func ParsePreferencePolicy(s string) (PreferencePolicy, error) {
	switch p := PreferencePolicy(s); p {
	case "", PreferencePolicyRespect:
		return PreferencePolicyRespect, nil
	case PreferencePolicyIgnore:
		return p, nil
	}
	return "", fmt.Errorf("preference policy %q: want Respect or Ignore", s)
}

// ParseMinValuesPolicy reads Strict or BestEffort ("" is Strict).
func ParseMinValuesPolicy(s string) (MinValuesPolicy, error) {
	switch p := MinValuesPolicy(s); p {
	case "", MinValuesPolicyStrict:
		return MinValuesPolicyStrict, nil
	case MinValuesPolicyBestEffort:
		return p, nil
	}
	return "", fmt.Errorf("min values policy %q: want Strict or BestEffort", s)
}

// MinValuesPolicy says whether a NodePool's minValues may be relaxed.
type MinValuesPolicy string

const (
	MinValuesPolicyStrict     MinValuesPolicy = "Strict"
	MinValuesPolicyBestEffort MinValuesPolicy = "BestEffort"
)

// Plan is the outcome of a solve.
type Plan struct {
	// Bindings are pods that fit on existing or launching nodes.
	Bindings []Binding
	// NewNodes are the nodes to launch.
	NewNodes []*NewNode
	// Unschedulable are pods that fit nowhere, with the reason.
	Unschedulable []Failure
	// Warnings name input the solve left out rather than fail on, such as a
	// DaemonSet whose requests or node affinity cannot be read.
	Warnings []string
	// EffectiveZones are, for each pod of phase Pending, the zone it can go to
	// before any is placed: its one zone, ZoneFlexible or ZoneNone (see
	// effectiveZone).
	EffectiveZones map[*corev1.Pod]string
}

// Binding places a pod on a node that exists or is being launched.
type Binding struct {
	Pod  *corev1.Pod
	Node string
}

// Failure says why a pod fits nowhere.
type Failure struct {
	Pod    *corev1.Pod
	Reason string
}

// NewNode is a node to launch.
type NewNode struct {
	// Name is a placeholder hostname, unique within the plan.
	Name     string
	NodePool string
	// Requirements the node must meet, narrowed to its instance-type options.
	Requirements  Requirements
	Taints        []corev1.Taint
	StartupTaints []corev1.Taint
	// InstanceTypes are the options, cheapest first.
	InstanceTypes []*InstanceType
	Pods          []*corev1.Pod
	// Requests sums the pods' and the DaemonSets' requests.
	Requests corev1.ResourceList
	// InstanceType and Offering are the cheapest option: what the plan's price assumes.
	InstanceType *InstanceType
	Offering     Offering
	// MinValuesRelaxed: the options keep fewer values than the NodePool's minValues
	// (MinValuesPolicyBestEffort); Requirements carry the relaxed minValues.
	MinValuesRelaxed bool
	// NodeCost is its pool's per-node cost, paid whichever option launches.
	NodeCost NodeCost
}

// Price is what the node costs per hour at its cheapest option, per-node costs
// included.
func (n *NewNode) Price() float64 { return n.Offering.Price + n.NodeCost.Total() }

// Cost is the hourly price of the new nodes, each at its cheapest option, with
// their per-node costs.
func (p *Plan) Cost() float64 { return p.Costs().Total() }

// Costs splits Cost into instances, volumes, addresses and per-node costs.
func (p *Plan) Costs() CostSplit {
	var c CostSplit
	for _, n := range p.NewNodes {
		c.Instances += n.Offering.Price
		c.Volumes += n.NodeCost.Volumes
		c.Addresses += n.NodeCost.Addresses
		c.PerNode += n.NodeCost.PerNode
	}
	return c
}
