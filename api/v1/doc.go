// Package v1 holds the karpenter.sh/v1 API that Tailor serves: NodePool and NodeClaim,
// and the well-known labels, annotations, taints and finalizer that go with them.
// Field names, enums, defaults and validation reproduce the public Karpenter v1 API, so
// NodePools written for Karpenter apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of NodePool and NodeClaim.
const Group = "karpenter.sh"

// SchemeGroupVersion is karpenter.sh/v1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

// AddToScheme registers NodePool and NodeClaim with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&NodePool{}, &NodePoolList{},
		&NodeClaim{}, &NodeClaimList{},
	)
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
