package v1

import (
	corev1 "k8s.io/api/core/v1"
)

// Well-known labels. The Kubernetes ones are repeated here so the scheduling engine
// and the API agree on one spelling.
const (
	NodePoolLabelKey        = Group + "/nodepool"
	CapacityTypeLabelKey    = Group + "/capacity-type"
	NodeInitializedLabelKey = Group + "/initialized"
	NodeRegisteredLabelKey  = Group + "/registered"
	// NodeDoNotSyncTaintsLabelKey, "true" on a Node (set by its kubelet), keeps
	// registration from syncing the NodeClaim's taints onto it.
	NodeDoNotSyncTaintsLabelKey = Group + "/do-not-sync-taints"

	LabelHostname     = corev1.LabelHostname
	LabelInstanceType = corev1.LabelInstanceTypeStable
	LabelZone         = corev1.LabelTopologyZone
	LabelRegion       = corev1.LabelTopologyRegion
	LabelArch         = corev1.LabelArchStable
	LabelOS           = corev1.LabelOSStable
	LabelWindowsBuild = corev1.LabelWindowsBuild

	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
)

// Well-known annotations.
const (
	DoNotDisruptAnnotationKey                  = Group + "/do-not-disrupt"
	NodePoolHashAnnotationKey                  = Group + "/nodepool-hash"
	NodePoolHashVersionAnnotationKey           = Group + "/nodepool-hash-version"
	NodeClaimTerminationTimestampAnnotationKey = Group + "/nodeclaim-termination-timestamp"
	// NodeClaimMinValuesRelaxedAnnotationKey is "true" on a claim whose NodePool's
	// minValues were relaxed to launch it (--min-values-policy BestEffort).
	NodeClaimMinValuesRelaxedAnnotationKey = Group + "/nodeclaim-min-values-relaxed"
)

// TerminationFinalizer holds Nodes and NodeClaims until their instance is gone.
const TerminationFinalizer = Group + "/termination"

// Well-known taints.
var (
	// UnregisteredNoExecuteTaint is put on a Node at creation and removed once Tailor
	// has synced the NodeClaim's labels and taints onto it.
	UnregisteredNoExecuteTaint = corev1.Taint{Key: Group + "/unregistered", Effect: corev1.TaintEffectNoExecute}
	// DisruptedNoScheduleTaint marks a node that is being disrupted or terminated.
	DisruptedNoScheduleTaint = corev1.Taint{Key: Group + "/disrupted", Effect: corev1.TaintEffectNoSchedule}
)

// RestrictedLabelDomains may not appear in NodePool requirements or template labels,
// except for the keys in WellKnownLabels and the subdomains in LabelDomainExceptions.
var RestrictedLabelDomains = []string{"kubernetes.io", "k8s.io", Group}

// LabelDomainExceptions are subdomains of restricted domains that users may set.
var LabelDomainExceptions = []string{"kops.k8s.io", "node.kubernetes.io", "node-restriction.kubernetes.io"}

// WellKnownLabels are the restricted-domain keys a NodePool may constrain: Tailor (or
// the cloud) sets them on every node it launches.
var WellKnownLabels = []string{
	NodePoolLabelKey, CapacityTypeLabelKey,
	LabelInstanceType, LabelZone, LabelRegion, LabelArch, LabelOS, LabelWindowsBuild,
	"beta.kubernetes.io/instance-type", "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
	"failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
}
