package sim

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

var _ cloudprovider.InterruptionSource = (*CloudProvider)(nil)

// Interrupt announces that the instance will be reclaimed at at, as a spot market
// does two minutes ahead.
func (c *CloudProvider) Interrupt(ctx context.Context, providerID string, at time.Time) error {
	name, ok := instanceOf(providerID)
	if !ok {
		return &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
	}
	inst := &v1alpha1.SimInstance{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, inst); err != nil {
		return err
	}
	patch := client.MergeFrom(inst.DeepCopy())
	t := metav1.NewTime(at)
	inst.Spec.InterruptAt = &t
	return c.kube.Patch(ctx, inst, patch)
}

// Interruptions lists the announced interruptions.
func (c *CloudProvider) Interruptions(ctx context.Context) ([]cloudprovider.Interruption, error) {
	list := &v1alpha1.SimInstanceList{}
	if err := c.kube.List(ctx, list); err != nil {
		return nil, err
	}
	var out []cloudprovider.Interruption
	for i := range list.Items {
		inst := &list.Items[i]
		if inst.Spec.InterruptAt != nil && inst.DeletionTimestamp == nil {
			out = append(out, cloudprovider.Interruption{ProviderID: ProviderID(inst), At: inst.Spec.InterruptAt.Time, Kind: cloudprovider.KindSpotInterruption})
		}
	}
	return out, nil
}
