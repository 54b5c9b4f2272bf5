package console

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/inspect"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Lifecycle states of a node, from its NodeClaim's conditions.
const (
	StateLaunching   = "launching"   // a NodeClaim whose node has not registered
	StateRegistered  = "registered"  // the node joined, not yet initialized
	StateInitialized = "initialized" // ready, startup taints gone
	StateDraining    = "draining"    // being deleted or disrupted: tainted karpenter.sh/disrupted
	StateDrifted     = "drifted"     // no longer matches its NodePool
	StateUnmanaged   = "unmanaged"   // no NodeClaim: not Tailor's
)

// EventSource is the component Tailor's controllers record events as.
const EventSource = "tailor"

// MaxDecisions is how many of Tailor's events the timeline keeps, newest first.
const MaxDecisions = 200

// Model is everything the page shows, computed from the informers' caches.
type Model struct {
	// Generated is when the model was computed (RFC 3339).
	Generated string        `json:"generated"`
	Nodes     []Node        `json:"nodes"`
	Totals    Totals        `json:"totals"`
	Pending   []Pending     `json:"pending"`
	Decisions []Decision    `json:"decisions"`
	Cost      CostBreakdown `json:"cost"`
	Notes     []string      `json:"notes,omitempty"`
}

// Node is one row of the nodes view: a Node, or a NodeClaim whose node has not
// joined yet.
type Node struct {
	inspect.NodeLine
	// State is the lifecycle state; StateReason says why, when a condition does
	// (the Drifted condition's message, say); Consolidatable marks a node the
	// disruption loop may remove or replace.
	State          string `json:"state"`
	StateReason    string `json:"state_reason,omitempty"`
	Consolidatable bool   `json:"consolidatable,omitempty"`
	// Requested and allocatable cpu (cores) and memory (GiB): the sum of the
	// requests of the pods on it that have not finished.
	CPURequested   float64 `json:"cpu_requested"`
	CPUAllocatable float64 `json:"cpu_allocatable"`
	MemRequested   float64 `json:"memory_requested_gib"`
	MemAllocatable float64 `json:"memory_allocatable_gib"`
	Created        string  `json:"created,omitempty"`
}

// Totals are the cluster's price and room.
type Totals struct {
	inspect.Totals
	// SpotNodes of the priced nodes are spot; SpotShare is their share of the
	// price per hour (0 to 1).
	SpotNodes       int     `json:"spot_nodes"`
	SpotShare       float64 `json:"spot_share"`
	CPURequested    float64 `json:"cpu_requested"`
	CPUAllocatable  float64 `json:"cpu_allocatable"`
	MemRequested    float64 `json:"memory_requested_gib"`
	MemAllocatable  float64 `json:"memory_allocatable_gib"`
	PendingPods     int     `json:"pending_pods"`
	LaunchingClaims int     `json:"launching_claims"`
}

// Pending is a pending pod with Tailor's reason per NodePool and its latest
// event from the scheduler or Tailor.
type Pending struct {
	inspect.PendingPod
	LastEvent *Event `json:"last_event,omitempty"`
}

// Decision is one of the events Tailor's controllers recorded.
type Decision struct {
	Event
	// Category groups reasons for the timeline: launch, disruption,
	// termination, scheduling, interruption, repair, or other.
	Category string `json:"category"`
}

