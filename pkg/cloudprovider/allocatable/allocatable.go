// Package allocatable works out what a node keeps for itself: from an instance type's
// vCPUs, memory, ENI-limited pod count and root volume, and the kubelet's settings,
// the node's capacity and its overhead (kube-reserved, system-reserved and the
// eviction thresholds), so that allocatable = capacity − overhead is what the node
// reports. EKS is the model a real EKS node follows, with the numbers Karpenter's
// AWS provider uses; Kwok is the flat reservation of Karpenter's kwok provider, for
// plans compared with that provider's.
package allocatable

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Shape is what the models need to know of an instance type.
type Shape struct {
	// CPU is the type's vCPUs.
	CPU resource.Quantity
	// Memory is the type's memory as listed (EC2's MemoryInfo.SizeInMiB).
	Memory resource.Quantity
	// Pods is the most pods its network allows: ENIs × (IPv4 addresses per ENI − 1) + 2
	// on AWS. Zero means not limited, 110 as the kubelet's default.
	Pods int64
	// RootVolume is the size of the volume the kubelet's root directory lives on;
	// zero means DefaultRootVolume.
	RootVolume resource.Quantity
	// Arch is the CPU architecture (amd64, arm64).
	Arch string
}

// Node is a node of an instance type as the kubelet reports it.
type Node struct {
	// Capacity is what the node reports as its capacity.
	Capacity corev1.ResourceList
	// Overhead is what it keeps back: kube-reserved, system-reserved and the hard
	// eviction thresholds, summed per resource.
	Overhead corev1.ResourceList
}

// Allocatable is capacity less overhead, never below zero (the kubelet clamps it too).
func (n Node) Allocatable() corev1.ResourceList {
	out := n.Capacity.DeepCopy()
	for name, q := range n.Overhead {
		have, ok := out[name]
		if !ok {
			continue
		}
		have.Sub(q)
		if have.Sign() < 0 {
			have = *resource.NewQuantity(0, have.Format)
		}
		out[name] = have
	}
	return out
}

// Model derives a node from an instance type's shape.
type Model interface {
	Node(Shape) (Node, error)
}

// Kwok is the overhead of Karpenter's kwok provider: every node keeps back 100m cpu
// and 10Mi memory, and reports its type's resources as its capacity.
type Kwok struct{}

// Node is the shape's resources as capacity, less kwok's flat reservation.
func (Kwok) Node(s Shape) (Node, error) {
	capacity := corev1.ResourceList{corev1.ResourceCPU: s.CPU.DeepCopy(), corev1.ResourceMemory: s.Memory.DeepCopy(),
		corev1.ResourcePods: *resource.NewQuantity(podsOrDefault(s.Pods), resource.DecimalSI)}
	if !s.RootVolume.IsZero() {
		capacity[corev1.ResourceEphemeralStorage] = s.RootVolume.DeepCopy()
	}
	return Node{Capacity: capacity, Overhead: corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(100, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(10*mebi, resource.BinarySI),
	}}, nil
}

const (
	mebi = 1 << 20

	// DefaultVMMemoryOverheadPercent is the share of a type's memory the hypervisor
	// and firmware keep from the guest, as Karpenter's VM_MEMORY_OVERHEAD_PERCENT.
	DefaultVMMemoryOverheadPercent = 0.075
	// DefaultPods is the kubelet's maxPods when the network does not limit it.
	DefaultPods = 110
	// gravitonCMA is the contiguous memory the kernel reserves on Graviton (arm64)
	// instances, which the guest never sees.
	gravitonCMA = 64 * mebi
)

// DefaultRootVolume is the root volume of an EKS node that no block device mapping
// sizes: 20Gi.
var DefaultRootVolume = resource.MustParse("20Gi")

