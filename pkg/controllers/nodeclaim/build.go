package nodeclaim

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// InstanceTypes supplies a NodePool's instance types, those a new claim may launch
// as (the operator's leaves out offerings that recently ran out of capacity).
type InstanceTypes func(ctx context.Context, pool *v1.NodePool) ([]*scheduling.InstanceType, error)

// New makes the claim for a planned node: the NodePool's template (labels,
// annotations, taints, startup taints, node class, expiry, grace period), the
// requirements narrowed to the instance types the plan chose, and the requests of
// the pods it is for. It carries the termination finalizer from the start, which
// saves the lifecycle controller a write per node.
func New(np *v1.NodePool, n *scheduling.NewNode) *v1.NodeClaim {
	t := np.Spec.Template
	nc := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: np.Name + "-",
			Labels:       map[string]string{v1.NodePoolLabelKey: np.Name},
			Annotations:  map[string]string{},
			Finalizers:   []string{v1.TerminationFinalizer},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1.SchemeGroupVersion.String(), Kind: "NodePool",
				Name: np.Name, UID: np.UID, BlockOwnerDeletion: ptr(true)}},
		},
		Spec: v1.NodeClaimSpec{
			Taints:                 t.Spec.Taints,
			StartupTaints:          t.Spec.StartupTaints,
			Requirements:           requirements(np, n.Requirements),
			Resources:              v1.ResourceRequirements{Requests: n.Requests},
			NodeClassRef:           t.Spec.NodeClassRef,
			TerminationGracePeriod: t.Spec.TerminationGracePeriod,
			ExpireAfter:            t.Spec.ExpireAfter,
		},
	}
	for k, v := range t.Labels {
		nc.Labels[k] = v
	}
	for k, v := range t.Annotations {
		nc.Annotations[k] = v
	}
	for _, key := range []string{v1.NodePoolHashAnnotationKey, v1.NodePoolHashVersionAnnotationKey} {
		if v, ok := np.Annotations[key]; ok {
			nc.Annotations[key] = v
		}
	}
	if n.MinValuesRelaxed {
		nc.Annotations[v1.NodeClaimMinValuesRelaxedAnnotationKey] = "true"
	}
	return nc
}

// FromTemplate is the claim New makes for a node the pool's template alone
// describes (no pod narrowed it): what a static NodePool launches, and what the
// NodePool controller asks the API server to accept.
func FromTemplate(np *v1.NodePool) (*v1.NodeClaim, error) {
	reqs, err := scheduling.FromNodePool(np.Spec.Template.Spec.Requirements, np.Spec.Template.Labels)
	if err != nil {
		return nil, fmt.Errorf("spec.template.spec.requirements: %w", err)
	}
	reqs = reqs.With(scheduling.MustRequirement(v1.NodePoolLabelKey, v1.NodeSelectorOpIn, np.Name))
	return New(np, &scheduling.NewNode{NodePool: np.Name, Requirements: reqs}), nil
}

// requirements are the requirements a claim records: the instance-type options
// and the other well-known keys (arch, os, zone, capacity type, NodePool), the keys
// the NodePool constrains, and any key narrowed to one value or constrained other
// than by In (a pod's NotIn, Exists, Gt). A key the plan narrowed only to the
// union of the options' labels (their families, sizes, processor counts) is left
// out, as Karpenter leaves it out: the options already settle it, and the lists
// would more than double every claim, in the API server and in every cache.
func requirements(np *v1.NodePool, reqs scheduling.Requirements) []v1.NodeSelectorRequirementWithMinValues {
	keep := map[string]bool{}
	for _, key := range v1.WellKnownLabels {
		keep[key] = true
	}
	for _, r := range np.Spec.Template.Spec.Requirements {
		keep[r.Key] = true
	}
	return slices.DeleteFunc(reqs.ToNodeSelector(), func(r v1.NodeSelectorRequirementWithMinValues) bool {
		return !keep[r.Key] && r.Operator == v1.NodeSelectorOpIn && len(r.Values) > 1 && r.MinValues == nil
	})
}

func ptr[T any](v T) *T { return &v }
