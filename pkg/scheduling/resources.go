package scheduling

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// fastResources is how many resources a Resources holds inline: cpu, memory, pods,
// ephemeral-storage and a dozen extended resources (nvidia.com/gpu, …) cover nearly
// every cluster, and a fixed array keeps the hot loops free of allocation. A solve
// that meets more distinct resources keeps the rest in a slice (see Resources).
const fastResources = 16

// MaxQuantity is the largest amount a Resources holds: quantities beyond it (a
// NodePool limit of 1e16 cpu, a request of 1e100) saturate to it rather than wrap
// around. A quarter of the int64 range, so adding or subtracting two amounts never
// overflows before the result is clamped back.
const MaxQuantity = math.MaxInt64 / 4

// allResources, passed as the count to the vector operations, covers every position.
const allResources = math.MaxInt

// Resources is a vector of quantities indexed by a ResourceIndex: cpu in millicores,
// memory and storage in bytes, everything else in units; each within ±MaxQuantity.
// The first fastResources positions are inline; the positions after them live in
// more, which values share and so is never changed in place (it is copied on write).
type Resources struct {
	fast [fastResources]int64
	more []int64
}

// Fixed positions of the resources every node has.
const (
	ResourceCPU = iota
	ResourceMemory
	ResourcePods
	ResourceEphemeralStorage
	numFixedResources
)

// At returns the amount at position i.
func (r *Resources) At(i int) int64 {
	if i < fastResources {
		return r.fast[i]
	}
	if j := i - fastResources; j < len(r.more) {
		return r.more[j]
	}
	return 0
}

// Set puts v, clamped to ±MaxQuantity, at position i.
func (r *Resources) Set(i int, v int64) {
	v = clampQuantity(v)
	if i < fastResources {
		r.fast[i] = v
		return
	}
	j := i - fastResources
	more := make([]int64, max(len(r.more), j+1))
	copy(more, r.more)
	more[j] = v
	r.more = more
}

// Equal reports whether r and o hold the same amounts in the first n positions.
func (r *Resources) Equal(o *Resources, n int) bool {
	for i := range n {
		if r.At(i) != o.At(i) {
			return false
		}
	}
	return true
}

// IsZero reports whether every amount is zero.
func (r *Resources) IsZero() bool {
	return r.fast == [fastResources]int64{} && !slices.ContainsFunc(r.more, func(v int64) bool { return v != 0 })
}

// anyNegative reports whether some amount is below zero.
func (r *Resources) anyNegative() bool {
	return slices.ContainsFunc(r.fast[:], func(v int64) bool { return v < 0 }) || slices.ContainsFunc(r.more, func(v int64) bool { return v < 0 })
}

func clampQuantity(v int64) int64 { return min(max(v, -MaxQuantity), MaxQuantity) }

