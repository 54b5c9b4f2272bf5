package inspect

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// OpenCost's default prices (its default.json, "based on GCP us-central1"): where
// the cloud bills a node as a whole, OpenCost splits its price between cpu and
// memory in this ratio, normalised so the parts add up to the node's price; Tailor
// does the same.
const (
	CPUWeight    = 0.031611 // per vCPU-hour
	MemoryWeight = 0.004237 // per GiB-hour
)

// HoursPerMonth turns hourly prices into monthly ones, as AWS's and OpenCost's
// monthly figures do (8,760 hours a year over 12).
const HoursPerMonth = 730

// Groupings of tailor cost --by.
const (
	ByNodePool  = "nodepool"
	ByNamespace = "namespace"
	ByWorkload  = "workload"
)

// Groupings lists them, the default first.
var Groupings = []string{ByNodePool, ByNamespace, ByWorkload}

// IdleLine names the room no pod asks for or uses.
const IdleLine = "(idle)"

// NodePrice is what a node costs per hour, split as tailor simulate splits a
// plan: its instance (the offering its labels name, from the NodePool's
// instance types) and its NodePool's per-node costs.
type NodePrice struct {
	Node, NodePool, NodeClaim        string
	InstanceType, Zone, CapacityType string
	// Known is false when no catalog lists the node's offering: it is left out of
	// the totals, and Why says so.
	Known bool
	Why   string
	// Instance is the offering's price; NodeCost the pool's per-node costs.
	Instance float64
	scheduling.NodeCost
}

// Total is the node's price per hour.
func (p NodePrice) Total() float64 { return p.Instance + p.NodeCost.Total() }

