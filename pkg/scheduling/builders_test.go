package scheduling_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetailor/tailor/internal/testobj"
	. "github.com/nodetailor/tailor/pkg/scheduling"
)

// The package's tests build their objects with internal/testobj, under the short
// names they have always used.

type (
	podOption  = testobj.PodOption
	poolOption = testobj.NodePoolOption
)

// makePod is a pod without a UID, as the engine's own tests have always built
// them: an ephemeral volume's claim is checked against its pod's UID only when
// the pod has one.
func makePod(name, cpu, memory string, opts ...podOption) *corev1.Pod {
	return testobj.Pod(name, cpu, memory, append([]podOption{testobj.UID("")}, opts...)...)
}

func pods(n int, prefix, cpu, memory string, opts ...podOption) []*corev1.Pod {
	return testobj.Pods(n, prefix, cpu, memory, append([]podOption{testobj.UID("")}, opts...)...)
}

var (
	withLabels                = testobj.Labels
	withNodeSelector          = testobj.NodeSelector
	withRequest               = testobj.Request
	withToleration            = testobj.Toleration
	withSpread                = testobj.Spread
	withPodAffinity           = testobj.PodAffinity
	withPodAntiAffinity       = testobj.PodAntiAffinity
	withNodeAffinity          = testobj.NodeAffinity
	withPreferredNodeAffinity = testobj.PreferredNodeAffinity
	withHostPort              = testobj.HostPort

	makeNodePool  = testobj.NodePool
	requirement   = testobj.Requirement
	minValues     = testobj.MinValues
	taint         = testobj.TemplateTaint
	weight        = testobj.Weight
	limit         = testobj.Limit
	templateLabel = testobj.TemplateLabels
)

func solve(t testing.TB, in *Input) *Plan {
	t.Helper()
	plan, err := Solve(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, in, plan)
	return plan
}
