package aws

import (
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

// These tests check that each EC2NodeClass field reaches EC2 as its
// documentation says, through the SDK, against the fake's checks.

// launchOne launches one on-demand m5.large (or the given types) for nc and
// returns the fake's instance.
func (e *testEnv) launchOne(t *testing.T, nc *awsv1.EC2NodeClass, name string, types ...string) (*v1.NodeClaim, fakeaws.Instance) {
	t.Helper()
	if len(types) == 0 {
		types = []string{"m5.large"}
	}
	got, err := e.cloud.Create(t.Context(), e.claim(nc, name, req(v1.LabelInstanceType, types...), req(v1.CapacityTypeLabelKey, "on-demand")))
	if err != nil {
		t.Fatal(err)
	}
	id, err := ParseProviderID(got.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	inst, ok := e.fake.Instance(id)
	if !ok {
		t.Fatalf("no instance %s", id)
	}
	return got, inst
}

func TestContextReachesCreateFleet(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) { nc.Spec.Context = aws.String("ctx-0123") })
	_, inst := e.launchOne(t, nc, "with-context")
	if inst.FleetContext != "ctx-0123" {
		t.Errorf("CreateFleet Context = %q, want ctx-0123", inst.FleetContext)
	}
	plain := e.nodeClass(t, nil)
	if _, inst := e.launchOne(t, plain, "without-context"); inst.FleetContext != "" {
		t.Errorf("a NodeClass without context sent Context %q", inst.FleetContext)
	}
}

func TestIPPrefixCount(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) { nc.Spec.IPPrefixCount = aws.Int32(2) })
	_, inst := e.launchOne(t, nc, "prefixes")
	if inst.IPv4Prefixes != 2 {
		t.Errorf("the instance's primary interface has %d IPv4 prefixes, want 2", inst.IPv4Prefixes)
	}
	// EC2 takes at most the interface's secondary addresses in prefixes: 9 on an
	// m5.large (10 IPv4 addresses per interface).
	tooMany := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) { nc.Spec.IPPrefixCount = aws.Int32(12) })
	if _, err := e.cloud.Create(t.Context(), e.claim(tooMany, "too-many", req(v1.LabelInstanceType, "m5.large"), req(v1.CapacityTypeLabelKey, "on-demand"))); err == nil {
		t.Error("12 IPv4 prefixes on an m5.large launched; EC2 refuses more than 9")
	}
}

func TestIPPrefixCountFollowsTheClusterFamily(t *testing.T) {
	nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{IPPrefixCount: aws.Int32(1), AMIFamily: aws.String(awsv1.AMIFamilyAL2023)}}
	for _, ipv6 := range []bool{false, true} {
		_, data := LaunchTemplate(LaunchTemplateInput{Cluster: "c", NodeClass: nc, ImageID: "ami-1", SecurityGroups: []string{"sg-1"}, IPv6: ipv6})
		if len(data.NetworkInterfaces) != 1 || len(data.SecurityGroupIds) != 0 {
			t.Fatalf("ipv6=%v: want one interface carrying the groups, got %+v and groups %v", ipv6, data.NetworkInterfaces, data.SecurityGroupIds)
		}
		ni := data.NetworkInterfaces[0]
		v4, v6 := ni.Ipv4PrefixCount, ni.Ipv6PrefixCount
		if ipv6 && (v6 == nil || *v6 != 1 || v4 != nil) || !ipv6 && (v4 == nil || *v4 != 1 || v6 != nil) {
			t.Errorf("ipv6=%v: Ipv4PrefixCount %v, Ipv6PrefixCount %v", ipv6, v4, v6)
		}
		if deref(ni.DeviceIndex) != 0 || len(ni.Groups) != 1 {
			t.Errorf("ipv6=%v: primary interface %+v", ipv6, ni)
		}
	}
}

