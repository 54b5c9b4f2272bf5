package simulate

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Summary is the one-line JSON summary that tooling compares across autoscalers.
type Summary struct {
	Impl          string  `json:"impl"`
	Version       string  `json:"version"`
	Pods          int     `json:"pods"`
	Scheduled     int     `json:"scheduled"`
	Unschedulable int     `json:"unschedulable"`
	Nodes         int     `json:"nodes"`
	CostPerHour   float64 `json:"cost_per_hour"`
	SolveSeconds  float64 `json:"solve_seconds"`
	AllocBytes    uint64  `json:"alloc_bytes"`
}

// CostsView splits the new nodes' hourly price: their instances, their volumes,
// their public addresses, and the per-node costs the cloud does not bill.
type CostsView struct {
	Instances float64 `json:"instances"`
	Volumes   float64 `json:"volumes"`
	Addresses float64 `json:"addresses"`
	PerNode   float64 `json:"per_node"`
}

// The machine-readable output (tailor simulate --output json|yaml). Field names are
// snake_case throughout, as the summary line's always were; docs/cli.md documents
// every field.

// NodeView is a new node as printed.
type NodeView struct {
	Name         string  `json:"name"`
	NodePool     string  `json:"node_pool"`
	InstanceType string  `json:"instance_type"`
	Zone         string  `json:"zone"`
	CapacityType string  `json:"capacity_type"`
	PricePerHour float64 `json:"price_per_hour"`
	// NodeCostPerHour is what the node costs besides its instance (volumes,
	// address, per-node cost).
	NodeCostPerHour float64           `json:"node_cost_per_hour"`
	Options         []string          `json:"instance_type_options"`
	Requests        map[string]string `json:"requests"`
	Pods            []string          `json:"pods"`
}

// BindingView is a pod placed on an existing node.
type BindingView struct {
	Pod  string `json:"pod"`
	Node string `json:"node"`
}

// FailureView is an unschedulable pod and why.
type FailureView struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

// RefusedView is an object of the input left out of the plan because the API
// server would refuse it.
type RefusedView struct {
	File string `json:"file"`
	// Document is the YAML document in the file, from 1.
	Document int    `json:"document"`
	Object   string `json:"object"`
	// Error is the whole message, naming the file, the object and the field.
	Error string `json:"error"`
}

// lowerBoundView is a price no plan for the new nodes' pods can beat.
type lowerBoundView struct {
	CostPerHour float64 `json:"cost_per_hour"`
}

// Report is the whole plan.
type Report struct {
	Summary    Summary
	LowerBound float64
	// Costs splits the summary's cost_per_hour by what it pays for.
	Costs         CostsView
	NewNodes      []NodeView
	Bindings      []BindingView
	Unschedulable []FailureView
	// Warnings name input the plan left out, such as a DaemonSet it cannot read.
	Warnings []string
	// Refused are the objects of the input the API server would refuse.
	Refused []RefusedView
	// workloads names the workload of each pod of the plan, by "namespace/name",
	// for the table.
	workloads map[string]string
}

// NewReport shapes a result for printing.
func NewReport(r *Result, version string) *Report {
	p := r.Plan
	rep := &Report{LowerBound: round(r.LowerBound), Costs: costsView(p.Costs()), Warnings: p.Warnings, workloads: map[string]string{}}
	name := func(pod *corev1.Pod) string {
		key := pod.Namespace + "/" + pod.Name
		rep.workloads[key] = workloadOf(pod, r.Owners)
		return key
	}
	scheduled := len(p.Bindings)
	for _, n := range p.NewNodes {
		scheduled += len(n.Pods)
		view := NodeView{Name: n.Name, NodePool: n.NodePool, InstanceType: n.InstanceType.Name, Zone: n.Offering.Zone,
			CapacityType: n.Offering.CapacityType, PricePerHour: n.Offering.Price, NodeCostPerHour: round(n.NodeCost.Total()), Requests: map[string]string{},
			Options: []string{}, Pods: []string{}}
		for _, it := range n.InstanceTypes {
			view.Options = append(view.Options, it.Name)
		}
		for name, q := range n.Requests {
			view.Requests[string(name)] = q.String()
		}
		for _, pod := range n.Pods {
			view.Pods = append(view.Pods, name(pod))
		}
		rep.NewNodes = append(rep.NewNodes, view)
	}
	for _, b := range p.Bindings {
		rep.Bindings = append(rep.Bindings, BindingView{Pod: name(b.Pod), Node: b.Node})
	}
	for _, f := range p.Unschedulable {
		rep.Unschedulable = append(rep.Unschedulable, FailureView{Pod: name(f.Pod), Reason: f.Reason})
	}
	for _, refused := range r.Refused {
		rep.Refused = append(rep.Refused, RefusedView{File: refused.File, Document: refused.Document, Object: refused.Object, Error: refused.Error()})
	}
	rep.Summary = Summary{Impl: "tailor", Version: version, Pods: r.Pods, Scheduled: scheduled,
		Unschedulable: len(p.Unschedulable), Nodes: len(p.NewNodes), CostPerHour: round(p.Cost()),
		SolveSeconds: r.SolveSeconds, AllocBytes: r.AllocBytes}
	return rep
}