// NodePrices are every node's prices, by name.
func (c *Cluster) NodePrices() []NodePrice {
	out := make([]NodePrice, 0, len(c.Objects.Nodes))
	for _, n := range c.Objects.Nodes {
		out = append(out, c.nodePrice(n))
	}
	slices.SortFunc(out, func(a, b NodePrice) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// nodePrice prices a node as disruption prices a candidate: the offering its
// labels name among its NodePool's instance types, plus the pool's per-node costs.
// A node of no NodePool Tailor knows is priced from the default catalog alone.
func (c *Cluster) nodePrice(n *corev1.Node) NodePrice {
	p := NodePrice{Node: n.Name, NodePool: n.Labels[v1.NodePoolLabelKey], InstanceType: n.Labels[v1.LabelInstanceType],
		Zone: n.Labels[v1.LabelZone], CapacityType: n.Labels[v1.CapacityTypeLabelKey]}
	if nc := c.claimOf(n); nc != nil {
		p.NodeClaim = nc.Name
	}
	types := c.fallback
	labels := n.Labels
	if pool := c.pools[p.NodePool]; pool != nil {
		if pool.InstanceTypes == nil {
			p.Why = fmt.Sprintf("NodePool %s: %s", p.NodePool, pool.Unavailable)
			return p
		}
		types = pool.InstanceTypes
		p.NodeCost = pool.NodeCost
	} else if p.CapacityType == "" {
		// Nodes of managed node groups and the like carry no capacity type label;
		// they are on-demand unless said otherwise.
		labels = map[string]string{v1.LabelInstanceType: p.InstanceType, v1.LabelZone: p.Zone, v1.CapacityTypeLabelKey: v1.CapacityTypeOnDemand}
	}
	if p.InstanceType == "" {
		p.Why = "no " + v1.LabelInstanceType + " label"
		return p
	}
	price, ok := scheduling.OfferingPrice(types, labels)
	if !ok {
		p.Why = fmt.Sprintf("no price for %s in %s (%s) in the catalog", p.InstanceType, p.Zone, cmp.Or(labels[v1.CapacityTypeLabelKey], "no capacity type"))
		p.NodeCost = scheduling.NodeCost{}
		return p
	}
	p.Known, p.Instance = true, price
	return p
}

// claimOf is the NodeClaim of a node: the first that names it, or its provider ID.
func (c *Cluster) claimOf(n *corev1.Node) *v1.NodeClaim {
	c.claimsOnce.Do(func() { c.claims = indexClaims(c.Objects.NodeClaims) })
	i, ok := c.claims.byNode[n.Name]
	if n.Spec.ProviderID != "" {
		if j, found := c.claims.byProviderID[n.Spec.ProviderID]; found && (!ok || j < i) {
			i, ok = j, true
		}
	}
	if !ok {
		return nil
	}
	return c.Objects.NodeClaims[i]
}

// claimIndex is where in the NodeClaims the first to name each node, and the
// first to have each provider ID, are.
type claimIndex struct {
	byNode, byProviderID map[string]int
}

func indexClaims(claims []*v1.NodeClaim) claimIndex {
	idx := claimIndex{byNode: make(map[string]int, len(claims)), byProviderID: make(map[string]int, len(claims))}
	for i, nc := range claims {
		if _, ok := idx.byNode[nc.Status.NodeName]; !ok {
			idx.byNode[nc.Status.NodeName] = i
		}
		if id := nc.Status.ProviderID; id != "" {
			if _, ok := idx.byProviderID[id]; !ok {
				idx.byProviderID[id] = i
			}
		}
	}
	return idx
}

// PodCost is a pod's share of its node's price.
type PodCost struct {
	Namespace, Name, Node, NodePool string
	// Workload is the pod's controller at the top ("Deployment/web"), or "Pod/NAME".
	Workload string
	// CPU (cores) and Memory (GiB) are what the pod is charged for: the larger of
	// its requests and its usage, where usage is known.
	CPU, Memory float64
	// ByUsage says usage, not requests, set the larger of the two.
	ByUsage bool
	PerHour float64
}

// Shares splits each priced node's price between its pods, as OpenCost
// allocates: a pod pays for the larger of its requests and its usage in cpu and
// memory, at the node's rates (its price split between its cpu and memory
// capacity in OpenCost's default ratio); what is left is the node's idle room. A
// node whose pods are charged more than its price (usage over capacity) has their
// shares scaled down to it. DaemonSet pods pay like any pod.
func (c *Cluster) Shares(prices []NodePrice) (pods []PodCost, idle map[string]float64) {
	bound := map[string][]*corev1.Pod{}
	for _, p := range c.Objects.Pods {
		if p.Spec.NodeName != "" && !scheduling.IsTerminal(p) {
			bound[p.Spec.NodeName] = append(bound[p.Spec.NodeName], p)
		}
	}
	nodes := map[string]*corev1.Node{}
	for _, n := range c.Objects.Nodes {
		nodes[n.Name] = n
	}
	idle = map[string]float64{}
	for _, np := range prices {
		if !np.Known {
			continue
		}
		n := nodes[np.Node]
		capCPU, capMem := cores(n.Status.Capacity), gib(n.Status.Capacity)
		if capCPU == 0 && capMem == 0 {
			capCPU, capMem = cores(n.Status.Allocatable), gib(n.Status.Allocatable)
		}
		price := np.Total()
		weight := CPUWeight*capCPU + MemoryWeight*capMem
		var cpuRate, memRate float64
		if weight > 0 {
			cpuRate, memRate = price*CPUWeight/weight, price*MemoryWeight/weight
		}
		first := len(pods)
		sum := 0.0
		for _, p := range bound[np.Node] {
			req := scheduling.PodRequests(p)
			pc := PodCost{Namespace: p.Namespace, Name: p.Name, Node: np.Node, NodePool: np.NodePool, Workload: c.workload(p),
				CPU: cores(req), Memory: gib(req)}
			if use, ok := c.Usage[p.Namespace+"/"+p.Name]; ok {
				if u := cores(use); u > pc.CPU {
					pc.CPU, pc.ByUsage = u, true
				}
				if u := gib(use); u > pc.Memory {
					pc.Memory, pc.ByUsage = u, true
				}
			}
			pc.PerHour = pc.CPU*cpuRate + pc.Memory*memRate
			sum += pc.PerHour
			pods = append(pods, pc)
		}
		if sum > price {
			for i := first; i < len(pods); i++ {
				pods[i].PerHour *= price / sum
			}
			sum = price
		}
		idle[np.Node] = price - sum
	}
	return pods, idle
}

// workload names a pod's controller at the top of its owners.
func (c *Cluster) workload(p *corev1.Pod) string {
	o := controllerOf(p.OwnerReferences)
	if o == nil {
		return "Pod/" + p.Name
	}
	if top, ok := c.Owners[o.Kind+"/"+p.Namespace+"/"+o.Name]; ok {
		return top
	}
	return o.Kind + "/" + o.Name
}

func cores(l corev1.ResourceList) float64 {
	q, ok := l[corev1.ResourceCPU]
	if !ok {
		return 0
	}
	return float64(q.MilliValue()) / 1000
}

func gib(l corev1.ResourceList) float64 {
	q, ok := l[corev1.ResourceMemory]
	if !ok {
		return 0
	}
	return float64(q.Value()) / (1 << 30)
}

// CostLine is one line of the allocation: a NodePool, namespace or workload.
type CostLine struct {
	Name string `json:"name"`
	Pods int    `json:"pods"`
	// CPU (cores) and Memory (GiB) charged: requests or usage, the larger.
	CPU     float64 `json:"cpu"`
	Memory  float64 `json:"memory_gib"`
	PerHour float64 `json:"cost_per_hour"`
	// PerMonth is PerHour × 730.
	PerMonth float64 `json:"cost_per_month"`
}

// NodeLine is a node's price in the report.
type NodeLine struct {
	Node         string  `json:"node"`
	NodePool     string  `json:"node_pool,omitempty"`
	NodeClaim    string  `json:"node_claim,omitempty"`
	InstanceType string  `json:"instance_type,omitempty"`
	Zone         string  `json:"zone,omitempty"`
	CapacityType string  `json:"capacity_type,omitempty"`
	Instance     float64 `json:"instance"`
	Volumes      float64 `json:"volumes"`
	Addresses    float64 `json:"addresses"`
	PerNode      float64 `json:"per_node"`
	PerHour      float64 `json:"price_per_hour"`
	PerMonth     float64 `json:"price_per_month"`
	Pods         int     `json:"pods"`
	Idle         float64 `json:"idle_per_hour"`
	// Unpriced says why the node has no price (and is left out of the totals).
	Unpriced string `json:"unpriced,omitempty"`
}

// Totals are the cluster's price, split as tailor simulate splits a plan.
type Totals struct {
	Instances float64 `json:"instances"`
	Volumes   float64 `json:"volumes"`
	Addresses float64 `json:"addresses"`
	PerNode   float64 `json:"per_node"`
	PerHour   float64 `json:"cost_per_hour"`
	PerMonth  float64 `json:"cost_per_month"`
	Nodes     int     `json:"nodes"`
	Unpriced  int     `json:"unpriced_nodes"`
}

// CostReport is tailor cost's answer.
type CostReport struct {
	By    string     `json:"by"`
	Nodes []NodeLine `json:"nodes"`
	// Lines are the allocation by By, most expensive first; Idle is the room no pod
	// asks for, on every priced node.
	Lines []CostLine `json:"allocation"`
	Idle  CostLine   `json:"idle"`
	Total Totals     `json:"total"`
	// Usage says whether pods were charged by usage (metrics.k8s.io) or requests.
	Usage string   `json:"usage"`
	Notes []string `json:"notes,omitempty"`
}

// Cost prices every node and allocates the cluster's price by NodePool,
// namespace or workload; the lines and the idle line add up to the total.
func (c *Cluster) Cost(by string) (*CostReport, error) {
	reps, err := c.Costs(by)
	if err != nil {
		return nil, err
	}
	return reps[0], nil
}

// Costs is Cost by each grouping in turn, the nodes priced and their prices
// shared between their pods once for all.
func (c *Cluster) Costs(bys ...string) ([]*CostReport, error) {
	for _, by := range bys {
		if !slices.Contains(Groupings, by) {
			return nil, fmt.Errorf("cost by %q: want %s", by, strings.Join(Groupings, ", "))
		}
	}
	prices := c.NodePrices()
	pods, idle := c.Shares(prices)
	out := make([]*CostReport, 0, len(bys))
	for _, by := range bys {
		out = append(out, c.report(by, prices, pods, idle))
	}
	return out, nil
}

// report is the cost by a grouping of the nodes' prices and the pods' shares.
func (c *Cluster) report(by string, prices []NodePrice, pods []PodCost, idle map[string]float64) *CostReport {
	rep := &CostReport{By: by, Usage: "requests", Notes: slices.Clone(c.Notes)}
	if c.Usage != nil {
		rep.Usage = "metrics.k8s.io"
	} else if c.UsageNote != "" {
		rep.Notes = append(rep.Notes, c.UsageNote)
	}
	podsOn := map[string]int{}
	for _, pc := range pods {
		podsOn[pc.Node]++
	}
	for _, np := range prices {
		line := NodeLine{Node: np.Node, NodePool: np.NodePool, NodeClaim: np.NodeClaim, InstanceType: np.InstanceType, Zone: np.Zone,
			CapacityType: np.CapacityType, Pods: podsOn[np.Node]}
		if !np.Known {
			line.Unpriced = np.Why
			rep.Total.Unpriced++
			rep.Notes = append(rep.Notes, fmt.Sprintf("node %s is not priced: %s", np.Node, np.Why))
		} else {
			line.Instance, line.Volumes, line.Addresses, line.PerNode = round(np.Instance), round(np.Volumes), round(np.Addresses), round(np.PerNode)
			line.PerHour, line.PerMonth, line.Idle = round(np.Total()), round(np.Total()*HoursPerMonth), round(idle[np.Node])
			rep.Total.Instances += np.Instance
			rep.Total.Volumes += np.Volumes
			rep.Total.Addresses += np.Addresses
			rep.Total.PerNode += np.PerNode
			rep.Total.PerHour += np.Total()
			rep.Total.Nodes++
		}
		rep.Nodes = append(rep.Nodes, line)
	}
	lines := map[string]*CostLine{}
	for _, pc := range pods {
		key := pc.Namespace
		switch by {
		case ByNodePool:
			key = cmp.Or(pc.NodePool, "(no nodepool)")
		case ByWorkload:
			key = pc.Namespace + "/" + pc.Workload
		}
		l := lines[key]
		if l == nil {
			l = &CostLine{Name: key}
			lines[key] = l
		}
		l.Pods++
		l.CPU += pc.CPU
		l.Memory += pc.Memory
		l.PerHour += pc.PerHour
	}
	for _, l := range lines {
		rep.Lines = append(rep.Lines, finish(*l))
	}
	slices.SortFunc(rep.Lines, func(a, b CostLine) int {
		return cmp.Or(cmp.Compare(b.PerHour, a.PerHour), strings.Compare(a.Name, b.Name))
	})
	rep.Idle = CostLine{Name: IdleLine}
	for _, np := range prices {
		rep.Idle.PerHour += idle[np.Node]
	}
	rep.Idle = finish(rep.Idle)
	t := &rep.Total
	t.PerMonth = round(t.PerHour * HoursPerMonth)
	t.Instances, t.Volumes, t.Addresses, t.PerNode, t.PerHour = round(t.Instances), round(t.Volumes), round(t.Addresses), round(t.PerNode), round(t.PerHour)
	return rep
}

func finish(l CostLine) CostLine {
	l.PerMonth = round(l.PerHour * HoursPerMonth)
	l.PerHour, l.CPU, l.Memory = round(l.PerHour), round(l.CPU), round(l.Memory)
	return l
}

// round keeps six decimals: a hundredth of a cent an hour is below any bill's.
func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }
