package scheduling_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// The benchmarks mirror Karpenter's published scheduling benchmark: 400 synthetic
// instance types and the "diverse" pod mix (see diversePods), plus plain pods. Each
// reports pods/s, the plan's price and its ratio to LowerBound.
func BenchmarkSolveDiverse1000(b *testing.B) {
	benchmarkSolve(b, schedtest.DiversePods(1000, 1), schedtest.SyntheticTypes(400))
}
func BenchmarkSolveDiverse5000(b *testing.B) {
	benchmarkSolve(b, schedtest.DiversePods(5000, 1), schedtest.SyntheticTypes(400))
}
func BenchmarkSolveDiverse10000(b *testing.B) {
	benchmarkSolve(b, schedtest.DiversePods(10000, 1), schedtest.SyntheticTypes(400))
}
func BenchmarkSolveDiverse20000(b *testing.B) {
	benchmarkSolve(b, schedtest.DiversePods(20000, 1), schedtest.SyntheticTypes(400))
}
func BenchmarkSolveDiverse50000(b *testing.B) {
	benchmarkSolve(b, schedtest.DiversePods(50000, 1), schedtest.SyntheticTypes(400))
}
func BenchmarkSolveDiverse100000(b *testing.B) {
	benchmarkSolve(b, schedtest.DiversePods(100000, 1), schedtest.SyntheticTypes(400))
}
func BenchmarkSolvePlain50000(b *testing.B) {
	benchmarkSolve(b, schedtest.PlainPods(50000, 1), schedtest.SyntheticTypes(400))
}
func BenchmarkSolvePlain1000000(b *testing.B) {
	benchmarkSolve(b, schedtest.PlainPods(1000000, 1), schedtest.SyntheticTypes(400))
}

// The same mixes on the AWS catalog, where instance choice decides the price.
func BenchmarkSolveAWSDiverse10000(b *testing.B) {
	benchmarkSolve(b, schedtest.DiversePods(10000, 1), awsTypes(b))
}
func BenchmarkSolveAWSPlain10000(b *testing.B) {
	benchmarkSolve(b, schedtest.PlainPods(10000, 1), awsTypes(b))
}

// awsTypes are the catalog's types under kwok's flat overhead (100m cpu, 10Mi memory),
// as the synthetic types have it, so the figures compare with Karpenter's kwok
// provider and with earlier runs.
func awsTypes(b *testing.B) []*InstanceType {
	c, err := catalog.EmbeddedAWSUSEast1()
	if err != nil {
		b.Fatal(err)
	}
	types, err := c.InstanceTypes(allocatable.Kwok{})
	if err != nil {
		b.Fatal(err)
	}
	return types
}

func benchmarkSolve(b *testing.B, pods []*corev1.Pod, types []*InstanceType) {
	in := &Input{Pods: pods, NodePools: []*NodePool{{NodePool: &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, InstanceTypes: types}}}
	var plan *Plan
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var err error
		if plan, err = Solve(in, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(len(pods))*float64(b.N)/b.Elapsed().Seconds(), "pods/s")
	bound := LowerBound(in.NodePools, plan)
	b.ReportMetric(plan.Cost(), "$/h")
	b.ReportMetric(plan.Cost()/bound, "cost/bound")
	b.ReportMetric(float64(len(plan.NewNodes)), "nodes")
	if len(plan.Unschedulable) > 0 {
		b.Logf("%d unschedulable, e.g. %s", len(plan.Unschedulable), plan.Unschedulable[0].Reason)
	}
}
