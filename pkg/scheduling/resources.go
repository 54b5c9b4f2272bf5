package scheduling

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxResources bounds the distinct resources one solve can track: cpu, memory, pods,
// ephemeral-storage and up to twelve extended resources (nvidia.com/gpu, …). A fixed
// array keeps the hot loops free of allocation.
const MaxResources = 16

// Resources is a vector of quantities indexed by a ResourceIndex: cpu in millicores,
// memory and storage in bytes, everything else in units.
type Resources [MaxResources]int64

// Fixed positions of the resources every node has.
const (
	ResourceCPU = iota
	ResourceMemory
	ResourcePods
	ResourceEphemeralStorage
	numFixedResources
)

// ResourceIndex maps resource names to positions in Resources for one solve.
type ResourceIndex struct {
	names []corev1.ResourceName
}

// NewResourceIndex returns an index holding the fixed resources.
func NewResourceIndex() *ResourceIndex {
	return &ResourceIndex{names: []corev1.ResourceName{
		corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage}}
}

// Len is the number of resources in use; loops over Resources stop there.
func (x *ResourceIndex) Len() int { return len(x.names) }

// Name returns the resource at position i.
func (x *ResourceIndex) Name(i int) corev1.ResourceName { return x.names[i] }

// position returns the position of name, adding it when add is set; -1 if absent.
func (x *ResourceIndex) position(name corev1.ResourceName, add bool) (int, error) {
	if i := slices.Index(x.names, name); i >= 0 {
		return i, nil
	}
	if !add {
		return -1, nil
	}
	if len(x.names) == MaxResources {
		return -1, fmt.Errorf("more than %d distinct resources (adding %s)", MaxResources, name)
	}
	x.names = append(x.names, name)
	return len(x.names) - 1, nil
}

// Vector converts a ResourceList, registering resources it has not seen.
func (x *ResourceIndex) Vector(list corev1.ResourceList) (Resources, error) {
	var r Resources
	for _, name := range sortedNames(list) {
		i, err := x.position(name, true)
		if err != nil {
			return r, err
		}
		r[i] = quantityValue(name, list[name])
	}
	return r, nil
}

// List converts a vector back to a ResourceList, leaving out zeros.
func (x *ResourceIndex) List(r Resources) corev1.ResourceList {
	list := corev1.ResourceList{}
	for i, name := range x.names {
		if r[i] == 0 {
			continue
		}
		switch i {
		case ResourceCPU:
			list[name] = *resource.NewMilliQuantity(r[i], resource.DecimalSI)
		case ResourceMemory, ResourceEphemeralStorage:
			list[name] = *resource.NewQuantity(r[i], resource.BinarySI)
		default:
			list[name] = *resource.NewQuantity(r[i], resource.DecimalSI)
		}
	}
	return list
}

// Quantity renders one amount of the resource at position i: "1500m" or "4" cpu,
// "3Gi" memory, "110" pods.
func (x *ResourceIndex) Quantity(i int, v int64) string {
	switch {
	case i == ResourceCPU && v%1000 == 0:
		return strconv.FormatInt(v/1000, 10)
	case i == ResourceCPU:
		return strconv.FormatInt(v, 10) + "m"
	case i == ResourceMemory || i == ResourceEphemeralStorage:
		return resource.NewQuantity(v, resource.BinarySI).String()
	}
	return strconv.FormatInt(v, 10)
}

func quantityValue(name corev1.ResourceName, q resource.Quantity) int64 {
	if name == corev1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}

func sortedNames(list corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(list))
	for n := range list {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Add returns a+b over the first n resources.
func (a Resources) Add(b Resources, n int) Resources {
	for i := range n {
		a[i] += b[i]
	}
	return a
}

// Sub returns a-b over the first n resources.
func (a Resources) Sub(b Resources, n int) Resources {
	for i := range n {
		a[i] -= b[i]
	}
	return a
}

// Max returns the element-wise maximum over the first n resources.
func (a Resources) Max(b Resources, n int) Resources {
	for i := range n {
		a[i] = max(a[i], b[i])
	}
	return a
}

// Fits reports whether used+req stays within limit in every one of the first n
// resources. It returns the first resource that does not fit, or -1.
func Fits(used, req, limit *Resources, n int) int {
	for i := range n {
		if req[i] != 0 && used[i]+req[i] > limit[i] {
			return i
		}
	}
	return -1
}

// PodRequests is the pod's effective request as the kube-scheduler computes it: the
// larger of the sum of regular containers (plus restartable init containers, which run
// alongside them) and the largest init container (plus the sidecars started before
// it), plus the pod overhead. A limit without a request counts as the request.
// Pod-level requests (spec.resources) replace that sum for the resources they
// support. Every pod also takes one "pods" slot.
func PodRequests(pod *corev1.Pod) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, c := range pod.Spec.Containers {
		addList(total, containerRequests(&c))
	}
	initMax := corev1.ResourceList{}
	sidecars := corev1.ResourceList{}
	for _, c := range pod.Spec.InitContainers {
		req := containerRequests(&c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			addList(sidecars, req)
			// A sidecar keeps running: it counts with the later init containers too.
			maxList(initMax, sidecars)
			continue
		}
		withSidecars := corev1.ResourceList{}
		addList(withSidecars, sidecars)
		addList(withSidecars, req)
		maxList(initMax, withSidecars)
	}
	addList(total, sidecars)
	maxList(total, initMax)
	// PodLevelResources (on by default since 1.34): validation keeps pod-level
	// requests no smaller than the containers', and the scheduler takes them instead.
	if pod.Spec.Resources != nil {
		for name, q := range pod.Spec.Resources.Requests {
			if podLevelResource(name) {
				total[name] = q
			}
		}
	}
	addList(total, pod.Spec.Overhead)
	total[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
	return total
}

// podLevelResource reports a resource pod-level requests may set: cpu, memory and
// hugepages.
func podLevelResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

func containerRequests(c *corev1.Container) corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, q := range c.Resources.Limits {
		out[name] = q
	}
	for name, q := range c.Resources.Requests {
		out[name] = q
	}
	return out
}

func addList(into, add corev1.ResourceList) {
	for name, q := range add {
		sum := into[name]
		sum.Add(q)
		into[name] = sum
	}
}

func maxList(into, other corev1.ResourceList) {
	for name, q := range other {
		if cur, ok := into[name]; !ok || q.Cmp(cur) > 0 {
			into[name] = q
		}
	}
}
