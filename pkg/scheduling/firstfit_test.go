package scheduling_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// First-fit skips a node that refused a pod for good, or until a pod lands on it,
// and a node's options too small for it are skipped lazily; trying every node,
// with options narrowed eagerly, must give the very same plan.
func FuzzFirstFitSkipsOnlyRefusals(f *testing.F) {
	for seed := range uint64(400) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		in := randomInput(rand.New(rand.NewPCG(seed, seed^0x5bd1e995)))
		for _, slack := range []float64{0, GrowSlack} {
			want := planSummary(SolveOnceExhaustive(in, Options{}, slack))
			if diff := cmp.Diff(want, planSummary(SolveOnce(in, Options{}, slack, false))); diff != "" {
				t.Errorf("slack %v: plan differs from trying every node (-exhaustive +skipping):\n%s", slack, diff)
			}
		}
	})
}

func TestFirstFitSkipsOnlyRefusalsAtScale(t *testing.T) {
	in := &Input{Pods: schedtest.DiversePods(2000, 3), NodePools: []*NodePool{pool(makeNodePool("default"), schedtest.SyntheticTypes(60))}}
	want := planSummary(SolveOnceExhaustive(in, Options{}, 0))
	if diff := cmp.Diff(want, planSummary(SolveOnce(in, Options{}, 0, false))); diff != "" {
		t.Errorf("plan differs from trying every node (-exhaustive +skipping):\n%s", diff)
	}
}

// planSummary lists what a plan decides, one line per new node, binding and failure.
func planSummary(p *Plan) []string {
	var out []string
	for _, n := range p.NewNodes {
		var pods []string
		for _, pod := range n.Pods {
			pods = append(pods, pod.Name)
		}
		var types []string
		for _, it := range n.InstanceTypes {
			types = append(types, it.Name)
		}
		out = append(out, fmt.Sprintf("%s %s %v pods=%s types=%s", n.Name, n.NodePool, n.Requirements, strings.Join(pods, ","), strings.Join(types, ",")))
	}
	for _, b := range p.Bindings {
		out = append(out, fmt.Sprintf("bind %s %s", b.Pod.Name, b.Node))
	}
	for _, f := range p.Unschedulable {
		out = append(out, fmt.Sprintf("fail %s: %s", f.Pod.Name, f.Reason))
	}
	return out
}
