package sim

import (
	"testing"

	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// A SimNodeClass's perNodeCost is what each of its nodes costs besides its
// instance, so the engine's per-node costs can be tried without AWS.
func TestNodeClassCost(t *testing.T) {
	for value, want := range map[string]scheduling.NodeCost{"": {}, "0.0072": {PerNode: 0.0072}, "2": {PerNode: 2}} {
		nc := &v1alpha1.SimNodeClass{Spec: v1alpha1.SimNodeClassSpec{PerNodeCost: value}}
		got, err := NodeClassCost(nc)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", value, got, err, want)
		}
	}
	if _, err := NodeClassCost(&v1alpha1.SimNodeClass{Spec: v1alpha1.SimNodeClassSpec{PerNodeCost: "-1"}}); err == nil {
		t.Error("perNodeCost -1 accepted")
	}
}
