package testenv

import (
	"context"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// FreshPlan is the scheduling engine's plan for the pods that match each selector,
// as if pending on an empty cluster of the NodePool with the instance types its:
// what a live cluster's nodes are compared with. The cluster's DaemonSets run on
// every new node, and the pods come in the order the controller's snapshot has
// them.
func FreshPlan(ctx context.Context, kube client.Reader, np *v1.NodePool, its []*scheduling.InstanceType, selectors ...client.MatchingLabels) (*scheduling.Plan, error) {
	in := &scheduling.Input{NodePools: []*scheduling.NodePool{{NodePool: np, InstanceTypes: its}}}
	dss := &appsv1.DaemonSetList{}
	if err := kube.List(ctx, dss); err != nil {
		return nil, err
	}
	for i := range dss.Items {
		ds := &dss.Items[i]
		p := &corev1.Pod{ObjectMeta: *ds.Spec.Template.ObjectMeta.DeepCopy(), Spec: *ds.Spec.Template.Spec.DeepCopy()}
		p.Name, p.Namespace = ds.Name, ds.Namespace
		in.DaemonSets = append(in.DaemonSets, p)
	}
	for _, sel := range selectors {
		pods := &corev1.PodList{}
		if err := kube.List(ctx, pods, sel); err != nil {
			return nil, err
		}
		for i := range pods.Items {
			p := pods.Items[i].DeepCopy()
			p.Spec.NodeName = ""
			in.Pods = append(in.Pods, p)
		}
	}
	slices.SortFunc(in.Pods, func(a, b *corev1.Pod) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return scheduling.Solve(in, scheduling.Options{})
}