// ResourceIndex maps resource names to positions in Resources for one solve. It
// grows as new names come: there is no limit to how many a solve may see.
type ResourceIndex struct {
	names []corev1.ResourceName
	// byName finds positions once the names are too many to scan.
	byName map[corev1.ResourceName]int
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
func (x *ResourceIndex) position(name corev1.ResourceName, add bool) int {
	if x.byName != nil {
		if i, ok := x.byName[name]; ok {
			return i
		}
	} else if i := slices.Index(x.names, name); i >= 0 {
		return i
	}
	if !add {
		return -1
	}
	x.names = append(x.names, name)
	if x.byName == nil && len(x.names) > fastResources {
		x.byName = make(map[corev1.ResourceName]int, 2*len(x.names))
		for i, n := range x.names {
			x.byName[n] = i
		}
	} else if x.byName != nil {
		x.byName[name] = len(x.names) - 1
	}
	return len(x.names) - 1
}

// Vector converts a ResourceList, registering resources it has not seen. Amounts
// beyond ±MaxQuantity saturate there.
func (x *ResourceIndex) Vector(list corev1.ResourceList) Resources {
	var r Resources
	var more []int64
	for _, name := range sortedNames(list) {
		i := x.position(name, true)
		v := QuantityValue(name, list[name])
		if i < fastResources {
			r.fast[i] = v
			continue
		}
		j := i - fastResources
		if j >= len(more) {
			more = append(more, make([]int64, j+1-len(more))...)
		}
		more[j] = v
	}
	r.more = more
	return r
}

// quickPodVector is x.Vector(PodRequests(pod)) for the usual pod: one container,
// no init containers, overhead or pod-level requests, and only resources the index
// knows. It skips the list in between, which costs more than the rest of a pod's
// preparation. ok is false for any other pod.
func (x *ResourceIndex) quickPodVector(pod *corev1.Pod) (r Resources, ok bool) {
	spec := &pod.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) > 0 || len(spec.Overhead) > 0 || spec.Resources != nil {
		return r, false
	}
	res := &spec.Containers[0].Resources
	set := func(name corev1.ResourceName, q resource.Quantity) bool {
		i := x.position(name, false)
		if i < 0 || i >= fastResources {
			return false
		}
		r.fast[i] = QuantityValue(name, q)
		return true
	}
	for name, q := range res.Requests {
		if !set(name, q) {
			return r, false
		}
	}
	for name, q := range res.Limits {
		if _, ok := res.Requests[name]; !ok && !set(name, q) {
			return r, false
		}
	}
	r.fast[ResourcePods] = 1 // as PodRequests has it, whatever the container asks
	return r, true
}

