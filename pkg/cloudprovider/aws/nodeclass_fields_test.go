package aws

import (
	"github.com/aws/aws-sdk-go-v2/aws"

	"testing"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
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
