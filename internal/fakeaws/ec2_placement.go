package fakeaws

import (
	"cmp"
	"fmt"
	"slices"
)

// PlacementGroup is an EC2 placement group of the account (or shared with it:
// such a group is found by ID only, as EC2 has it).
type PlacementGroup struct {
	ID   string
	Name string
	// Strategy is cluster, partition or spread.
	Strategy string
	// PartitionCount is a partition group's partitions (1 to 7).
	PartitionCount int
	// SpreadLevel is a spread group's level: rack (the default) or host.
	SpreadLevel string
	// State is available (the default), pending, deleting or deleted.
	State string
	// SharedFrom, when set, is the account that shares the group.
	SharedFrom string
	Tags       map[string]string
}

// maxSpreadPerZone is how many running instances a rack spread group holds per
// availability zone.
const maxSpreadPerZone = 7

type xmlPlacementGroup struct {
	GroupName      string       `xml:"groupName"`
	GroupID        string       `xml:"groupId"`
	GroupArn       string       `xml:"groupArn"`
	State          string       `xml:"state"`
	Strategy       string       `xml:"strategy"`
	PartitionCount int          `xml:"partitionCount,omitempty"`
	SpreadLevel    string       `xml:"spreadLevel,omitempty"`
	Tags           []xmlTagItem `xml:"tagSet>item"`
}

func (s *Server) placementGroupView(g *PlacementGroup) xmlPlacementGroup {
	owner := cmp.Or(g.SharedFrom, s.opts.AccountID)
	return xmlPlacementGroup{GroupName: g.Name, GroupID: g.ID, State: g.State, Strategy: g.Strategy,
		PartitionCount: g.PartitionCount, SpreadLevel: g.SpreadLevel, Tags: tagItems(g.Tags),
		GroupArn: fmt.Sprintf("arn:aws:ec2:%s:%s:placement-group/%s", s.opts.Region, owner, g.Name)}
}

// describePlacementGroups answers by name (the account's own groups), by ID (own
// or shared) and by filters. A name or ID EC2 does not know is an error, as EC2's.
func (s *Server) describePlacementGroups(q *queryParams) (ec2Response, error) {
	ids, names := q.list("GroupId"), q.list("GroupName")
	match, err := filterSet[*PlacementGroup]{
		fields: map[string]func(*PlacementGroup) []string{
			"group-name":      func(g *PlacementGroup) []string { return []string{g.Name} },
			"group-id":        func(g *PlacementGroup) []string { return []string{g.ID} },
			"state":           func(g *PlacementGroup) []string { return []string{g.State} },
			"strategy":        func(g *PlacementGroup) []string { return []string{g.Strategy} },
			"spread-level":    func(g *PlacementGroup) []string { return []string{g.SpreadLevel} },
			"group-arn":       func(g *PlacementGroup) []string { return []string{s.placementGroupView(g).GroupArn} },
			"partition-count": func(g *PlacementGroup) []string { return []string{fmt.Sprint(g.PartitionCount)} },
		},
		tags: func(g *PlacementGroup) map[string]string { return g.Tags },
	}.compile(readFilters(q))
	if err != nil {
		return nil, err
	}
	if err := q.done(); err != nil {
		return nil, err
	}
	for _, n := range names {
		if s.placementGroupByRef("", n) == nil {
			return nil, badRequest("InvalidPlacementGroup.Unknown", "The Placement Group '%s' is unknown.", n)
		}
	}
	for _, id := range ids {
		if s.placementGroupByRef(id, "") == nil {
			return nil, badRequest("InvalidPlacementGroupId.NotFound", "The Placement Group ID '%s' does not exist.", id)
		}
	}
	var out []xmlPlacementGroup
	for _, g := range s.inv.placementGroups {
		byRef := slices.Contains(ids, g.ID) || (g.SharedFrom == "" && slices.Contains(names, g.Name))
		if len(ids)+len(names) > 0 && !byRef {
			continue
		}
		// A shared group is listed only to a caller that names its ID.
		if len(ids)+len(names) == 0 && g.SharedFrom != "" {
			continue
		}
		if match(g) {
			out = append(out, s.placementGroupView(g))
		}
	}
	return &struct {
		ec2Meta
		Groups []xmlPlacementGroup `xml:"placementGroupSet>item"`
	}{Groups: out}, nil
}

