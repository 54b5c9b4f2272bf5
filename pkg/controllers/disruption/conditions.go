package disruption

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/nodetailor/tailor/api/v1"
	disrupt "github.com/nodetailor/tailor/pkg/disruption"
)

// claimConditions are the Drifted and Consolidatable conditions a claim's state
// calls for, as Karpenter writes them: True with the reason while they hold, gone
// otherwise.
func claimConditions(state disrupt.ClaimState) map[string]*metav1.Condition {
	out := map[string]*metav1.Condition{v1.ConditionTypeDrifted: nil, v1.ConditionTypeConsolidatable: nil}
	if state.Drifted != "" {
		reason, message, _ := strings.Cut(state.Drifted, ": ")
		out[v1.ConditionTypeDrifted] = &metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: reason, Message: message}
	}
	if state.Consolidatable {
		out[v1.ConditionTypeConsolidatable] = &metav1.Condition{Type: v1.ConditionTypeConsolidatable, Status: metav1.ConditionTrue, Reason: v1.ConditionTypeConsolidatable}
	}
	return out
}

// applyConditions sets or removes conditions on a copy's status and reports
// whether anything changed; an unchanged condition keeps its transition time.
func applyConditions(status *v1.NodeClaimStatus, want map[string]*metav1.Condition) bool {
	changed := false
	for typ, cond := range want {
		have := meta.FindStatusCondition(status.Conditions, typ)
		switch {
		case cond == nil && have != nil:
			meta.RemoveStatusCondition(&status.Conditions, typ)
			changed = true
		case cond != nil && (have == nil || have.Status != cond.Status || have.Reason != cond.Reason || have.Message != cond.Message):
			meta.SetStatusCondition(&status.Conditions, *cond)
			changed = true
		}
	}
	return changed
}

// writeConditions brings each candidate claim's Drifted and Consolidatable
// conditions up to date; only claims whose conditions change are written. A failed
// write is logged and tried again next pass.
func (c *Controller) writeConditions(ctx context.Context, claims []*v1.NodeClaim, states map[string]disrupt.ClaimState) {
	for _, nc := range claims {
		state, ok := states[nc.Name]
		if !ok || nc.DeletionTimestamp != nil {
			continue
		}
		c.patchConditions(ctx, nc, claimConditions(state))
	}
}

func (c *Controller) patchConditions(ctx context.Context, nc *v1.NodeClaim, want map[string]*metav1.Condition) {
	updated := nc.DeepCopy()
	if !applyConditions(&updated.Status, want) {
		return
	}
	// The optimistic lock keeps a stale cached copy from overwriting conditions
	// another controller wrote since: the next pass tries again.
	if err := c.kube.Status().Patch(ctx, updated, client.MergeFromWithOptions(nc, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		log.FromContext(ctx).Error(err, "writing disruption conditions", "nodeclaim", nc.Name)
	}
}

// markDisrupting records on a claim why it is being disrupted (Karpenter's
// DisruptionReason condition), so `kubectl get nodeclaims` shows it.
func (c *Controller) markDisrupting(ctx context.Context, nc *v1.NodeClaim, reason v1.DisruptionReason) {
	c.patchConditions(ctx, nc, map[string]*metav1.Condition{v1.ConditionTypeDisruptionReason: {
		Type: v1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue, Reason: string(reason)}})
}
