package aws

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
)

// Labels of a node launched into a placement group, as Karpenter's AWS provider
// names them: the group's ID, and the instance's partition in a partition group.
const (
	LabelPlacementGroupID        = labelPrefix + "placement-group-id"
	LabelPlacementGroupPartition = labelPrefix + "placement-group-partition"
)

// PlacementGroup is the placement group an EC2NodeClass's placementGroupSelector
// resolved to. The zero value is no group.
type PlacementGroup struct {
	ID, Name string
	// Strategy is cluster, partition or spread.
	Strategy       string
	PartitionCount int32
}

// PlacementGroupQuery is the DescribePlacementGroups request of a selector: by ID
// (a group shared from another account is found only so), or by name.
func PlacementGroupQuery(sel *awsv1.PlacementGroupSelectorTerm) *ec2.DescribePlacementGroupsInput {
	if sel.ID != "" {
		return &ec2.DescribePlacementGroupsInput{GroupIds: []string{sel.ID}}
	}
	return &ec2.DescribePlacementGroupsInput{GroupNames: []string{sel.Name}}
}

// PlacementGroupOf picks the selected group from a DescribePlacementGroups answer;
// one that is not available (pending, deleting) cannot take launches.
func PlacementGroupOf(sel *awsv1.PlacementGroupSelectorTerm, found []ec2types.PlacementGroup) (PlacementGroup, error) {
	what := "named " + sel.Name
	if sel.ID != "" {
		what = sel.ID
	}
	for _, g := range found {
		if (sel.ID != "" && deref(g.GroupId) != sel.ID) || (sel.ID == "" && deref(g.GroupName) != sel.Name) {
			continue
		}
		if g.State != ec2types.PlacementGroupStateAvailable {
			return PlacementGroup{}, fmt.Errorf("placement group %s is %s, not available", what, g.State)
		}
		return PlacementGroup{ID: deref(g.GroupId), Name: deref(g.GroupName), Strategy: string(g.Strategy), PartitionCount: deref(g.PartitionCount)}, nil
	}
	return PlacementGroup{}, fmt.Errorf("placement group %s was not found", what)
}

// String describes the group for the NodeClass's PlacementGroupReady condition.
func (g PlacementGroup) String() string {
	s := fmt.Sprintf("placement group %s (%s), strategy %s", g.Name, g.ID, g.Strategy)
	if g.Strategy == string(ec2types.PlacementStrategyPartition) {
		s += fmt.Sprintf(", %d partitions", g.PartitionCount)
	}
	return s
}

// placementGroupEntry is a NodeClass's resolved group, for the selector it was
// resolved for.
type placementGroupEntry struct {
	selector awsv1.PlacementGroupSelectorTerm
	group    PlacementGroup
}

// resolvePlacementGroup describes the NodeClass's placement group. A read that
// failed for a passing reason (throttling, a timeout) keeps the group resolved
// before for the same selector, as the other parts of a resolution do.
func (c *CloudProvider) resolvePlacementGroup(ctx context.Context, nc *awsv1.EC2NodeClass) (PlacementGroup, error) {
	sel := nc.Spec.PlacementGroupSelector
	if sel == nil {
		c.mu.Lock()
		delete(c.placementGroups, nc.Name)
		c.mu.Unlock()
		return PlacementGroup{}, nil
	}
	out, err := c.aws.EC2.DescribePlacementGroups(ctx, PlacementGroupQuery(sel))
	var g PlacementGroup
	switch {
	case err != nil && transient(err):
		c.mu.Lock()
		e, ok := c.placementGroups[nc.Name]
		c.mu.Unlock()
		if ok && e.selector == *sel {
			return e.group, nil
		}
		return PlacementGroup{}, fmt.Errorf("describing placement group: %w", err)
	case err != nil:
		return PlacementGroup{}, fmt.Errorf("describing placement group: %w", err)
	}
	if g, err = PlacementGroupOf(sel, out.PlacementGroups); err != nil {
		return PlacementGroup{}, err
	}
	c.mu.Lock()
	c.placementGroups[nc.Name] = placementGroupEntry{selector: *sel, group: g}
	c.mu.Unlock()
	return g, nil
}

// placementGroupFor is the group a launch of the NodeClass goes into: the one
// resolved with the NodeClass, or, when this process has not resolved it yet
// (after a restart), described now. Never none when the NodeClass selects one.
func (c *CloudProvider) placementGroupFor(ctx context.Context, nc *awsv1.EC2NodeClass) (PlacementGroup, error) {
	sel := nc.Spec.PlacementGroupSelector
	if sel == nil {
		return PlacementGroup{}, nil
	}
	c.mu.Lock()
	e, ok := c.placementGroups[nc.Name]
	c.mu.Unlock()
	if ok && e.selector == *sel {
		return e.group, nil
	}
	g, err := c.resolvePlacementGroup(ctx, nc)
	if err != nil {
		return PlacementGroup{}, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	return g, nil
}

// placeLaunched records the group of an instance just launched into it, and its
// partition, which EC2 picks and only DescribeInstances tells; an instance EC2
// does not show yet keeps its partition unlabelled until it is read again.
func (c *CloudProvider) placeLaunched(ctx context.Context, inst *Instance, g PlacementGroup) {
	if g.ID == "" {
		return
	}
	inst.PlacementGroupID = g.ID
	if g.Strategy != string(ec2types.PlacementStrategyPartition) {
		return
	}
	if described, found, err := c.describe(ctx, inst.ID); err == nil && found {
		inst.Partition = described.Partition
	}
}

// placementLabels are the labels of an instance in a placement group.
func placementLabels(groupID string, partition int32) map[string]string {
	out := map[string]string{}
	if groupID != "" {
		out[LabelPlacementGroupID] = groupID
		if partition > 0 {
			out[LabelPlacementGroupPartition] = strconv.Itoa(int(partition))
		}
	}
	return out
}
