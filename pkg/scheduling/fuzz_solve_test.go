package scheduling_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/nodetailor/tailor/api/v1"
	. "github.com/nodetailor/tailor/pkg/scheduling"
)

// FuzzSolve builds a random cluster from the seed — NodePools with requirements,
// taints and limits; existing nodes with pods; pending pods with selectors,
// tolerations, spread, affinity, anti-affinity and host ports — and checks the plan
// with checkPlan: nothing overcommitted, every constraint and limit kept.
func FuzzSolve(f *testing.F) {
	for seed := range uint64(8) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		in := randomInput(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
		plan, err := Solve(in, Options{})
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, in, plan)
	})
}

func randomInput(rng *rand.Rand) *Input {
	zones := []string{"zone-a", "zone-b", "zone-c"}
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	var types []*InstanceType
	for i := range 4 + rng.IntN(12) {
		cpu := int64(1 << rng.IntN(5))
		mem := cpu * int64(1+rng.IntN(8))
		arch := pick([]string{"amd64", "arm64"})
		name := fmt.Sprintf("t%d-%s-%dx%d", i, arch, cpu, mem)
		it := &InstanceType{Name: name, Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(mem<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(4+int64(rng.IntN(30)), resource.DecimalSI),
		}}
		if rng.IntN(4) == 0 {
			it.Capacity["nvidia.com/gpu"] = *resource.NewQuantity(int64(1+rng.IntN(4)), resource.DecimalSI)
		}
		var typeZones []string
		for _, z := range zones {
			if rng.IntN(3) > 0 {
				typeZones = append(typeZones, z)
				price := float64(cpu)*0.03 + float64(mem)*0.004
				it.Offerings = append(it.Offerings,
					Offering{Zone: z, CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: rng.IntN(8) > 0},
					Offering{Zone: z, CapacityType: v1.CapacityTypeSpot, Price: price * (0.3 + 0.4*rng.Float64()), Available: rng.IntN(4) > 0})
			}
		}
		if len(typeZones) == 0 {
			continue
		}
		it.Requirements = NewRequirements(
			MustRequirement(v1.LabelInstanceType, v1.NodeSelectorOpIn, name),
			MustRequirement(v1.LabelArch, v1.NodeSelectorOpIn, arch),
			MustRequirement(v1.LabelZone, v1.NodeSelectorOpIn, typeZones...),
			MustRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand),
			MustRequirement("example.com/cpu", v1.NodeSelectorOpIn, fmt.Sprint(cpu)),
		)
		types = append(types, it)
	}
	in := &Input{}
	for i := range 1 + rng.IntN(2) {
		var opts []poolOption
		if rng.IntN(3) == 0 {
			opts = append(opts, requirement(v1.LabelArch, v1.NodeSelectorOpIn, pick([]string{"amd64", "arm64"})))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, requirement(v1.LabelZone, v1.NodeSelectorOpNotIn, pick(zones)))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, requirement("example.com/cpu", v1.NodeSelectorOpGt, "1"))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, taint("dedicated", "x", corev1.TaintEffectNoSchedule))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, limit(corev1.ResourceCPU, fmt.Sprint(8+rng.IntN(64))))
		}
		if rng.IntN(4) == 0 {
			opts = append(opts, limit("nodes", fmt.Sprint(1+rng.IntN(6))))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, templateLabel("team", pick([]string{"a", "b"})))
		}
		opts = append(opts, weight(int32(1+rng.IntN(3))))
		in.NodePools = append(in.NodePools, pool(makeNodePool(fmt.Sprintf("pool-%d", i), opts...), types))
	}
	apps := []string{"web", "db", "cache"}
	randomPod := func(name string) *corev1.Pod {
		app := pick(apps)
		cpu := pick([]string{"100m", "250m", "500m", "1", "1500m", "3"})
		mem := pick([]string{"128Mi", "512Mi", "1Gi", "3Gi"})
		opts := []podOption{withLabels("app", app)}
		topology := rng.IntN(8)
		// Pods of one spread share their node affinity: a pod whose affinity admits
		// fewer domains may legally skew the spread as others see it, and the
		// final-state check could not tell.
		selector := rng.IntN(10)
		if topology == 0 || topology == 1 || topology == 5 {
			selector = -1
		}
		switch selector {
		case 0:
			opts = append(opts, withNodeSelector(v1.LabelArch, pick([]string{"amd64", "arm64"})))
		case 1:
			opts = append(opts, withNodeSelector(v1.LabelZone, pick(zones)))
		case 2:
			opts = append(opts, withNodeSelector("team", pick([]string{"a", "b"})))
		case 3:
			opts = append(opts, withNodeAffinity([]corev1.NodeSelectorRequirement{{Key: "example.com/cpu", Operator: corev1.NodeSelectorOpGt, Values: []string{"2"}}}))
		}
		if rng.IntN(3) == 0 {
			opts = append(opts, withToleration("dedicated", "x", corev1.TaintEffectNoSchedule))
		}
		sel := map[string]string{"app": app}
		// A spread's pods, and only they, carry a label naming the constraint: pods
		// that match a spread without having it may skew it, in the kube-scheduler
		// too, and the final-state check could not tell.
		spreadSel := func(variant string) map[string]string { return map[string]string{"spread": app + "-" + variant} }
		switch topology {
		case 0:
			skew := int32(1 + rng.IntN(2))
			v := fmt.Sprintf("zone%d", skew)
			opts = append(opts, withLabels("spread", app+"-"+v), withSpread(v1.LabelZone, skew, corev1.DoNotSchedule, spreadSel(v)))
		case 1:
			opts = append(opts, withLabels("spread", app+"-host"), withSpread(v1.LabelHostname, 1, corev1.DoNotSchedule, spreadSel("host")))
		case 2:
			opts = append(opts, withPodAntiAffinity(v1.LabelHostname, sel))
		case 3:
			opts = append(opts, withPodAntiAffinity(v1.LabelZone, sel))
		case 4:
			opts = append(opts, withPodAffinity(v1.LabelZone, sel))
		case 5:
			opts = append(opts, withLabels("spread", app+"-soft"), withSpread(v1.LabelZone, 1, corev1.ScheduleAnyway, spreadSel("soft")))
		}
		if rng.IntN(8) == 0 {
			opts = append(opts, withHostPort(int32(8000+rng.IntN(3))))
		}
		if rng.IntN(10) == 0 {
			opts = append(opts, withRequest("nvidia.com/gpu", "1"))
		}
		return makePod(name, cpu, mem, opts...)
	}
	for i := range rng.IntN(4) {
		name := fmt.Sprintf("existing-%d", i)
		labels := map[string]string{v1.LabelZone: pick(zones), v1.LabelArch: pick([]string{"amd64", "arm64"})}
		if rng.IntN(2) == 0 {
			labels[v1.NodePoolLabelKey] = in.NodePools[0].NodePool.Name
		}
		var bound []*corev1.Pod
		for j := range rng.IntN(3) {
			p := randomPod(fmt.Sprintf("%s-pod-%d", name, j))
			p.Spec.Affinity, p.Spec.TopologySpreadConstraints = nil, nil // bound pods got there before
			p.Spec.Containers[0].Ports = nil
			delete(p.Spec.Containers[0].Resources.Requests, "nvidia.com/gpu")
			delete(p.Labels, "spread")
			bound = append(bound, p)
		}
		n := existingNode(name, fmt.Sprint(4+rng.IntN(8)), fmt.Sprintf("%dGi", 8+rng.IntN(16)), labels, bound...)
		in.Nodes = append(in.Nodes, n)
	}
	for i := range 1 + rng.IntN(40) {
		in.Pods = append(in.Pods, randomPod(fmt.Sprintf("pod-%d", i)))
	}
	return in
}
