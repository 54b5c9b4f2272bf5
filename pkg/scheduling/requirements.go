package scheduling

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// Requirement is what one label key may be: a set of values (or the complement of
// one), integer bounds, and whether a node without the label satisfies it. Every node
// selector operator maps onto it, and so does their intersection:
//
//	In V          values V
//	NotIn V       all but V, or absent
//	Exists        anything
//	DoesNotExist  absent
//	Gt n, Gte n   any integer above n (at least n)
//	Lt n, Lte n   any integer below n (at most n)
type Requirement struct {
	Key string
	// MinValues asks that a new node keep at least this many distinct values of Key
	// among its instance-type options.
	MinValues int

	complement bool     // values are excluded rather than allowed
	values     []string // sorted, unique
	absent     bool     // a node without the label satisfies the requirement
	hasGt      bool
	gt         int64 // values must be integers > gt
	hasLt      bool
	lt         int64 // values must be integers < lt
}

// NewRequirement builds a requirement from a node selector operator. Gt, Lt, Gte and
// Lte take one integer value.
func NewRequirement(key string, op v1.NodeSelectorOperator, values ...string) (Requirement, error) {
	key = NormalizeKey(key)
	r := Requirement{Key: key}
	switch op {
	case v1.NodeSelectorOpIn:
		r.values = sortedUnique(values)
	case v1.NodeSelectorOpNotIn:
		r.complement, r.values, r.absent = true, sortedUnique(values), true
	case v1.NodeSelectorOpExists:
		r.complement = true
	case v1.NodeSelectorOpDoesNotExist:
		r.absent = true
	case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt, v1.NodeSelectorOpGte, v1.NodeSelectorOpLte:
		if len(values) != 1 {
			return r, fmt.Errorf("requirement %s has operator %s, which needs a single integer value", key, op)
		}
		n, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return r, fmt.Errorf("requirement %s has operator %s, which needs a single integer value, not %q", key, op, values[0])
		}
		r.complement = true
		switch op {
		case v1.NodeSelectorOpGt:
			r.hasGt, r.gt = true, n
		case v1.NodeSelectorOpGte:
			r.hasGt, r.gt = true, n-1
		case v1.NodeSelectorOpLt:
			r.hasLt, r.lt = true, n
		case v1.NodeSelectorOpLte:
			r.hasLt, r.lt = true, n+1
		}
	default:
		return r, fmt.Errorf("requirement %s has unknown operator %q", key, op)
	}
	return r, nil
}

// deprecatedKeys maps the beta labels the kubelet still sets to their GA keys, so
// a selector on either means the same thing (as Karpenter normalises them).
var deprecatedKeys = map[string]string{
	"beta.kubernetes.io/instance-type":         corev1.LabelInstanceTypeStable,
	"beta.kubernetes.io/arch":                  corev1.LabelArchStable,
	"beta.kubernetes.io/os":                    corev1.LabelOSStable,
	"failure-domain.beta.kubernetes.io/zone":   corev1.LabelTopologyZone,
	"failure-domain.beta.kubernetes.io/region": corev1.LabelTopologyRegion,
}

// NormalizeKey returns the GA key of a deprecated well-known label, or key itself.
func NormalizeKey(key string) string {
	if ga, ok := deprecatedKeys[key]; ok {
		return ga
	}
	return key
}

// MustRequirement is NewRequirement for literals in code and tests.
func MustRequirement(key string, op v1.NodeSelectorOperator, values ...string) Requirement {
	r, err := NewRequirement(key, op, values...)
	if err != nil {
		panic(err)
	}
	return r
}

func sortedUnique(values []string) []string {
	out := slices.Clone(values)
	slices.Sort(out)
	return slices.Compact(out)
}

// Has reports whether a node whose label Key has value v satisfies r.
func (r *Requirement) Has(v string) bool {
	if r.hasGt || r.hasLt {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || (r.hasGt && n <= r.gt) || (r.hasLt && n >= r.lt) {
			return false
		}
	}
	_, found := slices.BinarySearch(r.values, v)
	return found != r.complement
}

