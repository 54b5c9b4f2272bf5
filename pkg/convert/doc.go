// Package convert turns Karpenter's older APIs into the ones Tailor serves: the
// karpenter.sh/v1alpha5 Provisioner and karpenter.k8s.aws/v1alpha1 AWSNodeTemplate,
// and the v1beta1 NodePool, NodeClaim and EC2NodeClass, become karpenter.sh/v1
// NodePools and NodeClaims and karpenter.k8s.aws/v1 EC2NodeClasses. It follows
// Karpenter's published migration guides (v1alpha5 to v1beta1, v1beta1 to v1), keeps
// the old behaviour where the new API changed a default, and returns a warning for
// everything it could not carry over. It is pure: bytes in, bytes and warnings out.
package convert
