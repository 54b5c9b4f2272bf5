package scheduling_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	. "github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
)

func TestDebugPlain(t *testing.T) {
	in := &Input{Pods: schedtest.PlainPods(5000, 1), NodePools: []*NodePool{{NodePool: &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, InstanceTypes: awsTypesT(t)}}}
	plan, _ := Solve(in, Options{})
	t.Logf("cost %.2f bound %.2f nodes %d", plan.Cost(), LowerBound(in.NodePools, plan), len(plan.NewNodes))
	for i, n := range plan.NewNodes {
		if i > 5 && i < len(plan.NewNodes)-3 {
			continue
		}
		alloc := n.InstanceType.Allocatable()
		c, m, p := n.Requests[corev1.ResourceCPU], n.Requests[corev1.ResourceMemory], n.Requests[corev1.ResourcePods]
		ac, am, ap := alloc[corev1.ResourceCPU], alloc[corev1.ResourceMemory], alloc[corev1.ResourcePods]
		t.Logf("%s %s $%.3f cpu %s/%s mem %s/%s pods %s/%s", n.Name, n.InstanceType.Name, n.Offering.Price, c.String(), ac.String(), m.String(), am.String(), p.String(), ap.String())
	}
}

func awsTypesT(t *testing.T) []*InstanceType {
	types, err := catalog.AWSUSEast1()
	if err != nil {
		t.Fatal(err)
	}
	return types
}