// AllowsAbsent reports whether a node without the label satisfies r.
func (r *Requirement) AllowsAbsent() bool { return r.absent }

// Values lists the allowed values when they are finite (In), else nil.
func (r *Requirement) Values() []string {
	if r.complement {
		return nil
	}
	return r.values
}

// Any returns one allowed value, preferring the smallest, or "" if none is known.
func (r *Requirement) Any() string {
	if !r.complement && len(r.values) > 0 {
		return r.values[0]
	}
	return ""
}

// Finite reports whether r allows a known, finite set of values.
func (r *Requirement) Finite() bool { return !r.complement }

// valueless reports that no label value satisfies r (absence still may).
func (r *Requirement) valueless() bool {
	if !r.complement {
		return len(r.values) == 0
	}
	// A complement is infinite unless integer bounds close it.
	if r.hasGt && r.hasLt {
		span := r.lt - r.gt - 1 // integers strictly between
		if span <= 0 {
			return true
		}
		excluded := 0
		for _, v := range r.values {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > r.gt && n < r.lt {
				excluded++
			}
		}
		return int64(excluded) >= span
	}
	return false
}

// Satisfiable reports whether some node (with or without the label) satisfies r.
func (r *Requirement) Satisfiable() bool { return r.absent || !r.valueless() }

// Intersect returns the requirement both r and o impose.
func (r *Requirement) Intersect(o *Requirement) Requirement {
	out := Requirement{Key: r.Key, MinValues: max(r.MinValues, o.MinValues), absent: r.absent && o.absent}
	out.hasGt, out.gt = r.hasGt || o.hasGt, maxBound(r.hasGt, r.gt, o.hasGt, o.gt, true)
	out.hasLt, out.lt = r.hasLt || o.hasLt, maxBound(r.hasLt, r.lt, o.hasLt, o.lt, false)
	switch {
	case !r.complement && !o.complement:
		out.values = intersectSorted(r.values, o.values)
	case !r.complement:
		out.values = subtractSorted(r.values, o.values)
	case !o.complement:
		out.values = subtractSorted(o.values, r.values)
	default:
		out.complement = true
		out.values = unionSorted(r.values, o.values)
	}
	if !out.complement && (out.hasGt || out.hasLt) {
		kept := out.values[:0:0]
		for _, v := range out.values {
			if out.Has(v) {
				kept = append(kept, v)
			}
		}
		out.values = kept
	}
	return out
}

// maxBound combines two bounds: the larger lower bound, or the smaller upper bound.
func maxBound(hasA bool, a int64, hasB bool, b int64, lower bool) int64 {
	switch {
	case hasA && hasB:
		if lower {
			return max(a, b)
		}
		return min(a, b)
	case hasA:
		return a
	default:
		return b
	}
}

// intersects reports whether r and o have a value, or absence, in common; it does not
// allocate, which keeps feasibility checks cheap.
func (r *Requirement) intersects(o *Requirement) bool {
	if r.absent && o.absent {
		return true
	}
	switch {
	case !r.complement && !o.complement:
		small, large := r, o
		if len(small.values) > len(large.values) {
			small, large = large, small
		}
		for _, v := range small.values {
			if _, ok := slices.BinarySearch(large.values, v); ok && r.Has(v) && o.Has(v) {
				return true
			}
		}
		return false
	case !r.complement:
		for _, v := range r.values {
			if o.Has(v) && r.Has(v) {
				return true
			}
		}
		return false
	case !o.complement:
		return o.intersects(r)
	default:
		x := r.Intersect(o)
		return !x.valueless()
	}
}