// placementGroupByRef finds a group by ID, or by name among the account's own.
func (s *Server) placementGroupByRef(id, name string) *PlacementGroup {
	for _, g := range s.inv.placementGroups {
		if (id != "" && g.ID == id) || (id == "" && name != "" && g.SharedFrom == "" && g.Name == name) {
			return g
		}
	}
	return nil
}

// placeLocked checks a launch into the template's placement group as EC2 does
// and picks the instance's partition: the group must exist and be available; a
// cluster group holds one zone and no burstable types; a rack spread group holds
// seven running instances per zone; a partition group takes the partition the
// template names (1 to its count) or, unnamed, the one with fewest instances.
func (s *Server) placeLocked(lt *launchTemplate, t *instanceType, zone string) (g *PlacementGroup, partition int, code, msg string) {
	if lt.PlacementGroupID == "" && lt.PlacementGroupName == "" {
		if lt.PartitionNumber != 0 {
			return nil, 0, "InvalidParameterCombination", "A partition number needs a placement group"
		}
		return nil, 0, "", ""
	}
	g = s.placementGroupByRef(lt.PlacementGroupID, lt.PlacementGroupName)
	if g == nil {
		return nil, 0, "InvalidPlacementGroup.Unknown", fmt.Sprintf("The Placement Group '%s' is unknown.", cmp.Or(lt.PlacementGroupID, lt.PlacementGroupName))
	}
	if g.State != "available" {
		return nil, 0, "InvalidPlacementGroup.Unknown", fmt.Sprintf("The Placement Group '%s' is %s.", g.Name, g.State)
	}
	var members []*instance
	for _, i := range s.ec2.instances {
		if i.PlacementGroupID == g.ID && i.State != stateTerminated && i.State != stateShuttingDown {
			members = append(members, i)
		}
	}
	switch g.Strategy {
	case "cluster":
		if !slices.Contains(t.placementStrategies(), "cluster") {
			return nil, 0, "InvalidParameterCombination", fmt.Sprintf("Instance type %s cannot be launched into cluster placement group %s", t.Name, g.Name)
		}
		for _, m := range members {
			if m.Zone != zone {
				return nil, 0, "InvalidParameterCombination", fmt.Sprintf("Cluster placement group %s is in %s: it cannot hold an instance in %s", g.Name, m.Zone, zone)
			}
		}
	case "spread":
		inZone := 0
		for _, m := range members {
			if m.Zone == zone {
				inZone++
			}
		}
		if cmp.Or(g.SpreadLevel, "rack") == "rack" && inZone >= maxSpreadPerZone {
			return nil, 0, "InsufficientInstanceCapacity", fmt.Sprintf("Spread placement group %s already holds %d instances in %s", g.Name, maxSpreadPerZone, zone)
		}
	case "partition":
		if lt.PartitionNumber != 0 {
			if lt.PartitionNumber < 1 || lt.PartitionNumber > g.PartitionCount {
				return nil, 0, "InvalidParameterValue", fmt.Sprintf("Partition number %d is out of range for placement group %s (1 to %d)", lt.PartitionNumber, g.Name, g.PartitionCount)
			}
			return g, lt.PartitionNumber, "", ""
		}
		count := make([]int, g.PartitionCount+1)
		for _, m := range members {
			count[m.Partition]++
		}
		partition = 1
		for p := 2; p <= g.PartitionCount; p++ {
			if count[p] < count[partition] {
				partition = p
			}
		}
		return g, partition, "", ""
	}
	if lt.PartitionNumber != 0 {
		return nil, 0, "InvalidParameterCombination", fmt.Sprintf("A partition number needs a partition placement group; %s is %s", g.Name, g.Strategy)
	}
	return g, 0, "", ""
}
