package sim

import (
	"context"
	"fmt"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

var _ cloudprovider.NodeCoster = (*CloudProvider)(nil)

// NodeCost is the pool's SimNodeClass's perNodeCost, the simulated cloud's stand-in
// for the volumes and addresses a real cloud bills with each node.
func (c *CloudProvider) NodeCost(ctx context.Context, pool *v1.NodePool) (scheduling.NodeCost, error) {
	nc, err := c.nodeClass(ctx, pool.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return scheduling.NodeCost{}, err
	}
	return NodeClassCost(nc)
}

// NodeClassCost reads a SimNodeClass's perNodeCost.
func NodeClassCost(nc *v1alpha1.SimNodeClass) (scheduling.NodeCost, error) {
	if nc.Spec.PerNodeCost == "" {
		return scheduling.NodeCost{}, nil
	}
	v, err := v1alpha1.ParsePerNodeCost(nc.Spec.PerNodeCost)
	if err != nil {
		return scheduling.NodeCost{}, fmt.Errorf("SimNodeClass %s: spec.perNodeCost: %w", nc.Name, err)
	}
	return scheduling.NodeCost{PerNode: v}, nil
}