// In an IPv6 cluster every interface with addresses asks for one IPv6 address
// and makes it its primary IPv6 address, as Karpenter's launch templates do (the
// node registers with it); efa-only interfaces have no addresses. Without any
// interface option the template still gets a primary interface for it. An IPv4
// cluster's templates ask for none.
func TestLaunchTemplateAsksForAnIPv6Address(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*awsv1.EC2NodeClass)
		efa  int
	}{
		{name: "default"},
		{name: "public address", edit: func(nc *awsv1.EC2NodeClass) { nc.Spec.AssociatePublicIPAddress = aws.Bool(false) }},
		{name: "efa", efa: 2},
		{name: "networkInterfaces", edit: func(nc *awsv1.EC2NodeClass) {
			nc.Spec.NetworkInterfaces = []*awsv1.NetworkInterface{{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
				{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeEFAOnly}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMIFamily: aws.String(awsv1.AMIFamilyAL2023)}}
			if tc.edit != nil {
				tc.edit(nc)
			}
			for _, ipv6 := range []bool{false, true} {
				_, data := LaunchTemplate(LaunchTemplateInput{Cluster: "c", NodeClass: nc, ImageID: "ami-1", SecurityGroups: []string{"sg-1"}, IPv6: ipv6, EFA: tc.efa})
				if ipv6 && (len(data.NetworkInterfaces) == 0 || len(data.SecurityGroupIds) != 0) {
					t.Fatalf("ipv6: want the groups on interfaces, got %+v and groups %v", data.NetworkInterfaces, data.SecurityGroupIds)
				}
				for i, ni := range data.NetworkInterfaces {
					want := ipv6 && deref(ni.InterfaceType) != string(awsv1.InterfaceTypeEFAOnly)
					if got := ni.Ipv6AddressCount != nil && *ni.Ipv6AddressCount == 1 && deref(ni.PrimaryIpv6); got != want ||
						!want && (ni.Ipv6AddressCount != nil || ni.PrimaryIpv6 != nil) {
						t.Errorf("ipv6=%v: interface %d (%s): Ipv6AddressCount %v, PrimaryIpv6 %v; want an address: %v",
							ipv6, i, deref(ni.InterfaceType), ni.Ipv6AddressCount, ni.PrimaryIpv6, want)
					}
				}
			}
		})
	}
}

// placementGroups are the fake account's groups for the placement tests.
func placementGroups(inv *fakeaws.Inventory) {
	inv.PlacementGroups = append(inv.PlacementGroups,
		fakeaws.PlacementGroup{ID: "pg-0a1b2c3d4e5f60001", Name: "kafka", Strategy: "partition", PartitionCount: 3},
		fakeaws.PlacementGroup{ID: "pg-0a1b2c3d4e5f60002", Name: "hpc", Strategy: "cluster"},
		fakeaws.PlacementGroup{ID: "pg-0a1b2c3d4e5f60003", Name: "shared", Strategy: "spread", SharedFrom: "210987654321"},
		fakeaws.PlacementGroup{ID: "pg-0a1b2c3d4e5f60004", Name: "going", Strategy: "spread", State: "deleting"},
	)
}