// appendKey appends every field of r to b, for memo keys: label keys and values
// hold no control characters, so the zero and one bytes delimit them.
func (r *Requirement) appendKey(b []byte) []byte {
	flag := func(on bool) byte {
		if on {
			return '1'
		}
		return '0'
	}
	b = append(b, r.Key...)
	b = append(b, 0, flag(r.complement), flag(r.absent), flag(r.hasGt), flag(r.hasLt))
	b = strconv.AppendInt(b, r.gt, 10)
	b = append(b, 0)
	b = strconv.AppendInt(b, r.lt, 10)
	b = append(b, 0)
	b = strconv.AppendInt(b, int64(r.MinValues), 10)
	for _, v := range r.values {
		b = append(b, 0)
		b = append(b, v...)
	}
	return append(b, 1)
}

// String renders r like a node selector requirement.
func (r *Requirement) String() string {
	var b strings.Builder
	b.WriteString(r.Key)
	switch {
	case r.hasGt || r.hasLt:
		if r.hasGt {
			fmt.Fprintf(&b, " >%d", r.gt)
		}
		if r.hasLt {
			fmt.Fprintf(&b, " <%d", r.lt)
		}
	case !r.complement && len(r.values) == 0:
		b.WriteString(" DoesNotExist")
	case !r.complement:
		fmt.Fprintf(&b, " In [%s]", strings.Join(r.values, ","))
	case len(r.values) == 0:
		b.WriteString(" Exists")
	default:
		fmt.Fprintf(&b, " NotIn [%s]", strings.Join(r.values, ","))
	}
	if r.MinValues > 0 {
		fmt.Fprintf(&b, " minValues %d", r.MinValues)
	}
	return b.String()
}

// Requirements is a conjunction of requirements, one per key, sorted by key.
type Requirements []Requirement

// NewRequirements sorts rs and merges requirements on the same key.
func NewRequirements(rs ...Requirement) Requirements {
	out := make(Requirements, 0, len(rs))
	for _, r := range rs {
		out = out.With(r)
	}
	return out
}

// Get returns the requirement on key.
func (rs Requirements) Get(key string) (*Requirement, bool) {
	i, ok := rs.find(key)
	if !ok {
		return nil, false
	}
	return &rs[i], true
}

