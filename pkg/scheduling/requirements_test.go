package scheduling

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "github.com/nodetailor/tailor/api/v1"
)

func TestRequirementSemantics(t *testing.T) {
	for _, tc := range []struct {
		op      v1.NodeSelectorOperator
		values  []string
		has     []string
		hasNot  []string
		absence bool
	}{
		{op: v1.NodeSelectorOpIn, values: []string{"a", "b"}, has: []string{"a", "b"}, hasNot: []string{"c"}},
		{op: v1.NodeSelectorOpNotIn, values: []string{"a"}, has: []string{"b", "zzz"}, hasNot: []string{"a"}, absence: true},
		{op: v1.NodeSelectorOpExists, has: []string{"a", "1"}},
		{op: v1.NodeSelectorOpDoesNotExist, hasNot: []string{"a", ""}, absence: true},
		{op: v1.NodeSelectorOpGt, values: []string{"4"}, has: []string{"5", "100"}, hasNot: []string{"4", "3", "x", "4.5"}},
		{op: v1.NodeSelectorOpLt, values: []string{"4"}, has: []string{"3", "-1"}, hasNot: []string{"4", "9", "x"}},
		{op: v1.NodeSelectorOpGte, values: []string{"4"}, has: []string{"4", "5"}, hasNot: []string{"3"}},
		{op: v1.NodeSelectorOpLte, values: []string{"4"}, has: []string{"4", "0"}, hasNot: []string{"5"}},
	} {
		t.Run(string(tc.op), func(t *testing.T) {
			r := MustRequirement("k", tc.op, tc.values...)
			for _, v := range tc.has {
				if !r.Has(v) {
					t.Errorf("%s does not admit %q", &r, v)
				}
			}
			for _, v := range tc.hasNot {
				if r.Has(v) {
					t.Errorf("%s admits %q", &r, v)
				}
			}
			if r.AllowsAbsent() != tc.absence {
				t.Errorf("%s: absence allowed = %v, want %v", &r, r.AllowsAbsent(), tc.absence)
			}
		})
	}
	for _, bad := range []struct {
		op     v1.NodeSelectorOperator
		values []string
		want   string
	}{
		{v1.NodeSelectorOpGt, []string{"x"}, "single integer value"},
		{v1.NodeSelectorOpLt, []string{"1", "2"}, "single integer value"},
		{"Near", nil, "unknown operator"},
	} {
		if _, err := NewRequirement("k", bad.op, bad.values...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s %v: got %v, want an error about %q", bad.op, bad.values, err, bad.want)
		}
	}
}

func TestIntersections(t *testing.T) {
	in := MustRequirement("k", v1.NodeSelectorOpIn, "1", "2", "3", "8")
	gt := MustRequirement("k", v1.NodeSelectorOpGt, "2")
	lt := MustRequirement("k", v1.NodeSelectorOpLt, "8")
	x := in.Intersect(&gt)
	x = x.Intersect(&lt)
	if got := strings.Join(x.Values(), ","); got != "3" {
		t.Errorf("In[1,2,3,8] ∩ Gt 2 ∩ Lt 8 = %v, want [3]", x.Values())
	}
	// Gt 2 ∩ Lt 3 leaves no integer.
	lt3 := MustRequirement("k", v1.NodeSelectorOpLt, "3")
	if y := gt.Intersect(&lt3); y.Satisfiable() {
		t.Errorf("Gt 2 ∩ Lt 3 is satisfiable: %s", &y)
	}
	// NotIn and DoesNotExist meet in absence.
	notIn := MustRequirement("k", v1.NodeSelectorOpNotIn, "a")
	dne := MustRequirement("k", v1.NodeSelectorOpDoesNotExist)
	if y := notIn.Intersect(&dne); !y.Satisfiable() || !y.AllowsAbsent() {
		t.Errorf("NotIn ∩ DoesNotExist should allow only absence: %s", &y)
	}
	exists := MustRequirement("k", v1.NodeSelectorOpExists)
	if y := exists.Intersect(&dne); y.Satisfiable() {
		t.Errorf("Exists ∩ DoesNotExist is satisfiable: %s", &y)
	}
}

func TestAdmits(t *testing.T) {
	node := NewRequirements(
		MustRequirement(v1.LabelArch, v1.NodeSelectorOpIn, "amd64", "arm64"),
		MustRequirement(v1.LabelZone, v1.NodeSelectorOpIn, "a", "b"),
	)
	for _, tc := range []struct {
		pod  Requirements
		ok   bool
		conf string
	}{
		{NewRequirements(MustRequirement(v1.LabelArch, v1.NodeSelectorOpIn, "arm64")), true, ""},
		{NewRequirements(MustRequirement(v1.LabelZone, v1.NodeSelectorOpIn, "c")), false, v1.LabelZone},
		{NewRequirements(MustRequirement("team", v1.NodeSelectorOpIn, "x")), false, "team"},
		{NewRequirements(MustRequirement("team", v1.NodeSelectorOpNotIn, "x")), true, ""},
		{NewRequirements(MustRequirement("team", v1.NodeSelectorOpDoesNotExist)), true, ""},
		{NewRequirements(MustRequirement(v1.LabelArch, v1.NodeSelectorOpDoesNotExist)), false, v1.LabelArch},
	} {
		key, ok := node.Admits(tc.pod)
		if ok != tc.ok || key != tc.conf {
			t.Errorf("Admits(%s) = %q, %v; want %q, %v", tc.pod, key, ok, tc.conf, tc.ok)
		}
	}
}

func TestNodeSelectorRoundTrip(t *testing.T) {
	rs := NewRequirements(
		MustRequirement("a", v1.NodeSelectorOpIn, "x", "y"),
		MustRequirement("b", v1.NodeSelectorOpNotIn, "z"),
		MustRequirement("c", v1.NodeSelectorOpExists),
		MustRequirement("d", v1.NodeSelectorOpDoesNotExist),
		MustRequirement("e", v1.NodeSelectorOpGt, "3"),
	)
	back, err := FromNodePool(rs.ToNodeSelector(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(rs) {
		t.Errorf("round trip changed %s into %s", rs, back)
	}
}

// intersectSorted looks a few values up among many; either way it must give the
// common values in order.
func TestIntersectSorted(t *testing.T) {
	many := make([]string, 100)
	for i := range many {
		many[i] = fmt.Sprintf("v%03d", i)
	}
	for _, tc := range []struct{ a, b, want []string }{
		{a: many, b: []string{"v003", "v050", "x"}, want: []string{"v003", "v050"}},
		{a: []string{"v099", "w"}, b: many, want: []string{"v099"}},
		{a: []string{"a", "b", "c"}, b: []string{"b", "c", "d"}, want: []string{"b", "c"}},
		{a: many, b: []string{"x"}},
		{a: many, b: nil},
	} {
		if got := intersectSorted(tc.a, tc.b); !slices.Equal(got, tc.want) {
			t.Errorf("intersectSorted(%d values, %v) = %v, want %v", len(tc.a), tc.b, got, tc.want)
		}
	}
}
