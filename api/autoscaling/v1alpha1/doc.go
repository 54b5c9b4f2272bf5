// Package v1alpha1 is the first version of SIG Autoscaling's CapacityBuffer API,
// served beside v1beta1 (the stored version) with the same schema, as Cluster
// Autoscaler serves it: buffers written against v1alpha1 keep working. Tailor
// reads and writes v1beta1 (see package v1beta1); this package only shapes the
// CRD's v1alpha1 version.
//
// +kubebuilder:object:generate=true
// +groupName=autoscaling.x-k8s.io
package v1alpha1
