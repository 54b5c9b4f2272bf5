// Package v1alpha1 holds Tailor's own API, group tailor.sh: SimNodeClass, the
// NodeClass of the simulated cloud, and SimInstance, that cloud's inventory of
// instances (kept in the cluster, so a controller restart loses nothing and a
// leaked instance shows up in `kubectl get siminstances`).
//
// +kubebuilder:object:generate=true
// +groupName=tailor.sh
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of Tailor's own kinds.
const Group = "tailor.sh"

// SchemeGroupVersion is tailor.sh/v1alpha1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}

// AddToScheme registers the kinds with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&SimNodeClass{}, &SimNodeClassList{},
		&SimInstance{}, &SimInstanceList{},
	)
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
