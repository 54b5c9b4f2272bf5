// Package schedtest generates workloads and instance types for tests and benchmarks
// of the scheduling engine: the synthetic catalog and pod mixes of Karpenter's
// published scheduling benchmark, so figures compare side by side.
package schedtest

import (
	"fmt"
	"math/rand/v2"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Zones of the synthetic instance types.
var Zones = []string{"zone-a", "zone-b", "zone-c"}

// SyntheticTypes are the instance types of Karpenter's scheduling benchmark: type i
// has i+1 vCPU, 2(i+1) GiB and 10(i+1) pods, with spot and on-demand offerings in
// three zones, priced in proportion to its resources.
func SyntheticTypes(n int) []*scheduling.InstanceType {
	out := make([]*scheduling.InstanceType, n)
	for i := range out {
		cpu, mem := int64(i+1), int64(2*(i+1))
		name := fmt.Sprintf("fake-it-%d", i)
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(mem<<30, resource.BinarySI),
			corev1.ResourcePods:   *resource.NewQuantity(10*(cpu), resource.DecimalSI),
		}
		price := 0.025*float64(cpu) + 0.001*float64(mem)
		it := &scheduling.InstanceType{Name: name, Capacity: capacity, Overhead: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("10Mi")}}
		for _, z := range Zones {
			it.Offerings = append(it.Offerings,
				scheduling.Offering{Zone: z, CapacityType: v1.CapacityTypeSpot, Price: price * 0.7, Available: true},
				scheduling.Offering{Zone: z, CapacityType: v1.CapacityTypeOnDemand, Price: price, Available: true})
		}
		it.Requirements = scheduling.NewRequirements(
			scheduling.MustRequirement(v1.LabelInstanceType, v1.NodeSelectorOpIn, name),
			scheduling.MustRequirement(v1.LabelArch, v1.NodeSelectorOpIn, "amd64"),
			scheduling.MustRequirement(v1.LabelOS, v1.NodeSelectorOpIn, "linux"),
			scheduling.MustRequirement(v1.LabelZone, v1.NodeSelectorOpIn, Zones...),
			scheduling.MustRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand),
			scheduling.MustRequirement("example.com/cpu", v1.NodeSelectorOpIn, strconv.FormatInt(cpu, 10)),
		)
		out[i] = it
	}
	return out
}

// DiversePods is the benchmark's "diverse" mix: a fifth each of plain pods, zonal
// spread (maxSkew 1, DoNotSchedule), hostname spread, zonal self-affinity and
// hostname anti-affinity, with cpu from {100m, 250m, 500m, 1, 1.5} and memory from
// 100Mi to 4Gi.
func DiversePods(n int, seed uint64) []*corev1.Pod {
	rng := rand.New(rand.NewPCG(seed, 1))
	cpus := []string{"100m", "250m", "500m", "1", "1500m"}
	mems := []string{"100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi"}
	out := make([]*corev1.Pod, 0, n)
	for i := range n {
		cpu, mem := cpus[rng.IntN(len(cpus))], mems[rng.IntN(len(mems))]
		name := fmt.Sprintf("pod-%d", i)
		group := fmt.Sprintf("g%d", rng.IntN(4))
		switch i % 5 {
		case 0:
			out = append(out, pod(name, cpu, mem, labels("app", "plain-"+group)))
		case 1:
			sel := map[string]string{"app": "zspread-" + group}
			out = append(out, pod(name, cpu, mem, labels("app", "zspread-"+group), spread(v1.LabelZone, 1, corev1.DoNotSchedule, sel)))
		case 2:
			sel := map[string]string{"app": "hspread-" + group}
			out = append(out, pod(name, cpu, mem, labels("app", "hspread-"+group), spread(v1.LabelHostname, 1, corev1.DoNotSchedule, sel)))
		case 3:
			sel := map[string]string{"app": "affinity-" + group}
			out = append(out, pod(name, cpu, mem, labels("app", "affinity-"+group), podAffinity(v1.LabelZone, sel)))
		case 4:
			sel := map[string]string{"app": "anti"}
			out = append(out, pod(name, cpu, mem, labels("app", "anti"), podAntiAffinity(v1.LabelHostname, sel)))
		}
	}
	return out
}

// PlainPods have random sizes from the same sets and no constraints.
func PlainPods(n int, seed uint64) []*corev1.Pod {
	rng := rand.New(rand.NewPCG(seed, 2))
	cpus := []string{"100m", "250m", "500m", "1", "1500m"}
	mems := []string{"100Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi"}
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = pod(fmt.Sprintf("pod-%d", i), cpus[rng.IntN(len(cpus))], mems[rng.IntN(len(mems))], labels("app", "plain"))
	}
	return out
}

func pod(name, cpu, memory string, opts ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func labels(k, v string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Labels[k] = v } }

func spread(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, selector map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when,
			LabelSelector: &metav1.LabelSelector{MatchLabels: selector}})
	}
}

func podAffinity(key string, selector map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: selector}}}}}
	}
}

func podAntiAffinity(key string, selector map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: selector}}}}}
	}
}