// EKS is the model of an EKS node (AL2023, as Karpenter's AWS provider computes it):
//   - memory capacity is the type's memory (less 64Mi of CMA on arm64) less
//     VMMemoryOverheadPercent of it, rounded up to a whole MiB;
//   - pods is the ENI limit, or kubelet.maxPods, and at most podsPerCore × vCPUs;
//   - kube-reserved: memory 11Mi × pods + 255Mi; cpu 6% of the first core, 1% of
//     the second, 0.5% of the third and fourth, 0.25% of each further core;
//     ephemeral-storage 1Gi;
//   - system-reserved: none;
//   - eviction: memory.available 100Mi, nodefs.available 10% (of capacity); each
//     signal given in evictionHard replaces its default (evictionSoft takes no
//     room: the kubelet subtracts only the hard thresholds);
//   - ephemeral-storage capacity is the root volume.
//
// The kubelet block overrides each of these as an EC2NodeClass's kubelet does.
type EKS struct {
	// VMMemoryOverheadPercent is a share (0.075 is 7.5%), not a percentage.
	VMMemoryOverheadPercent float64
	Kubelet                 Kubelet
}

// DefaultEKS is the EKS model with Karpenter's defaults and no kubelet overrides.
func DefaultEKS() EKS { return EKS{VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent} }

// Kubelet holds the kubelet settings that decide a node's allocatable, in the form
// of an EC2NodeClass's spec.kubelet: quantities as strings, eviction thresholds as a
// quantity or a percentage of capacity.
type Kubelet struct {
	MaxPods        *int32
	PodsPerCore    *int32
	SystemReserved map[string]string
	KubeReserved   map[string]string
	EvictionHard   map[string]string
	EvictionSoft   map[string]string
}

// The eviction signals that take room from a resource the scheduler counts.
const (
	signalMemory = "memory.available"
	signalNodeFS = "nodefs.available"
)

// Node computes the node of an instance type.
func (m EKS) Node(s Shape) (Node, error) {
	if m.VMMemoryOverheadPercent < 0 || m.VMMemoryOverheadPercent >= 1 {
		return Node{}, fmt.Errorf("VM memory overhead %v: want a share in [0, 1)", m.VMMemoryOverheadPercent)
	}
	memory := s.Memory.Value()
	if s.Arch == "arm64" {
		memory -= gravitonCMA
	}
	memory -= int64(math.Ceil(float64(memory)*m.VMMemoryOverheadPercent/mebi)) * mebi
	memory = max(memory, 0)
	storage := DefaultRootVolume.DeepCopy()
	if !s.RootVolume.IsZero() {
		storage = s.RootVolume.DeepCopy()
	}
	pods := m.pods(s)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              s.CPU.DeepCopy(),
		corev1.ResourceMemory:           *resource.NewQuantity(memory, resource.BinarySI),
		corev1.ResourceEphemeralStorage: storage,
		corev1.ResourcePods:             *resource.NewQuantity(pods, resource.DecimalSI),
	}

	kubeReserved := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(reservedCPU(s.CPU.MilliValue()), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity((11*pods+255)*mebi, resource.BinarySI),
		corev1.ResourceEphemeralStorage: resource.MustParse("1Gi"),
	}
	if err := override(kubeReserved, m.Kubelet.KubeReserved, "kubelet.kubeReserved"); err != nil {
		return Node{}, err
	}
	systemReserved := corev1.ResourceList{}
	if err := override(systemReserved, m.Kubelet.SystemReserved, "kubelet.systemReserved"); err != nil {
		return Node{}, err
	}
	eviction, err := m.eviction(capacity[corev1.ResourceMemory], storage)
	if err != nil {
		return Node{}, err
	}
	overhead := corev1.ResourceList{}
	for _, list := range []corev1.ResourceList{kubeReserved, systemReserved, eviction} {
		for name, q := range list {
			sum, ok := overhead[name]
			if !ok {
				overhead[name] = q.DeepCopy()
				continue
			}
			sum.Add(q)
			overhead[name] = sum
		}
	}
	return Node{Capacity: capacity, Overhead: overhead}, nil
}

