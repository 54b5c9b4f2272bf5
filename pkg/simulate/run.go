package simulate

import (
	"runtime"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// Result is a plan with what it took to make it.
type Result struct {
	Plan *scheduling.Plan
	// Pods is the number of pending pods planned for.
	Pods int
	// SolveSeconds and AllocBytes cover the solve alone, not reading the input.
	SolveSeconds float64
	AllocBytes   uint64
	// LowerBound is a price no plan for the new nodes' pods can beat.
	LowerBound float64
	// Owners and Refused are the workload's, for the report: which workload each
	// pod came from, and the objects left out.
	Owners  map[string]string
	Refused []Refusal
}

// Input turns a workload into the scheduling engine's input, as the controller
// would see the same objects (state.Build); every NodePool gets the same catalog of
// instance types.
func Input(w *Workload, types []*scheduling.InstanceType) *scheduling.Input {
	return state.Build(w.Objects(), func(*v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		state.BuildOptions{Offline: true, NodeCost: w.NodeCosts(Region(types))}).Input
}

// Objects are the workload's objects as a cluster would list them.
func (w *Workload) Objects() *state.Objects {
	pods := slices.Clone(w.Pods)
	for _, n := range w.Nodes {
		pods = append(pods, w.Bound[n.Name]...)
	}
	return &state.Objects{Pods: pods, Nodes: w.Nodes, NodePools: w.NodePools, DaemonSets: w.DaemonSets,
		PersistentVolumeClaims: w.PersistentVolumeClaims, PersistentVolumes: w.PersistentVolumes,
		StorageClasses: w.StorageClasses, CSINodes: w.CSINodes, Namespaces: w.Namespaces, PodDisruptionBudgets: w.PodDisruptionBudgets,
		CapacityBuffers: w.CapacityBuffers, PodTemplates: w.PodTemplates, Deployments: w.Deployments, ReplicaSets: w.ReplicaSets,
		StatefulSets: w.StatefulSets}
}

// Buffers are the placeholder pods of the workload's CapacityBuffers, as the
// controller plans them.
func Buffers(w *Workload) []*corev1.Pod {
	return state.BufferPods(state.ResolveBuffers(w.Objects()))
}

// Run solves the workload with the engine's options.
func Run(w *Workload, types []*scheduling.InstanceType, opts scheduling.Options) (*Result, error) {
	in := Input(w, types)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	buffers := Buffers(w)
	plan, err := solveWithBuffers(in, buffers, opts)
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(plan.Unschedulable, func(a, b scheduling.Failure) int {
		return strings.Compare(a.Pod.Namespace+"/"+a.Pod.Name, b.Pod.Namespace+"/"+b.Pod.Name)
	})
	// The buffers' placeholders are among the plan's pods, under the workload
	// "buffer NAME".
	return &Result{Plan: plan, Pods: len(in.Pods) + len(buffers), SolveSeconds: elapsed.Seconds(),
		AllocBytes: after.TotalAlloc - before.TotalAlloc, LowerBound: scheduling.LowerBound(in.NodePools, plan),
		Owners: w.Owners, Refused: w.Refused}, nil
}

// solveWithBuffers plans the pods together with the CapacityBuffers'
// placeholders (after them, as the controller does), and keeps that plan only if
// it places every pod that a plan without placeholders places: a buffer never
// takes a NodePool's headroom from a pod.
func solveWithBuffers(in *scheduling.Input, buffers []*corev1.Pod, opts scheduling.Options) (*scheduling.Plan, error) {
	if len(buffers) == 0 {
		return scheduling.Solve(in, opts)
	}
	with := *in
	with.Pods = append(slices.Clone(in.Pods), buffers...)
	plan, err := scheduling.Solve(&with, opts)
	if err != nil {
		return nil, err
	}
	real := func(f scheduling.Failure) bool { return !state.IsBufferPod(f.Pod) }
	if !slices.ContainsFunc(plan.Unschedulable, real) {
		return plan, nil
	}
	alone, err := scheduling.Solve(in, opts)
	if err != nil {
		return nil, err
	}
	left := map[string]bool{}
	for _, f := range alone.Unschedulable {
		left[f.Pod.Namespace+"/"+f.Pod.Name] = true
	}
	if slices.ContainsFunc(plan.Unschedulable, func(f scheduling.Failure) bool { return real(f) && !left[f.Pod.Namespace+"/"+f.Pod.Name] }) {
		return alone, nil
	}
	return plan, nil
}
