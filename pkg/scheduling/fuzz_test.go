package scheduling

import (
	"testing"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// universe is every value the fuzzed requirements can mention, plus neighbours.
var universe = []string{"a", "b", "c", "0", "1", "2", "3", "5", "9", "10"}

var fuzzOps = []v1.NodeSelectorOperator{v1.NodeSelectorOpIn, v1.NodeSelectorOpNotIn, v1.NodeSelectorOpExists,
	v1.NodeSelectorOpDoesNotExist, v1.NodeSelectorOpGt, v1.NodeSelectorOpLt, v1.NodeSelectorOpGte, v1.NodeSelectorOpLte}

// fuzzRequirement decodes two bytes: an operator and a subset of the universe.
func fuzzRequirement(op, set byte) Requirement {
	o := fuzzOps[int(op)%len(fuzzOps)]
	var values []string
	switch o {
	case v1.NodeSelectorOpGt, v1.NodeSelectorOpLt, v1.NodeSelectorOpGte, v1.NodeSelectorOpLte:
		values = []string{universe[3+int(set)%7]}
	case v1.NodeSelectorOpExists, v1.NodeSelectorOpDoesNotExist:
	default:
		for i := range 8 {
			if set&(1<<i) != 0 {
				values = append(values, universe[i])
			}
		}
		if o == v1.NodeSelectorOpIn && len(values) == 0 {
			values = []string{"a"}
		}
	}
	return MustRequirement("k", o, values...)
}

// same reports whether two requirements admit exactly the same nodes of the universe.
func same(a, b *Requirement) bool {
	if a.AllowsAbsent() != b.AllowsAbsent() || a.Satisfiable() != b.Satisfiable() {
		return false
	}
	for _, v := range universe {
		if a.Has(v) != b.Has(v) {
			return false
		}
	}
	return true
}

// Intersection is set intersection: commutative, associative, and a value (or
// absence) is in A∩B exactly when it is in both.
func FuzzRequirementIntersection(f *testing.F) {
	f.Add(byte(0), byte(3), byte(1), byte(5), byte(4), byte(2))
	f.Add(byte(4), byte(1), byte(5), byte(6), byte(2), byte(0))
	f.Fuzz(func(t *testing.T, o1, s1, o2, s2, o3, s3 byte) {
		a, b, c := fuzzRequirement(o1, s1), fuzzRequirement(o2, s2), fuzzRequirement(o3, s3)
		ab, ba := a.Intersect(&b), b.Intersect(&a)
		if !same(&ab, &ba) {
			t.Fatalf("%s ∩ %s = %s but %s ∩ %s = %s", &a, &b, &ab, &b, &a, &ba)
		}
		left := ab.Intersect(&c)
		bc := b.Intersect(&c)
		right := a.Intersect(&bc)
		if !same(&left, &right) {
			t.Fatalf("(%s ∩ %s) ∩ %s = %s but %s ∩ (%s ∩ %s) = %s", &a, &b, &c, &left, &a, &b, &c, &right)
		}
		for _, v := range universe {
			if ab.Has(v) != (a.Has(v) && b.Has(v)) {
				t.Fatalf("%q: in %s ∩ %s = %v, in each: %v, %v", v, &a, &b, ab.Has(v), a.Has(v), b.Has(v))
			}
		}
		if ab.AllowsAbsent() != (a.AllowsAbsent() && b.AllowsAbsent()) {
			t.Fatalf("absence in %s ∩ %s = %v", &a, &b, ab.AllowsAbsent())
		}
		// The allocation-free check agrees with the intersection.
		if got, want := a.intersects(&b), ab.Satisfiable(); got != want {
			t.Fatalf("intersects(%s, %s) = %v, but the intersection %s is satisfiable = %v", &a, &b, got, &ab, want)
		}
	})
}
