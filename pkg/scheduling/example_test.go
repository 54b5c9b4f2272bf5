package scheduling_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
)

// Solve plans nodes for pending pods: here six pods of 1 cpu and 1Gi on a NodePool
// that may use four synthetic instance types (1 to 4 vCPU, spot and on-demand in
// three zones, priced by size). The cheapest plan is two 4-vCPU spot nodes of three
// pods each: the system keeps 100m of each node, so a fourth pod does not fit.
func ExampleSolve() {
	pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	in := &scheduling.Input{NodePools: []*scheduling.NodePool{{NodePool: pool, InstanceTypes: schedtest.SyntheticTypes(4)}}}
	for i := range 6 {
		in.Pods = append(in.Pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Namespace: "default", UID: types.UID(fmt.Sprint("web-", i))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
		})
	}
	plan, err := scheduling.Solve(in, scheduling.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, n := range plan.NewNodes {
		fmt.Printf("%s %s %s: %d pods\n", n.InstanceType.Name, n.Offering.CapacityType, n.Offering.Zone, len(n.Pods))
	}
	fmt.Println("unschedulable:", len(plan.Unschedulable))
	// Output:
	// fake-it-3 spot zone-a: 3 pods
	// fake-it-3 spot zone-a: 3 pods
	// unschedulable: 0
}
