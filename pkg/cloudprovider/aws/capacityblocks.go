package aws

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

// KindCapacityBlockExpiring is the notice for a node whose capacity block ends.
const KindCapacityBlockExpiring = "CapacityBlockExpiring"

const (
	// capacityBlockReclaim is how long before a capacity block's end EC2 begins
	// terminating its instances.
	capacityBlockReclaim = 30 * time.Minute
	// capacityBlockDrainLead is how much earlier still its nodes are drained, as
	// Karpenter does, so pods leave before the instances are taken.
	capacityBlockDrainLead = 10 * time.Minute
)

// CapacityBlocks announces the nodes of capacity blocks about to end, read from
// the NodeClaims' reservation labels and the EC2NodeClasses' resolved
// reservations.
type CapacityBlocks struct {
	kube  client.Client
	clock clock.Clock
}

var _ cloudprovider.InterruptionSource = (*CapacityBlocks)(nil)

// NewCapacityBlocks reads claims and NodeClasses through kube.
func NewCapacityBlocks(kube client.Client, clk clock.Clock) *CapacityBlocks {
	return &CapacityBlocks{kube: kube, clock: clk}
}

// Interruptions are the notices for the capacity-block nodes due to be drained.
func (c *CapacityBlocks) Interruptions(ctx context.Context) ([]cloudprovider.Interruption, error) {
	claims := &v1.NodeClaimList{}
	if err := c.kube.List(ctx, claims, client.MatchingLabels{LabelCapacityReservationType: string(awsv1.CapacityReservationTypeCapacityBlock)}); err != nil {
		return nil, fmt.Errorf("listing capacity-block NodeClaims: %w", err)
	}
	if len(claims.Items) == 0 {
		return nil, nil
	}
	classes := &awsv1.EC2NodeClassList{}
	if err := c.kube.List(ctx, classes); err != nil {
		return nil, fmt.Errorf("listing EC2NodeClasses for capacity blocks: %w", err)
	}
	ends := map[string]time.Time{}
	for _, nc := range classes.Items {
		for _, r := range nc.Status.CapacityReservations {
			if r.EndTime != nil {
				ends[r.ID] = r.EndTime.Time
			}
		}
	}
	return capacityBlockNotices(claims.Items, ends, c.clock.Now()), nil
}

// capacityBlockNotices are the notices for claims whose capacity block (by
// reservation id in ends) is within the drain lead of EC2's reclaim.
func capacityBlockNotices(claims []v1.NodeClaim, ends map[string]time.Time, now time.Time) []cloudprovider.Interruption {
	var out []cloudprovider.Interruption
	for _, nc := range claims {
		end, ok := ends[nc.Labels[LabelCapacityReservationID]]
		if !ok || nc.Status.ProviderID == "" || nc.DeletionTimestamp != nil {
			continue
		}
		reclaim := end.Add(-capacityBlockReclaim)
		if now.Before(reclaim.Add(-capacityBlockDrainLead)) {
			continue
		}
		out = append(out, cloudprovider.Interruption{ProviderID: nc.Status.ProviderID, At: reclaim, Kind: KindCapacityBlockExpiring})
	}
	return out
}

// Interruptions merges several sources: each is read every poll, and one that
// fails does not hide the others' notices.
type Interruptions []cloudprovider.InterruptionSource

// Interruptions returns every source's notices, and their errors joined.
func (s Interruptions) Interruptions(ctx context.Context) ([]cloudprovider.Interruption, error) {
	var out []cloudprovider.Interruption
	var errs []error
	for _, src := range s {
		notices, err := src.Interruptions(ctx)
		out = append(out, notices...)
		errs = append(errs, err)
	}
	return out, errors.Join(errs...)
}
