// Package v1beta1 is SIG Autoscaling's CapacityBuffer API, group
// autoscaling.x-k8s.io, as Cluster Autoscaler serves it (kubernetes/autoscaler,
// cluster-autoscaler/apis/capacitybuffer): the same kind, fields, defaults,
// validation and printer columns, so buffers written for Cluster Autoscaler work
// unchanged. The types are our own; the Go module that ships the upstream ones
// needs Kubernetes 0.36 libraries and brings ginkgo and code-generator with it.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of the CapacityBuffer.
const Group = "autoscaling.x-k8s.io"

// SchemeGroupVersion is autoscaling.x-k8s.io/v1beta1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1beta1"}

// AddToScheme registers the kinds with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &CapacityBuffer{}, &CapacityBufferList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
