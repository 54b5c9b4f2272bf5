package convert

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
)

// The source APIs, as far as the conversion reads them. Field names are the old
// APIs' own; a field not listed here is reported as not carried over.

// provisioner is a karpenter.sh/v1alpha5 Provisioner.
type provisioner struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            provisionerSpec   `json:"spec"`
	Status          json.RawMessage   `json:"status,omitempty"`
}

type provisionerSpec struct {
	Annotations            map[string]string                         `json:"annotations,omitempty"`
	Labels                 map[string]string                         `json:"labels,omitempty"`
	Taints                 []corev1.Taint                            `json:"taints,omitempty"`
	StartupTaints          []corev1.Taint                            `json:"startupTaints,omitempty"`
	Requirements           []v1.NodeSelectorRequirementWithMinValues `json:"requirements,omitempty"`
	KubeletConfiguration   *kubelet                                  `json:"kubeletConfiguration,omitempty"`
	Provider               *providerBlock                            `json:"provider,omitempty"`
	ProviderRef            *objectReference                          `json:"providerRef,omitempty"`
	TTLSecondsAfterEmpty   *int64                                    `json:"ttlSecondsAfterEmpty,omitempty"`
	TTLSecondsUntilExpired *int64                                    `json:"ttlSecondsUntilExpired,omitempty"`
	Limits                 *struct {
		Resources corev1.ResourceList `json:"resources,omitempty"`
	} `json:"limits,omitempty"`
	Weight        *int32 `json:"weight,omitempty"`
	Consolidation *struct {
		Enabled *bool `json:"enabled,omitempty"`
	} `json:"consolidation,omitempty"`
}

// objectReference is v1alpha5's providerRef and v1beta1's nodeClassRef.
type objectReference struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name"`
}

// providerBlock is a Provisioner's inline AWS provider: an AWSNodeTemplate spec
// with the provider's own apiVersion and kind.
type providerBlock struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	nodeTemplateSpec
}

// nodeTemplate is a karpenter.k8s.aws/v1alpha1 AWSNodeTemplate.
type nodeTemplate struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            nodeTemplateSpec  `json:"spec"`
	Status          json.RawMessage   `json:"status,omitempty"`
}

type nodeTemplateSpec struct {
	SubnetSelector        map[string]string           `json:"subnetSelector,omitempty"`
	SecurityGroupSelector map[string]string           `json:"securityGroupSelector,omitempty"`
	AMISelector           map[string]string           `json:"amiSelector,omitempty"`
	AMIFamily             *string                     `json:"amiFamily,omitempty"`
	InstanceProfile       *string                     `json:"instanceProfile,omitempty"`
	LaunchTemplateName    *string                     `json:"launchTemplate,omitempty"`
	UserData              *string                     `json:"userData,omitempty"`
	Tags                  map[string]string           `json:"tags,omitempty"`
	BlockDeviceMappings   []*awsv1.BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	MetadataOptions       *awsv1.MetadataOptions      `json:"metadataOptions,omitempty"`
	DetailedMonitoring    *bool                       `json:"detailedMonitoring,omitempty"`
	Context               *string                     `json:"context,omitempty"`
	InstanceStorePolicy   *awsv1.InstanceStorePolicy  `json:"instanceStorePolicy,omitempty"`
	AssociatePublicIP     *bool                       `json:"associatePublicIPAddress,omitempty"`
}

// kubelet is v1alpha5's kubeletConfiguration and v1beta1's kubelet: reserved
// resources are quantities there, strings in v1.
type kubelet struct {
	ClusterDNS                  []string                     `json:"clusterDNS,omitempty"`
	ContainerRuntime            *string                      `json:"containerRuntime,omitempty"`
	MaxPods                     *int32                       `json:"maxPods,omitempty"`
	PodsPerCore                 *int32                       `json:"podsPerCore,omitempty"`
	SystemReserved              map[string]resource.Quantity `json:"systemReserved,omitempty"`
	KubeReserved                map[string]resource.Quantity `json:"kubeReserved,omitempty"`
	EvictionHard                map[string]string            `json:"evictionHard,omitempty"`
	EvictionSoft                map[string]string            `json:"evictionSoft,omitempty"`
	EvictionSoftGracePeriod     map[string]metav1.Duration   `json:"evictionSoftGracePeriod,omitempty"`
	EvictionMaxPodGracePeriod   *int32                       `json:"evictionMaxPodGracePeriod,omitempty"`
	ImageGCHighThresholdPercent *int32                       `json:"imageGCHighThresholdPercent,omitempty"`
	ImageGCLowThresholdPercent  *int32                       `json:"imageGCLowThresholdPercent,omitempty"`
	CPUCFSQuota                 *bool                        `json:"cpuCFSQuota,omitempty"`
}

// nodePoolV1beta1 is a karpenter.sh/v1beta1 NodePool.
type nodePoolV1beta1 struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta   `json:"metadata"`
	Spec            nodePoolSpecV1beta1 `json:"spec"`
	Status          json.RawMessage     `json:"status,omitempty"`
}

type nodePoolSpecV1beta1 struct {
	Template struct {
		Metadata v1.ObjectMeta        `json:"metadata,omitempty"`
		Spec     nodeClaimSpecV1beta1 `json:"spec"`
	} `json:"template"`
	Disruption *struct {
		ConsolidateAfter    v1.NillableDuration `json:"consolidateAfter,omitzero"`
		ConsolidationPolicy string              `json:"consolidationPolicy,omitempty"`
		ExpireAfter         v1.NillableDuration `json:"expireAfter,omitzero"`
		Budgets             []v1.Budget         `json:"budgets,omitempty"`
	} `json:"disruption,omitempty"`
	Limits corev1.ResourceList `json:"limits,omitempty"`
	Weight *int32              `json:"weight,omitempty"`
}

// nodeClaimV1beta1 is a karpenter.sh/v1beta1 NodeClaim.
type nodeClaimV1beta1 struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta    `json:"metadata"`
	Spec            nodeClaimSpecV1beta1 `json:"spec"`
	Status          json.RawMessage      `json:"status,omitempty"`
}

type nodeClaimSpecV1beta1 struct {
	Taints        []corev1.Taint                            `json:"taints,omitempty"`
	StartupTaints []corev1.Taint                            `json:"startupTaints,omitempty"`
	Requirements  []v1.NodeSelectorRequirementWithMinValues `json:"requirements,omitempty"`
	Resources     v1.ResourceRequirements                   `json:"resources,omitempty"`
	Kubelet       *kubelet                                  `json:"kubelet,omitempty"`
	NodeClassRef  *objectReference                          `json:"nodeClassRef,omitempty"`
}

// nodeClassV1beta1 is a karpenter.k8s.aws/v1beta1 EC2NodeClass. Its spec is a
// subset of v1's, so v1's type reads it.
type nodeClassV1beta1 struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta      `json:"metadata"`
	Spec            awsv1.EC2NodeClassSpec `json:"spec"`
	Status          json.RawMessage        `json:"status,omitempty"`
}
