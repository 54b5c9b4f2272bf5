package disruption

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// drifted says why a node no longer matches what its NodePool would launch today:
// the template changed (its hash), its labels no longer meet the requirements, its
// instance type is no longer offered, or the provider reports its NodeClass moved on.
func (d *decider) drifted(c *Candidate) string {
	np := c.Pool.NodePool
	claimHash, poolHash := c.Claim.Annotations[v1.NodePoolHashAnnotationKey], np.Annotations[v1.NodePoolHashAnnotationKey]
	claimVersion, poolVersion := c.Claim.Annotations[v1.NodePoolHashVersionAnnotationKey], np.Annotations[v1.NodePoolHashVersionAnnotationKey]
	// A hash of another version says nothing: the hashing itself changed.
	if claimHash != "" && poolHash != "" && claimHash != poolHash && (claimVersion == "" || claimVersion == poolVersion) {
		return "NodePoolDrifted"
	}
	// Nor does it say the claim no longer drifted: a claim Karpenter marked Drifted
	// before a cut-over stays so until the NodePool controller re-stamps it (it keeps
	// the old hash under the new version), whichever of the two runs first.
	if claimVersion != "" && poolVersion != "" && claimVersion != poolVersion {
		if cond := meta.FindStatusCondition(c.Claim.Status.Conditions, v1.ConditionTypeDrifted); cond != nil && cond.Status == metav1.ConditionTrue {
			if cond.Message == "" {
				return cond.Reason
			}
			return cond.Reason + ": " + cond.Message
		}
	}
	// The claim's labels are what Tailor launched; the node's may have been edited
	// since. The node only fills in keys the claim does not carry.
	labels := c.Node.Node.Labels
	label := func(key string) (string, bool) {
		if v, ok := c.Claim.Labels[key]; ok {
			return v, true
		}
		v, ok := labels[key]
		return v, ok
	}
	if reqs, err := scheduling.FromNodePool(np.Spec.Template.Spec.Requirements, nil); err == nil {
		for i := range reqs {
			r := &reqs[i]
			if v, ok := label(r.Key); ok && !r.Has(v) || !ok && !r.AllowsAbsent() {
				return fmt.Sprintf("RequirementsDrifted: %s=%q no longer meets the NodePool's requirement %s", r.Key, v, r.String())
			}
		}
	}
	if c.Pool.Unavailable == "" && len(c.Pool.InstanceTypes) > 0 {
		if _, ok := scheduling.OfferingPrice(c.Pool.InstanceTypes, labels); !ok {
			return fmt.Sprintf("InstanceTypeNotFound: %s in %s (%s) is no longer offered", labels[v1.LabelInstanceType], labels[v1.LabelZone], labels[v1.CapacityTypeLabelKey])
		}
	}
	if why := d.in.ProviderDrift[c.Claim.Name]; why != "" {
		return why
	}
	return ""
}
