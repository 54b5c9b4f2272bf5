// Package v1 holds the karpenter.k8s.aws/v1 API that Tailor's AWS provider serves:
// EC2NodeClass, the AWS-specific half of a node's description (subnets, security
// groups, AMIs, IAM identity, kubelet settings, disks, instance metadata options).
// Field names, enums, defaults and validation rules reproduce the public API of
// Karpenter's AWS provider, so EC2NodeClasses written for Karpenter apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.k8s.aws
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of EC2NodeClass.
const Group = "karpenter.k8s.aws"

// SchemeGroupVersion is karpenter.k8s.aws/v1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

// AddToScheme registers EC2NodeClass with a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &EC2NodeClass{}, &EC2NodeClassList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