func TestPlacementGroupSelector(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{Inventory: placementGroups})
	pg := func(sel awsv1.PlacementGroupSelectorTerm) func(*awsv1.EC2NodeClass) {
		return func(nc *awsv1.EC2NodeClass) { nc.Spec.PlacementGroupSelector = &sel }
	}

	// A partition group by name: Ready, and each launch goes into it, labelled
	// with the group and the partition EC2 put it in.
	kafka := e.nodeClass(t, pg(awsv1.PlacementGroupSelectorTerm{Name: "kafka"}))
	if !kafka.IsReady() {
		t.Fatalf("a NodeClass selecting an available group is not Ready: %+v", kafka.Status.Conditions)
	}
	if c := meta.FindStatusCondition(kafka.Status.Conditions, awsv1.ConditionTypePlacementGroupReady); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "pg-0a1b2c3d4e5f60001") {
		t.Errorf("PlacementGroupReady does not name the group: %+v", c)
	}
	partitions := map[string]bool{}
	for _, name := range []string{"kafka-1", "kafka-2", "kafka-3"} {
		got, inst := e.launchOne(t, kafka, name)
		if inst.PlacementGroupID != "pg-0a1b2c3d4e5f60001" || inst.Partition == 0 {
			t.Fatalf("instance %s is in group %q partition %d, want kafka's", inst.ID, inst.PlacementGroupID, inst.Partition)
		}
		if got.Labels[LabelPlacementGroupID] != "pg-0a1b2c3d4e5f60001" || got.Labels[LabelPlacementGroupPartition] != strconv.Itoa(inst.Partition) {
			t.Errorf("claim %s labels %v, instance in partition %d", name, got.Labels, inst.Partition)
		}
		partitions[got.Labels[LabelPlacementGroupPartition]] = true
		again, err := e.cloud.Get(t.Context(), got.Status.ProviderID)
		if err != nil || again.Labels[LabelPlacementGroupPartition] != strconv.Itoa(inst.Partition) {
			t.Errorf("Get of %s: labels %v, %v", name, again.Labels, err)
		}
	}
	if len(partitions) != 3 {
		t.Errorf("EC2 spreads launches over the group's partitions; got %v", partitions)
	}

	// A group shared from another account is selected by its ID.
	shared := e.nodeClass(t, pg(awsv1.PlacementGroupSelectorTerm{ID: "pg-0a1b2c3d4e5f60003"}))
	if _, inst := e.launchOne(t, shared, "shared-1"); inst.PlacementGroupID != "pg-0a1b2c3d4e5f60003" || inst.Partition != 0 {
		t.Errorf("instance in group %q partition %d, want the shared spread group", inst.PlacementGroupID, inst.Partition)
	}

	// A cluster group holds one zone: the fleet falls to the group's zone.
	hpc := e.nodeClass(t, pg(awsv1.PlacementGroupSelectorTerm{Name: "hpc"}))
	_, first := e.launchOne(t, hpc, "hpc-1", "m5.large", "c5.large")
	for _, name := range []string{"hpc-2", "hpc-3"} {
		if _, inst := e.launchOne(t, hpc, name, "m5.large", "c5.large"); inst.Zone != first.Zone || inst.PlacementGroupID != "pg-0a1b2c3d4e5f60002" {
			t.Errorf("%s in %s (group %q); the cluster group is in %s", name, inst.Zone, inst.PlacementGroupID, first.Zone)
		}
	}

	// A group that is missing, or not available, leaves the NodeClass not Ready,
	// saying why, and nothing launches.
	for _, sel := range []awsv1.PlacementGroupSelectorTerm{{Name: "no-such-group"}, {ID: "pg-0a1b2c3d4e5f6ffff"}, {Name: "going"}} {
		nc := e.nodeClass(t, pg(sel))
		ready := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady)
		if nc.IsReady() || ready == nil || ready.Reason != "PlacementGroupNotFound" {
			t.Errorf("selector %+v: Ready %+v", sel, ready)
		}
		if _, err := e.cloud.Create(t.Context(), e.claim(nc, "never-"+sel.Name+sel.ID, req(v1.LabelInstanceType, "m5.large"))); !cloudprovider.IsNodeClassNotReady(err) {
			t.Errorf("selector %+v: launch %v, want NodeClassNotReady", sel, err)
		}
	}

	// A provider that has not resolved the NodeClass yet (a restart) still
	// launches into the group.
	e.cloud = e.restart()
	if _, inst := e.launchOne(t, kafka, "kafka-after-restart"); inst.PlacementGroupID != "pg-0a1b2c3d4e5f60001" {
		t.Errorf("after a restart the instance is in group %q", inst.PlacementGroupID)
	}
}