// find is a binary search written out: it runs for every instance type a pod
// considers, and sort.Search's closure costs a third of it.
func (rs Requirements) find(key string) (int, bool) {
	lo, hi := 0, len(rs)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if rs[mid].Key < key {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(rs) && rs[lo].Key == key
}

// With returns rs with r added, intersected with any requirement on the same key.
// rs itself is not modified.
func (rs Requirements) With(r Requirement) Requirements {
	i, ok := rs.find(r.Key)
	out := make(Requirements, 0, len(rs)+1)
	out = append(out, rs[:i]...)
	if ok {
		out = append(out, rs[i].Intersect(&r))
		return append(out, rs[i+1:]...)
	}
	out = append(out, r)
	return append(out, rs[i:]...)
}

// And returns the conjunction of rs and o: every key of either, intersected where
// both constrain it.
func (rs Requirements) And(o Requirements) Requirements {
	out := make(Requirements, 0, len(rs)+len(o))
	i, j := 0, 0
	for i < len(rs) || j < len(o) {
		switch {
		case j == len(o) || (i < len(rs) && rs[i].Key < o[j].Key):
			out = append(out, rs[i])
			i++
		case i == len(rs) || o[j].Key < rs[i].Key:
			out = append(out, o[j])
			j++
		default:
			out = append(out, rs[i].Intersect(&o[j]))
			i++
			j++
		}
	}
	return out
}

// Unsatisfiable returns the first key no node can satisfy, or "".
func (rs Requirements) Unsatisfiable() string {
	for i := range rs {
		if !rs[i].Satisfiable() {
			return rs[i].Key
		}
	}
	return ""
}

// Intersects reports whether every key both constrain has a value (or absence) in
// common; it returns the first conflicting key. Keys only one side constrains are
// free: use it for two descriptions that combine, like a NodePool and an instance
// type.
func (rs Requirements) Intersects(o Requirements) (string, bool) {
	i, j := 0, 0
	for i < len(rs) && j < len(o) {
		switch {
		case rs[i].Key < o[j].Key:
			i++
		case o[j].Key < rs[i].Key:
			j++
		default:
			if !rs[i].intersects(&o[j]) {
				return rs[i].Key, false
			}
			i++
			j++
		}
	}
	return "", true
}

// Admits reports whether a node described by rs (the labels it has or may get; a key
// it does not mention is a label it will not have) can satisfy the pod constraints
// pod. It returns the first key that cannot be met.
func (rs Requirements) Admits(pod Requirements) (string, bool) {
	i := 0
	for j := range pod {
		for i < len(rs) && rs[i].Key < pod[j].Key {
			i++
		}
		if i < len(rs) && rs[i].Key == pod[j].Key {
			if !rs[i].intersects(&pod[j]) {
				return pod[j].Key, false
			}
			continue
		}
		if !pod[j].absent {
			return pod[j].Key, false
		}
	}
	return "", true
}

// Narrow returns the node description rs narrowed by pod constraints: each key rs
// mentions is intersected with the pod's; keys only the pod mentions stay out (the
// node will not have them, which Admits already accepted). When nothing changes it
// returns rs itself, without allocating.
func (rs Requirements) Narrow(pod Requirements) Requirements {
	var out Requirements
	i := 0
	for j := range pod {
		for i < len(rs) && rs[i].Key < pod[j].Key {
			i++
		}
		if i == len(rs) || rs[i].Key != pod[j].Key {
			continue
		}
		if pod[j].MinValues == 0 && rs[i].subsetOf(&pod[j]) {
			continue
		}
		if out == nil {
			out = slices.Clone(rs)
		}
		out[i] = rs[i].Intersect(&pod[j])
	}
	if out == nil {
		return rs
	}
	return out
}

// subsetOf reports whether every node r allows is allowed by o (a cheap, conservative
// check: false means "maybe not").
func (r *Requirement) subsetOf(o *Requirement) bool {
	if r.absent && !o.absent {
		return false
	}
	if o.hasGt || o.hasLt {
		if r.complement {
			return false
		}
	}
	if !r.complement {
		for _, v := range r.values {
			if !o.Has(v) {
				return false
			}
		}
		return true
	}
	if !o.complement {
		return false
	}
	// Both are complements: r excludes at least what o excludes.
	for _, v := range o.values {
		if _, ok := slices.BinarySearch(r.values, v); !ok {
			return false
		}
	}
	return (!o.hasGt || (r.hasGt && r.gt >= o.gt)) && (!o.hasLt || (r.hasLt && r.lt <= o.lt))
}

// Equal reports whether rs and o are the same conjunction.
func (rs Requirements) Equal(o Requirements) bool {
	return slices.EqualFunc(rs, o, func(a, b Requirement) bool { return a.Equal(&b) })
}

// Equal reports whether r and o are the same requirement.
func (r *Requirement) Equal(o *Requirement) bool {
	return r.Key == o.Key && r.MinValues == o.MinValues && r.complement == o.complement &&
		r.absent == o.absent && r.hasGt == o.hasGt && r.gt == o.gt && r.hasLt == o.hasLt &&
		r.lt == o.lt && (sameSlice(r.values, o.values) || slices.Equal(r.values, o.values))
}

// sameSlice reports whether a and b are one slice: nodes share their pool's long
// value lists (every instance type's name), which compare for every pod.
func sameSlice(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// String renders the conjunction.
func (rs Requirements) String() string {
	parts := make([]string, len(rs))
	for i := range rs {
		parts[i] = rs[i].String()
	}
	return strings.Join(parts, ", ")
}

// Labels returns the labels a node described by rs gets: one value for every key
// with a finite set of allowed values (the smallest, for determinism).
func (rs Requirements) Labels() map[string]string {
	labels := map[string]string{}
	for i := range rs {
		if v := rs[i].Any(); v != "" {
			labels[rs[i].Key] = v
		}
	}
	return labels
}

// LabelRequirements describes a node by its labels: each key In its one value.
func LabelRequirements(labels map[string]string) Requirements {
	out := make(Requirements, 0, len(labels))
	for k, v := range labels {
		out = append(out, Requirement{Key: k, values: []string{v}})
	}
	slices.SortFunc(out, func(a, b Requirement) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// FromNodeSelectorTerm converts a pod's node selector term; matchFields on
// metadata.name become the pseudo-label MetadataNameKey.
func FromNodeSelectorTerm(term *corev1.NodeSelectorTerm) (Requirements, error) {
	var out Requirements
	for _, e := range term.MatchExpressions {
		r, err := NewRequirement(e.Key, v1.NodeSelectorOperator(e.Operator), e.Values...)
		if err != nil {
			return nil, err
		}
		out = out.With(r)
	}
	for _, f := range term.MatchFields {
		if f.Key != MetadataNameKey {
			return nil, fmt.Errorf("matchFields supports only %s, not %s", MetadataNameKey, f.Key)
		}
		r, err := NewRequirement(MetadataNameKey, v1.NodeSelectorOperator(f.Operator), f.Values...)
		if err != nil {
			return nil, err
		}
		out = out.With(r)
	}
	return out, nil
}

// MetadataNameKey stands for a node's name in requirements (matchFields).
const MetadataNameKey = "metadata.name"

// FromNodePool converts NodePool requirements; template labels count as In.
func FromNodePool(reqs []v1.NodeSelectorRequirementWithMinValues, labels map[string]string) (Requirements, error) {
	var out Requirements
	for _, r := range reqs {
		req, err := NewRequirement(r.Key, r.Operator, r.Values...)
		if err != nil {
			return nil, err
		}
		if r.MinValues != nil {
			req.MinValues = *r.MinValues
		}
		out = out.With(req)
	}
	for k, v := range labels {
		out = out.With(Requirement{Key: NormalizeKey(k), values: []string{v}})
	}
	return out, nil
}

// ToNodeSelector converts rs back to API requirements (NodeClaim spec).
func (rs Requirements) ToNodeSelector() []v1.NodeSelectorRequirementWithMinValues {
	var out []v1.NodeSelectorRequirementWithMinValues
	for i := range rs {
		r := &rs[i]
		var minValues *int
		if r.MinValues > 0 {
			minValues = &r.MinValues
		}
		add := func(op v1.NodeSelectorOperator, values ...string) {
			out = append(out, v1.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: op, Values: values, MinValues: minValues})
		}
		switch {
		case !r.complement && len(r.values) == 0:
			add(v1.NodeSelectorOpDoesNotExist)
		case !r.complement:
			add(v1.NodeSelectorOpIn, r.values...)
		default:
			if r.hasGt {
				add(v1.NodeSelectorOpGt, strconv.FormatInt(r.gt, 10))
			}
			if r.hasLt {
				add(v1.NodeSelectorOpLt, strconv.FormatInt(r.lt, 10))
			}
			if len(r.values) > 0 {
				add(v1.NodeSelectorOpNotIn, r.values...)
			}
			if !r.absent && !r.hasGt && !r.hasLt {
				add(v1.NodeSelectorOpExists)
			}
		}
	}
	return out
}

func intersectSorted(a, b []string) []string {
	if len(a) < len(b) {
		a, b = b, a
	}
	if len(a) > 16*len(b) {
		// A few values among many (a node's instance types among a catalog's):
		// look each up rather than walk the many.
		var out []string
		for _, v := range b {
			if _, ok := slices.BinarySearch(a, v); ok {
				out = append(out, v)
			}
		}
		return out
	}
	var out []string
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case b[j] < a[i]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

func subtractSorted(a, b []string) []string {
	var out []string
	for _, v := range a {
		if _, ok := slices.BinarySearch(b, v); !ok {
			out = append(out, v)
		}
	}
	return out
}

func unionSorted(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	out = append(out, a...)
	out = append(out, b...)
	slices.Sort(out)
	return slices.Compact(out)
}
