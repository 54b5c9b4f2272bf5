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

// NodeView is a new node as printed.
type NodeView struct {
	Name         string            `json:"name"`
	NodePool     string            `json:"nodePool"`
	InstanceType string            `json:"instanceType"`
	Zone         string            `json:"zone"`
	CapacityType string            `json:"capacityType"`
	PricePerHour float64           `json:"pricePerHour"`
	Options      []string          `json:"instanceTypeOptions"`
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

// Report is the whole plan as printed by --output yaml.
type Report struct {
	Summary       Summary       `json:"summary"`
	LowerBound    float64       `json:"lowerBoundPerHour"`
	NewNodes      []NodeView    `json:"newNodes"`
	Bindings      []BindingView `json:"existingNodeBindings,omitempty"`
	Unschedulable []FailureView `json:"unschedulable,omitempty"`
	// Warnings name input the plan left out, such as a DaemonSet it cannot read.
	Warnings []string `json:"warnings,omitempty"`
}

// NewReport shapes a result for printing.
func NewReport(r *Result, version string) *Report {
	p := r.Plan
	rep := &Report{LowerBound: round(r.LowerBound), Warnings: p.Warnings}
	scheduled := len(p.Bindings)
	for _, n := range p.NewNodes {
		scheduled += len(n.Pods)
		view := NodeView{Name: n.Name, NodePool: n.NodePool, InstanceType: n.InstanceType.Name, Zone: n.Offering.Zone,
			CapacityType: n.Offering.CapacityType, PricePerHour: n.Offering.Price, Requests: map[string]string{}}
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

// WriteJSON prints the summary alone on the first line, then one line per new node,
// binding, unschedulable pod and warning.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	if err := enc.Encode(rep.Summary); err != nil {
		return err
	}
	for _, n := range rep.NewNodes {
		if err := enc.Encode(map[string]NodeView{"newNode": n}); err != nil {
			return err
		}
	}
	for _, b := range rep.Bindings {
		if err := enc.Encode(map[string]BindingView{"binding": b}); err != nil {
			return err
		}
	}
	for _, f := range rep.Unschedulable {
		if err := enc.Encode(map[string]FailureView{"unschedulable": f}); err != nil {
			return err
		}
	}
	for _, warning := range rep.Warnings {
		if err := enc.Encode(map[string]string{"warning": warning}); err != nil {
			return err
		}
	}
	return nil
}

// WriteYAML prints the whole report.
func (rep *Report) WriteYAML(w io.Writer) error {
	out, err := yaml.Marshal(rep)
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
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
