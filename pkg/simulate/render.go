package simulate

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	v1 "github.com/nodetailor/tailor/api/v1"
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

// The machine-readable output (tailor simulate --output json|yaml). Field names are
// snake_case throughout, as the summary line's always were; docs/cli.md documents
// every field.

// NodeView is a new node as printed.
type NodeView struct {
	Name         string            `json:"name"`
	NodePool     string            `json:"node_pool"`
	InstanceType string            `json:"instance_type"`
	Zone         string            `json:"zone"`
	CapacityType string            `json:"capacity_type"`
	PricePerHour float64           `json:"price_per_hour"`
	Options      []string          `json:"instance_type_options"`
	Requests     map[string]string `json:"requests"`
	Pods         []string          `json:"pods"`
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

// lowerBoundView is a price no plan for the new nodes' pods can beat.
type lowerBoundView struct {
	CostPerHour float64 `json:"cost_per_hour"`
}

// Report is the whole plan.
type Report struct {
	Summary       Summary
	LowerBound    float64
	NewNodes      []NodeView
	Bindings      []BindingView
	Unschedulable []FailureView
	// Warnings name input the plan left out, such as a DaemonSet it cannot read.
	Warnings []string
}

// NewReport shapes a result for printing.
func NewReport(r *Result, version string) *Report {
	p := r.Plan
	rep := &Report{LowerBound: round(r.LowerBound), Warnings: p.Warnings}
	scheduled := len(p.Bindings)
	for _, n := range p.NewNodes {
		scheduled += len(n.Pods)
		view := NodeView{Name: n.Name, NodePool: n.NodePool, InstanceType: n.InstanceType.Name, Zone: n.Offering.Zone,
			CapacityType: n.Offering.CapacityType, PricePerHour: n.Offering.Price, Requests: map[string]string{},
			Options: []string{}, Pods: []string{}}
		for _, it := range n.InstanceTypes {
			view.Options = append(view.Options, it.Name)
		}
		for name, q := range n.Requests {
			view.Requests[string(name)] = q.String()
		}
		for _, pod := range n.Pods {
			view.Pods = append(view.Pods, pod.Namespace+"/"+pod.Name)
		}
		rep.NewNodes = append(rep.NewNodes, view)
	}
	for _, b := range p.Bindings {
		rep.Bindings = append(rep.Bindings, BindingView{Pod: b.Pod.Namespace + "/" + b.Pod.Name, Node: b.Node})
	}
	for _, f := range p.Unschedulable {
		rep.Unschedulable = append(rep.Unschedulable, FailureView{Pod: f.Pod.Namespace + "/" + f.Pod.Name, Reason: f.Reason})
	}
	rep.Summary = Summary{Impl: "tailor", Version: version, Pods: r.Pods, Scheduled: scheduled,
		Unschedulable: len(p.Unschedulable), Nodes: len(p.NewNodes), CostPerHour: round(p.Cost()),
		SolveSeconds: r.SolveSeconds, AllocBytes: r.AllocBytes}
	return rep
}

func round(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// Objects are the plan's objects in print order: the summary, the lower bound,
// then one object per new node, binding, unschedulable pod and warning, each keyed
// by what it is.
func (rep *Report) Objects() []any {
	out := []any{rep.Summary, map[string]lowerBoundView{"lower_bound": {CostPerHour: rep.LowerBound}}}
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

// WriteTable prints the plan for people.
func (rep *Report) WriteTable(w io.Writer) error {
	s := rep.Summary
	if len(rep.NewNodes) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NEW NODE\tNODEPOOL\tINSTANCE TYPE\tZONE\tCAPACITY\t$/HOUR\tPODS\tOPTIONS")
		for _, n := range rep.NewNodes {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.4f\t%d\t%d\n", n.Name, n.NodePool, n.InstanceType, n.Zone, n.CapacityType, n.PricePerHour, len(n.Pods), len(n.Options))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if len(rep.Bindings) > 0 {
		perNode := map[string]int{}
		for _, b := range rep.Bindings {
			perNode[b.Node]++
		}
		names := make([]string, 0, len(perNode))
		for n := range perNode {
			names = append(names, n)
		}
		sort.Strings(names)
		parts := make([]string, len(names))
		for i, n := range names {
			parts[i] = fmt.Sprintf("%s: %d", n, perNode[n])
		}
		fmt.Fprintf(w, "On existing nodes: %s\n\n", strings.Join(parts, ", "))
	}
	byType := map[string]int{}
	for _, n := range rep.NewNodes {
		byType[n.CapacityType]++
	}
	fmt.Fprintf(w, "%d pods: %d scheduled (%d on existing nodes), %d unschedulable.\n", s.Pods, s.Scheduled, len(rep.Bindings), s.Unschedulable)
	fmt.Fprintf(w, "%d new nodes (%d %s, %d %s) at $%.4f/hour; lower bound $%.4f/hour. Solved in %.3fs.\n",
		s.Nodes, byType[v1.CapacityTypeSpot], v1.CapacityTypeSpot, byType[v1.CapacityTypeOnDemand], v1.CapacityTypeOnDemand,
		s.CostPerHour, rep.LowerBound, s.SolveSeconds)
	if len(rep.Unschedulable) > 0 {
		fmt.Fprintln(w, "\nUNSCHEDULABLE")
		for _, f := range rep.Unschedulable {
			fmt.Fprintf(w, "%s: %s\n", f.Pod, f.Reason)
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