func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }

func costsView(c scheduling.CostSplit) CostsView {
	return CostsView{Instances: round(c.Instances), Volumes: round(c.Volumes), Addresses: round(c.Addresses), PerNode: round(c.PerNode)}
}

// workloadOf names the workload a pod belongs to, for people: the one it was
// made from in the manifests, else its controller (a ReplicaSet without its
// pod-template-hash: a Deployment's pods are named for the Deployment), else its
// generateName, else the pod itself; with its namespace outside the default one.
func workloadOf(pod *corev1.Pod, owners map[string]string) string {
	if name, ok := owners[pod.Namespace+"/"+pod.Name]; ok {
		return name
	}
	name := pod.Name
	if ref := metav1.GetControllerOf(pod); ref != nil {
		name = ref.Name
		if hash := pod.Labels["pod-template-hash"]; ref.Kind == "ReplicaSet" && hash != "" {
			name = strings.TrimSuffix(name, "-"+hash)
		}
	} else if pod.GenerateName != "" {
		name = strings.TrimSuffix(pod.GenerateName, "-")
	}
	if pod.Namespace != "" && pod.Namespace != metav1.NamespaceDefault {
		name = pod.Namespace + "/" + name
	}
	return name
}

// Objects are the plan's objects in print order: the summary, the lower bound,
// then one object per new node, binding, unschedulable pod, warning and refused
// input object, each keyed by what it is.
func (rep *Report) Objects() []any {
	out := []any{rep.Summary, map[string]lowerBoundView{"lower_bound": {CostPerHour: rep.LowerBound}}, map[string]CostsView{"costs": rep.Costs}}
	for _, n := range rep.NewNodes {
		out = append(out, map[string]NodeView{"new_node": n})
	}
	for _, b := range rep.Bindings {
		out = append(out, map[string]BindingView{"binding": b})
	}
	for _, f := range rep.Unschedulable {
		out = append(out, map[string]FailureView{"unschedulable": f})
	}
	for _, w := range rep.Warnings {
		out = append(out, map[string]string{"warning": w})
	}
	for _, r := range rep.Refused {
		out = append(out, map[string]RefusedView{"refused": r})
	}
	return out
}

// WriteJSON prints each object on a line of its own: the summary alone on the
// first.
func WriteJSON(w io.Writer, objects []any) error {
	enc := json.NewEncoder(w)
	for _, o := range objects {
		if err := enc.Encode(o); err != nil {
			return err
		}
	}
	return nil
}

// WriteYAML prints each object as a YAML document, with the same fields as
// WriteJSON (both marshal through the JSON tags).
func WriteYAML(w io.Writer, objects []any) error {
	for i, o := range objects {
		out, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(out); err != nil {
			return err
		}
	}
	return nil
}