func (m EKS) pods(s Shape) int64 {
	pods := podsOrDefault(s.Pods)
	if m.Kubelet.MaxPods != nil {
		pods = int64(*m.Kubelet.MaxPods)
	}
	if ppc := m.Kubelet.PodsPerCore; ppc != nil && *ppc > 0 {
		pods = min(pods, int64(*ppc)*s.CPU.Value())
	}
	return max(pods, 0)
}

func podsOrDefault(pods int64) int64 {
	if pods <= 0 {
		return DefaultPods
	}
	return pods
}

// reservedCPU is kube-reserved cpu in millicores for a node of milli millicores:
// 6% of the first core, 1% of the second, 0.5% of the next two, 0.25% of the rest,
// each band rounded down to a millicore.
func reservedCPU(milli int64) int64 {
	var total int64
	for _, band := range []struct {
		from, to int64
		share    float64
	}{{0, 1000, 0.06}, {1000, 2000, 0.01}, {2000, 4000, 0.005}, {4000, math.MaxInt64, 0.0025}} {
		if milli <= band.from {
			break
		}
		total += int64(float64(min(milli, band.to)-band.from) * band.share)
	}
	return total
}

// override sets each resource the kubelet setting names, replacing the default.
func override(list corev1.ResourceList, setting map[string]string, field string) error {
	for _, name := range sortedKeys(setting) {
		q, err := resource.ParseQuantity(setting[name])
		if err != nil {
			return fmt.Errorf("%s.%s: %q is not a quantity", field, name, setting[name])
		}
		if q.Sign() < 0 {
			return fmt.Errorf("%s.%s: %q is negative", field, name, setting[name])
		}
		list[corev1.ResourceName(name)] = q
	}
	return nil
}

// eviction is the room the hard eviction thresholds keep free, from the node's
// memory and root volume capacity. Soft thresholds are checked but take nothing:
// the kubelet subtracts only evictionHard from allocatable (Karpenter subtracts
// the larger of the two, planning less room than the node has).
func (m EKS) eviction(memory, storage resource.Quantity) (corev1.ResourceList, error) {
	out := corev1.ResourceList{
		corev1.ResourceMemory:           resource.MustParse("100Mi"),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(ceilShare(storage, 10), resource.BinarySI),
	}
	given := corev1.ResourceList{}
	for _, s := range []struct {
		field   string
		signals map[string]string
	}{{"kubelet.evictionHard", m.Kubelet.EvictionHard}, {"kubelet.evictionSoft", m.Kubelet.EvictionSoft}} {
		for _, r := range []struct {
			signal   string
			name     corev1.ResourceName
			capacity resource.Quantity
		}{{signalMemory, corev1.ResourceMemory, memory}, {signalNodeFS, corev1.ResourceEphemeralStorage, storage}} {
			v, ok := s.signals[r.signal]
			if !ok {
				continue
			}
			q, err := threshold(r.capacity, v)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", s.field, r.signal, err)
			}
			if s.field != "kubelet.evictionHard" {
				continue
			}
			given[r.name] = q
		}
	}
	for name, q := range given {
		out[name] = q
	}
	return out, nil
}

// threshold reads an eviction threshold: a quantity, or a percentage of capacity
// (100% disables the signal, as the kubelet reads it).
func threshold(capacity resource.Quantity, v string) (resource.Quantity, error) {
	if pct, ok := strings.CutSuffix(v, "%"); ok {
		p, err := strconv.ParseFloat(pct, 64)
		if err != nil || p < 0 || p > 100 || math.IsNaN(p) {
			return resource.Quantity{}, fmt.Errorf("%q is not a percentage from 0%% to 100%%", v)
		}
		if p == 100 {
			p = 0
		}
		return *resource.NewQuantity(ceilShare(capacity, p), resource.BinarySI), nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q is neither a quantity nor a percentage", v)
	}
	if q.Sign() < 0 {
		return resource.Quantity{}, fmt.Errorf("%q is negative", v)
	}
	return q, nil
}

// ceilShare is pct percent of q, rounded up to a whole unit.
func ceilShare(q resource.Quantity, pct float64) int64 {
	return int64(math.Ceil(q.AsApproximateFloat64() / 100 * pct))
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
