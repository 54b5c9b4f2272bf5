package simulate

import (
	"runtime"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetailor/tailor/pkg/scheduling"
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
}

// Input turns a workload into the scheduling engine's input; every NodePool gets
// the same catalog of instance types.
func Input(w *Workload, types []*scheduling.InstanceType) *scheduling.Input {
	in := &scheduling.Input{
		Pods:                   w.Pods,
		PersistentVolumeClaims: w.PersistentVolumeClaims,
		PersistentVolumes:      w.PersistentVolumes,
		StorageClasses:         w.StorageClasses,
		Namespaces:             w.Namespaces,
	}
	for _, np := range w.NodePools {
		in.NodePools = append(in.NodePools, &scheduling.NodePool{NodePool: np, InstanceTypes: types})
	}
	for _, n := range w.Nodes {
		in.Nodes = append(in.Nodes, &scheduling.Node{Node: n, Pods: w.Bound[n.Name]})
	}
	for _, ds := range w.DaemonSets {
		p := &corev1.Pod{ObjectMeta: *ds.Spec.Template.ObjectMeta.DeepCopy(), Spec: *ds.Spec.Template.Spec.DeepCopy()}
		p.Name, p.Namespace = ds.Name, ds.Namespace
		in.DaemonSets = append(in.DaemonSets, p)
	}
	return in
}

// Run solves the workload.
func Run(w *Workload, types []*scheduling.InstanceType) (*Result, error) {
	in := Input(w, types)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	plan, err := scheduling.Solve(in, scheduling.Options{})
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(plan.Unschedulable, func(a, b scheduling.Failure) int {
		return strings.Compare(a.Pod.Namespace+"/"+a.Pod.Name, b.Pod.Namespace+"/"+b.Pod.Name)
	})
	return &Result{Plan: plan, Pods: len(w.Pods), SolveSeconds: elapsed.Seconds(),
		AllocBytes: after.TotalAlloc - before.TotalAlloc, LowerBound: scheduling.LowerBound(in.NodePools, plan)}, nil
}
