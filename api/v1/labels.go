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
	// KnownEphemeralTaints are on a Node while it comes up, put there by the API
	// server's admission, the node lifecycle controller and the cloud controller
	// manager, and taken off by them.
	KnownEphemeralTaints = []corev1.Taint{
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
	}
)

// RestrictedLabelDomains may not appear in NodePool requirements or template labels,
// except for the keys in WellKnownLabels. As in Karpenter v1.10+, kubernetes.io and
// k8s.io are not among them: the NodeRestriction admission plugin already stops a
// kubelet from setting those labels on itself, and Tailor puts a NodeClaim's labels
// on its Node centrally, so only Tailor's own domain (and kubernetes.io/hostname) is
// held back.
var RestrictedLabelDomains = []string{Group}

// WellKnownLabels are the keys Tailor (or the cloud) sets on every node it launches;
// a NodePool may constrain them even in a restricted domain.
var WellKnownLabels = []string{
	NodePoolLabelKey, CapacityTypeLabelKey,
	LabelInstanceType, LabelZone, LabelRegion, LabelArch, LabelOS, LabelWindowsBuild,
	"beta.kubernetes.io/instance-type", "beta.kubernetes.io/os", "beta.kubernetes.io/arch",
	"failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
}