// List converts a vector back to a ResourceList, leaving out zeros.
func (x *ResourceIndex) List(r Resources) corev1.ResourceList {
	list := corev1.ResourceList{}
	for i, name := range x.names {
		v := r.At(i)
		if v == 0 {
			continue
		}
		switch i {
		case ResourceCPU:
			list[name] = *resource.NewMilliQuantity(v, resource.DecimalSI)
		case ResourceMemory, ResourceEphemeralStorage:
			list[name] = *resource.NewQuantity(v, resource.BinarySI)
		default:
			list[name] = *resource.NewQuantity(v, resource.DecimalSI)
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

// The bounds quantities saturate at: cpu counts millicores, the rest units.
var (
	maxMilliQuantity = *resource.NewMilliQuantity(MaxQuantity, resource.DecimalSI)
	minMilliQuantity = *resource.NewMilliQuantity(-MaxQuantity, resource.DecimalSI)
	maxUnitQuantity  = *resource.NewQuantity(MaxQuantity, resource.DecimalSI)
	minUnitQuantity  = *resource.NewQuantity(-MaxQuantity, resource.DecimalSI)
)

// QuantityValue reads q in the vector's unit (cpu in millicores). Quantity's own
// MilliValue and Value wrap around past int64 (1e16 cpu reads as 0 millicores), so
// amounts beyond ±MaxQuantity are compared first and saturate.
func QuantityValue(name corev1.ResourceName, q resource.Quantity) int64 {
	hi, lo := maxUnitQuantity, minUnitQuantity
	if name == corev1.ResourceCPU {
		hi, lo = maxMilliQuantity, minMilliQuantity
	}
	switch sign := q.Sign(); {
	case sign > 0 && q.Cmp(hi) >= 0:
		return MaxQuantity
	case sign < 0 && q.Cmp(lo) <= 0:
		return -MaxQuantity
	case name == corev1.ResourceCPU:
		return q.MilliValue()
	}
	return q.Value()
}

// OutOfRange says what is wrong with a request vector (made from list) that no
// node should be asked to hold: a negative amount, or one too large to represent
// (it saturated); "" when every amount is fine.
func (x *ResourceIndex) OutOfRange(r *Resources, list corev1.ResourceList) string {
	for i := range min(x.Len(), fastResources+len(r.more)) {
		v := r.At(i)
		if v >= 0 && v < MaxQuantity {
			continue
		}
		name := x.Name(i)
		q := list[name]
		if v < 0 {
			return fmt.Sprintf("requests %s %s, which is negative", name, q.String())
		}
		return fmt.Sprintf("requests %s %s, more than any node can offer", name, q.String())
	}
	return ""
}

func sortedNames(list corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(list))
	for n := range list {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Add returns a+b over the first n resources, clamped to ±MaxQuantity.
func (a Resources) Add(b Resources, n int) Resources {
	a.add(&b, n)
	return a
}

// Sub returns a-b over the first n resources, clamped to ±MaxQuantity.
func (a Resources) Sub(b Resources, n int) Resources {
	a.sub(&b, n)
	return a
}

// Max returns the element-wise maximum over the first n resources.
func (a Resources) Max(b Resources, n int) Resources {
	a.max(&b, n)
	return a
}

// add, sub and max work in place: the hot loops call them on vectors they own. The
// inline positions are handled here, the rest (rare) out of line.
func (a *Resources) add(b *Resources, n int) {
	for i := range min(n, fastResources) {
		a.fast[i] = clampQuantity(a.fast[i] + b.fast[i])
	}
	if a.more != nil || b.more != nil {
		a.more = combine(a.more, b.more, n, opAdd)
	}
}

func (a *Resources) sub(b *Resources, n int) {
	for i := range min(n, fastResources) {
		a.fast[i] = clampQuantity(a.fast[i] - b.fast[i])
	}
	if a.more != nil || b.more != nil {
		a.more = combine(a.more, b.more, n, opSub)
	}
}

func (a *Resources) max(b *Resources, n int) {
	for i := range min(n, fastResources) {
		a.fast[i] = max(a.fast[i], b.fast[i])
	}
	if a.more != nil || b.more != nil {
		a.more = combine(a.more, b.more, n, opMax)
	}
}

type vectorOp int

const (
	opAdd vectorOp = iota
	opSub
	opMax
)

// combine applies op position by position to the overflow parts of two vectors of
// n resources into a new slice: the parts are shared and stay as they are.
func combine(a, b []int64, n int, op vectorOp) []int64 {
	n -= fastResources
	if n <= 0 {
		return a
	}
	out := make([]int64, min(max(len(a), len(b)), n))
	for j := range out {
		var x, y int64
		if j < len(a) {
			x = a[j]
		}
		if j < len(b) {
			y = b[j]
		}
		switch op {
		case opAdd:
			out[j] = clampQuantity(x + y)
		case opSub:
			out[j] = clampQuantity(x - y)
		default:
			out[j] = max(x, y)
		}
	}
	if len(a) > n {
		// Positions past n are a's, unchanged.
		out = append(out, a[n:]...)
	}
	return out
}

// Fits reports whether used+req stays within limit in every one of the first n
// resources. It returns the first resource that does not fit, or -1.
func Fits(used, req, limit *Resources, n int) int {
	if req.more != nil {
		return fitsMore(used, req, limit, n)
	}
	for i := range min(n, fastResources) {
		if req.fast[i] != 0 && used.fast[i]+req.fast[i] > limit.fast[i] {
			return i
		}
	}
	return -1
}

// fitsMore is Fits for a request with amounts past the inline positions.
func fitsMore(used, req, limit *Resources, n int) int {
	for i := range min(n, fastResources+len(req.more)) {
		if v := req.At(i); v != 0 && used.At(i)+v > limit.At(i) {
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
	for i := range pod.Spec.Containers {
		addRequests(total, &pod.Spec.Containers[i])
	}
	if len(pod.Spec.InitContainers) > 0 {
		initMax := corev1.ResourceList{}
		sidecars := corev1.ResourceList{}
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			req := containerRequests(c)
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
	}
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

// addRequests adds containerRequests(c) to into without building it: it runs
// for every container of every pod.
func addRequests(into corev1.ResourceList, c *corev1.Container) {
	for name, q := range c.Resources.Requests {
		addQuantity(into, name, q)
	}
	for name, q := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			addQuantity(into, name, q)
		}
	}
}

func addQuantity(into corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
	sum := into[name]
	sum.Add(q)
	into[name] = sum
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