// Event is an event as the page shows it.
type Event struct {
	Time      string `json:"time,omitempty"`
	Type      string `json:"type"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Count     int32  `json:"count,omitempty"`
	From      string `json:"from,omitempty"`
}

// CostBreakdown is tailor cost --by nodepool and --by namespace, and the idle line.
type CostBreakdown struct {
	ByNodePool  []inspect.CostLine `json:"by_nodepool"`
	ByNamespace []inspect.CostLine `json:"by_namespace"`
	Idle        inspect.CostLine   `json:"idle"`
	// Usage says whether pods are charged by usage (metrics.k8s.io) or requests.
	Usage string `json:"usage"`
}

// Build computes the page's model from the cluster as read (prices and
// allocation as tailor cost computes them, pending pods as tailor explain pod
// explains them) and the cluster's events. It writes nothing and keeps nothing.
func Build(c *inspect.Cluster, events []*corev1.Event, opts scheduling.Options) (*Model, error) {
	reps, err := c.Costs(inspect.ByNodePool, inspect.ByNamespace)
	if err != nil {
		return nil, err
	}
	byPool, byNS := reps[0], reps[1]
	m := &Model{Generated: c.Now.UTC().Format(time.RFC3339), Notes: byNS.Notes,
		Cost: CostBreakdown{ByNodePool: byPool.Lines, ByNamespace: byNS.Lines, Idle: byNS.Idle, Usage: byNS.Usage}}
	m.Totals.Totals = byNS.Total

	requested := map[string]corev1.ResourceList{}
	for _, p := range c.Objects.Pods {
		if p.Spec.NodeName == "" || scheduling.IsTerminal(p) {
			continue
		}
		sum := requested[p.Spec.NodeName]
		if sum == nil {
			sum = corev1.ResourceList{}
			requested[p.Spec.NodeName] = sum
		}
		for r, q := range scheduling.PodRequests(p) {
			cur := sum[r]
			cur.Add(q)
			sum[r] = cur
		}
	}
	nodes := make(map[string]*corev1.Node, len(c.Objects.Nodes))
	for _, n := range c.Objects.Nodes {
		nodes[n.Name] = n
	}
	claims := map[string]*v1.NodeClaim{}
	for _, nc := range c.Objects.NodeClaims {
		claims[nc.Name] = nc
	}
	seen := map[string]bool{}
	for _, line := range byNS.Nodes {
		n := nodes[line.Node]
		row := Node{NodeLine: line, Created: stamp(n.CreationTimestamp.Time)}
		nc := claims[line.NodeClaim]
		seen[line.NodeClaim] = true
		row.State, row.StateReason, row.Consolidatable = lifecycle(n, nc)
		req := requested[n.Name]
		row.CPURequested, row.MemRequested = cores(req), gib(req)
		row.CPUAllocatable, row.MemAllocatable = cores(n.Status.Allocatable), gib(n.Status.Allocatable)
		m.Nodes = append(m.Nodes, row)
		t := &m.Totals
		t.CPURequested += row.CPURequested
		t.MemRequested += row.MemRequested
		t.CPUAllocatable += row.CPUAllocatable
		t.MemAllocatable += row.MemAllocatable
		if line.Unpriced == "" && line.CapacityType == v1.CapacityTypeSpot {
			t.SpotNodes++
			t.SpotShare += line.PerHour
		}
	}
	// Claims whose node has not joined: launching, not priced yet.
	for _, nc := range c.Objects.NodeClaims {
		if seen[nc.Name] || (nc.Status.NodeName != "" && nodes[nc.Status.NodeName] != nil) {
			continue
		}
		row := Node{NodeLine: inspect.NodeLine{Node: cmp.Or(nc.Status.NodeName, nc.Name), NodePool: nc.Labels[v1.NodePoolLabelKey], NodeClaim: nc.Name,
			InstanceType: nc.Labels[v1.LabelInstanceType], Zone: nc.Labels[v1.LabelZone], CapacityType: nc.Labels[v1.CapacityTypeLabelKey],
			Unpriced: "its node has not joined yet"}, Created: stamp(nc.CreationTimestamp.Time)}
		row.State, row.StateReason, row.Consolidatable = lifecycle(nil, nc)
		row.CPUAllocatable, row.MemAllocatable = cores(nc.Status.Allocatable), gib(nc.Status.Allocatable)
		m.Nodes = append(m.Nodes, row)
		m.Totals.LaunchingClaims++
	}
	slices.SortFunc(m.Nodes, func(a, b Node) int {
		return cmp.Or(strings.Compare(a.NodePool, b.NodePool), strings.Compare(a.Node, b.Node))
	})
	t := &m.Totals
	if t.PerHour > 0 {
		t.SpotShare = round(t.SpotShare / t.PerHour)
	} else {
		t.SpotShare = 0
	}
	t.CPURequested, t.MemRequested, t.CPUAllocatable, t.MemAllocatable = round(t.CPURequested), round(t.MemRequested), round(t.CPUAllocatable), round(t.MemAllocatable)

	latest := latestPodEvents(events)
	for _, pp := range c.PendingPods(opts) {
		p := Pending{PendingPod: pp}
		if e, ok := latest[pp.Namespace+"/"+pp.Name]; ok {
			p.LastEvent = &e
		}
		m.Pending = append(m.Pending, p)
	}
	m.Totals.PendingPods = len(m.Pending)
	m.Decisions = decisions(events)
	return m, nil
}

// lifecycle is a node's state from its NodeClaim's conditions (and the node's own
// deletion and disruption taint): draining first, then drifted, then how far it
// came up.
func lifecycle(n *corev1.Node, nc *v1.NodeClaim) (state, reason string, consolidatable bool) {
	if nc == nil {
		if n != nil && n.DeletionTimestamp != nil {
			return StateDraining, "the node is being deleted", false
		}
		return StateUnmanaged, "no NodeClaim: not launched by Tailor", false
	}
	conds := nc.Status.Conditions
	consolidatable = meta.IsStatusConditionTrue(conds, v1.ConditionTypeConsolidatable)
	switch {
	case nc.DeletionTimestamp != nil:
		return StateDraining, "its NodeClaim is being deleted", false
	case n != nil && n.DeletionTimestamp != nil:
		return StateDraining, "the node is being deleted", false
	case n != nil && slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&v1.DisruptedNoScheduleTaint) }):
		reason := "tainted " + v1.DisruptedNoScheduleTaint.Key + ": Tailor is disrupting it"
		if c := meta.FindStatusCondition(conds, v1.ConditionTypeDisruptionReason); c != nil && c.Status == "True" {
			reason += " (" + cmp.Or(c.Message, c.Reason) + ")"
		}
		return StateDraining, reason, false
	}
	if c := meta.FindStatusCondition(conds, v1.ConditionTypeDrifted); c != nil && c.Status == "True" {
		return StateDrifted, cmp.Or(c.Message, c.Reason), consolidatable
	}
	switch {
	case meta.IsStatusConditionTrue(conds, v1.ConditionTypeInitialized):
		return StateInitialized, "", consolidatable
	case meta.IsStatusConditionTrue(conds, v1.ConditionTypeRegistered):
		return StateRegistered, "waiting to be initialized (ready, startup taints gone)", consolidatable
	case meta.IsStatusConditionTrue(conds, v1.ConditionTypeLaunched):
		return StateLaunching, "launched; waiting for its node to register", false
	}
	reason = "waiting for the cloud to launch it"
	if c := meta.FindStatusCondition(conds, v1.ConditionTypeLaunched); c != nil && c.Message != "" {
		reason = c.Message
	}
	return StateLaunching, reason, false
}

// latestPodEvents is, per pod, its newest event.
func latestPodEvents(events []*corev1.Event) map[string]Event {
	out := map[string]Event{}
	at := map[string]time.Time{}
	for _, e := range events {
		if e.InvolvedObject.Kind != "Pod" {
			continue
		}
		key := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		if t := eventTime(e); at[key].IsZero() || !t.Before(at[key]) {
			out[key], at[key] = eventOf(e), t
		}
	}
	return out
}

// decisions are the events Tailor's controllers recorded, newest first.
func decisions(events []*corev1.Event) []Decision {
	var mine []*corev1.Event
	for _, e := range events {
		if e.Source.Component == EventSource || e.ReportingController == EventSource {
			mine = append(mine, e)
		}
	}
	slices.SortStableFunc(mine, func(a, b *corev1.Event) int {
		return cmp.Or(eventTime(b).Compare(eventTime(a)), strings.Compare(a.Name, b.Name))
	})
	if len(mine) > MaxDecisions {
		mine = mine[:MaxDecisions]
	}
	out := make([]Decision, 0, len(mine))
	for _, e := range mine {
		out = append(out, Decision{Event: eventOf(e), Category: category(e.Reason)})
	}
	return out
}

// category groups the reasons Tailor's controllers record (pkg/controllers).
func category(reason string) string {
	switch reason {
	case "Launched", "Registered", "Initialized", "LaunchTimedOut", "RegistrationTimedOut", "InitializationTimedOut",
		"InsufficientCapacityError", "NodeClassNotReady", "FailedCreate", "LimitReached", "NotReady", "DisruptionLaunching":
		return "launch"
	case "Nominated", "FailedScheduling", "Bound":
		return "scheduling"
	case "Evicted", "Disrupted", "FailedDraining", "TerminationGracePeriodExpiring", "AwaitingVolumeDetachment",
		"InstanceVanished", "GarbageCollectionFailed":
		return "termination"
	case "TerminatingOnInterruption":
		return "interruption"
	case "NodeRepair", "NodeRepairBlocked":
		return "repair"
	}
	switch {
	case strings.HasPrefix(reason, "Disruption"), strings.HasPrefix(reason, "DoNotDisrupt"), reason == "Unconsolidatable",
		reason == "Expired", reason == "Drifted", reason == "ScaledDown", strings.Contains(reason, "Consolidat"):
		return "disruption"
	}
	return "other"
}

func eventOf(e *corev1.Event) Event {
	return Event{Time: stamp(eventTime(e)), Type: e.Type, Reason: e.Reason, Message: e.Message, Kind: e.InvolvedObject.Kind,
		Namespace: e.InvolvedObject.Namespace, Name: e.InvolvedObject.Name, Count: e.Count,
		From: cmp.Or(e.Source.Component, e.ReportingController)}
}

func eventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func cores(l corev1.ResourceList) float64 {
	q, ok := l[corev1.ResourceCPU]
	if !ok {
		return 0
	}
	return round(float64(q.MilliValue()) / 1000)
}

func gib(l corev1.ResourceList) float64 {
	q, ok := l[corev1.ResourceMemory]
	if !ok {
		return 0
	}
	return round(float64(q.Value()) / (1 << 30))
}

func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }
