package testobj

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// NodeClaimOption changes a NodeClaim being built.
type NodeClaimOption func(*v1.NodeClaim)

// NodeClaim is a claim of the SimNodeClass default, not yet launched.
func NodeClaim(name string, opts ...NodeClaimOption) *v1.NodeClaim {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.NodeClaimSpec{NodeClassRef: SimClass("default")}}
	for _, o := range opts {
		o(nc)
	}
	return nc
}

// ClaimLabels adds the key/value pairs kv to the claim's labels.
func ClaimLabels(kv ...string) NodeClaimOption {
	return func(nc *v1.NodeClaim) { nc.Labels = merge(nc.Labels, kv) }
}

// ClaimAnnotations adds the key/value pairs kv to the claim's annotations.
func ClaimAnnotations(kv ...string) NodeClaimOption {
	return func(nc *v1.NodeClaim) { nc.Annotations = merge(nc.Annotations, kv) }
}

// ClaimNodeClassRef makes the claim one of the NodeClass ref.
func ClaimNodeClassRef(ref *v1.NodeClassReference) NodeClaimOption {
	return func(nc *v1.NodeClaim) { nc.Spec.NodeClassRef = ref }
}

// ClaimRequirement adds a requirement on key to the claim.
func ClaimRequirement(key string, op v1.NodeSelectorOperator, values ...string) NodeClaimOption {
	return func(nc *v1.NodeClaim) {
		nc.Spec.Requirements = append(nc.Spec.Requirements, v1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values})
	}
}

// ClaimNode records the instance the claim launched (providerID) and the node it
// registered as (node; "" if none yet).
func ClaimNode(providerID, node string) NodeClaimOption {
	return func(nc *v1.NodeClaim) { nc.Status.ProviderID, nc.Status.NodeName = providerID, node }
}

// ClaimCondition sets the claim's condition of type kind to status since since,
// its reason the type.
func ClaimCondition(kind string, status metav1.ConditionStatus, since time.Time) NodeClaimOption {
	return func(nc *v1.NodeClaim) {
		cond := metav1.Condition{Type: kind, Status: status, Reason: kind, LastTransitionTime: metav1.NewTime(since)}
		for i := range nc.Status.Conditions {
			if nc.Status.Conditions[i].Type == kind {
				nc.Status.Conditions[i] = cond
				return
			}
		}
		nc.Status.Conditions = append(nc.Status.Conditions, cond)
	}
}

// Initialized makes the claim launched, registered and initialized since since.
func Initialized(since time.Time) NodeClaimOption {
	return func(nc *v1.NodeClaim) {
		for _, kind := range []string{v1.ConditionTypeLaunched, v1.ConditionTypeRegistered, v1.ConditionTypeInitialized} {
			ClaimCondition(kind, metav1.ConditionTrue, since)(nc)
		}
	}
}