// WriteTable prints the plan for people: the new nodes of a NodePool and
// instance type on one line, with their zones and capacity types, their price
// and the pods of each workload they take; the pods placed on existing nodes; the
// totals; and the pods that fit nowhere, those of a workload that fail for the
// same reason on one line. Each new node may launch as any of the instance types
// its pods and NodePool allow (-o json lists them); the table names the cheapest.
func (rep *Report) WriteTable(w io.Writer) error {
	s := rep.Summary
	if len(rep.NewNodes) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NEW NODES\tNODEPOOL\tZONE\tCAPACITY\t$/HOUR\tPODS")
		for _, g := range rep.nodeGroups() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.4f\t%s\n", times(g.instanceType, g.nodes), g.nodePool, g.zones.values(),
				g.capacityTypes.values(), g.price, g.pods.workloads())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if len(rep.Bindings) > 0 {
		var nodes []string
		perNode := map[string]*tally{}
		for _, b := range rep.Bindings {
			if perNode[b.Node] == nil {
				nodes = append(nodes, b.Node)
				perNode[b.Node] = &tally{}
			}
			perNode[b.Node].add(rep.workloads[b.Pod], 1)
		}
		slices.Sort(nodes)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EXISTING NODE\tPODS")
		for _, n := range nodes {
			fmt.Fprintf(tw, "%s\t%s\n", n, perNode[n].workloads())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	byType := map[string]int{}
	for _, n := range rep.NewNodes {
		byType[n.CapacityType]++
	}
	fmt.Fprintf(w, "%s: %d scheduled (%d on existing nodes), %d unschedulable.\n", plural(s.Pods, "pod"), s.Scheduled, len(rep.Bindings), s.Unschedulable)
	fmt.Fprintf(w, "%s (%d %s, %d %s) at $%.4f/hour; lower bound $%.4f/hour (no plan for these pods costs less). Solved in %.3fs.\n",
		plural(s.Nodes, "new node"), byType[v1.CapacityTypeSpot], v1.CapacityTypeSpot, byType[v1.CapacityTypeOnDemand], v1.CapacityTypeOnDemand,
		s.CostPerHour, rep.LowerBound, s.SolveSeconds)
	if c := rep.Costs; c.Volumes != 0 || c.Addresses != 0 || c.PerNode != 0 {
		fmt.Fprintf(w, "Per hour: instances $%.4f, volumes $%.4f, addresses $%.4f, per-node $%.4f.\n", c.Instances, c.Volumes, c.Addresses, c.PerNode)
	}
	if len(rep.Unschedulable) > 0 {
		fmt.Fprintln(w, "\nUNSCHEDULABLE")
		for _, g := range rep.failureGroups() {
			who := g.pods[0]
			if len(g.pods) > 1 {
				who = times(g.workload, len(g.pods))
			}
			fmt.Fprintf(w, "%s: %s\n", who, g.reason)
		}
	}
	if len(rep.Warnings) > 0 {
		fmt.Fprintln(w, "\nWARNINGS")
		for _, warning := range rep.Warnings {
			fmt.Fprintln(w, warning)
		}
	}
	return nil
}

// nodeGroup is the new nodes of one NodePool and instance type.
type nodeGroup struct {
	nodePool, instanceType string
	nodes                  int
	zones, capacityTypes   tally
	price                  float64
	pods                   tally // by workload
}

// nodeGroups gathers the new nodes by NodePool and instance type, in the order the
// plan first names each.
func (rep *Report) nodeGroups() []*nodeGroup {
	var groups []*nodeGroup
	index := map[[2]string]*nodeGroup{}
	for _, n := range rep.NewNodes {
		key := [2]string{n.NodePool, n.InstanceType}
		g := index[key]
		if g == nil {
			g = &nodeGroup{nodePool: n.NodePool, instanceType: n.InstanceType}
			index[key] = g
			groups = append(groups, g)
		}
		g.nodes++
		g.zones.add(n.Zone, 1)
		g.capacityTypes.add(n.CapacityType, 1)
		g.price += n.PricePerHour
		for _, p := range n.Pods {
			g.pods.add(rep.workloads[p], 1)
		}
	}
	for _, g := range groups {
		slices.SortFunc(g.zones, func(a, b count) int { return strings.Compare(a.name, b.name) })
		slices.SortFunc(g.capacityTypes, func(a, b count) int { return strings.Compare(a.name, b.name) })
	}
	return groups
}

// failureGroup is the unschedulable pods of one workload that fail for one reason.
type failureGroup struct {
	workload, reason string
	pods             []string
}

func (rep *Report) failureGroups() []*failureGroup {
	var groups []*failureGroup
	index := map[[2]string]*failureGroup{}
	for _, f := range rep.Unschedulable {
		key := [2]string{rep.workloads[f.Pod], f.Reason}
		g := index[key]
		if g == nil {
			g = &failureGroup{workload: key[0], reason: f.Reason}
			index[key] = g
			groups = append(groups, g)
		}
		g.pods = append(g.pods, f.Pod)
	}
	return groups
}

// count is how many of a thing.
type count struct {
	name string
	n    int
}

// tally counts things in the order first met.
type tally []count

func (t *tally) add(name string, n int) {
	for i := range *t {
		if (*t)[i].name == name {
			(*t)[i].n += n
			return
		}
	}
	*t = append(*t, count{name, n})
}

// String renders a tally as "a ×3, b ×2, c" in its order.
func (t tally) String() string {
	parts := make([]string, len(t))
	for i, c := range t {
		parts[i] = times(c.name, c.n)
	}
	return strings.Join(parts, ", ")
}

// values renders a tally of the nodes' values (zones, capacity types): the value
// alone when they all have one, else how many have each.
func (t tally) values() string {
	if len(t) == 1 {
		return t[0].name
	}
	return t.String()
}

// maxWorkloads is how many workloads a table cell names before it sums up the rest.
const maxWorkloads = 6

// workloads renders a tally of pods by workload, most first, naming at most
// maxWorkloads of them.
func (t tally) workloads() string {
	sorted := slices.Clone(t)
	slices.SortStableFunc(sorted, func(a, b count) int {
		if c := cmp.Compare(b.n, a.n); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	if len(sorted) <= maxWorkloads {
		return sorted.String()
	}
	rest := 0
	for _, c := range sorted[maxWorkloads:] {
		rest += c.n
	}
	return fmt.Sprintf("%s and %s of %s", sorted[:maxWorkloads].String(), plural(rest, "more pod"), plural(len(sorted)-maxWorkloads, "other workload"))
}

// times renders "name ×n", or the name alone for one.
func times(name string, n int) string {
	if n == 1 {
		return name
	}
	return fmt.Sprintf("%s ×%d", name, n)
}

// plural renders "1 pod", "2 pods".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
