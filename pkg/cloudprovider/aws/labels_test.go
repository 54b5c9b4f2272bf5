package aws

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// topology.k8s.aws/zone-id and karpenter.k8s.aws/ec2nodeclass, as Karpenter's AWS
// provider sets them: every instance type carries the IDs of its zones, a claim
// that requires a zone ID launches only into that zone, and the NodeClaim (so its
// Node) is labelled with its zone's ID and its EC2NodeClass, also when read back.
func TestZoneIDAndNodeClassLabels(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	idOf := map[string]string{}
	var ids []string
	for _, s := range nc.Status.Subnets {
		if s.ZoneID == "" {
			t.Fatalf("subnet %s has no zone ID in the status", s.ID)
		}
		if idOf[s.Zone] == "" {
			ids = append(ids, s.ZoneID)
		}
		idOf[s.Zone] = s.ZoneID
	}
	if len(ids) < 2 {
		t.Fatalf("the test needs subnets in two zones: %+v", nc.Status.Subnets)
	}
	pool := &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nc.Name}}}}}
	types, err := e.cloud.InstanceTypes(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		if it.Name != "m5.large" {
			continue
		}
		r, ok := it.Requirements.Get(LabelTopologyZoneID)
		if !ok {
			t.Fatalf("m5.large has no %s requirement: %v", LabelTopologyZoneID, it.Requirements)
		}
		for _, o := range it.Offerings {
			if !r.Has(idOf[o.Zone]) {
				t.Errorf("%s of m5.large does not allow %s's ID %s", LabelTopologyZoneID, o.Zone, idOf[o.Zone])
			}
		}
	}

	want := ids[1]
	claim, err := e.cloud.Create(t.Context(), e.claim(nc, "by-zone-id", req(LabelTopologyZoneID, want), req(v1.LabelInstanceType, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	if got := claim.Labels[LabelTopologyZoneID]; got != want || idOf[claim.Labels[v1.LabelZone]] != want {
		t.Errorf("launched into %s (ID %s), labelled %s=%s; want the zone of ID %s", claim.Labels[v1.LabelZone],
			idOf[claim.Labels[v1.LabelZone]], LabelTopologyZoneID, got, want)
	}
	if got := claim.Labels[LabelNodeClass]; got != nc.Name {
		t.Errorf("%s = %q, want %q", LabelNodeClass, got, nc.Name)
	}
	read, err := e.cloud.Get(t.Context(), claim.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{LabelTopologyZoneID, LabelNodeClass, v1.LabelZone} {
		if read.Labels[key] != claim.Labels[key] {
			t.Errorf("read back: %s = %q, launched with %q", key, read.Labels[key], claim.Labels[key])
		}
	}
}

// PlanFleet keeps to the subnets whose zone IDs a claim allows.
func TestPlanFleetByZoneID(t *testing.T) {
	subnets := []awsv1.Subnet{{ID: "subnet-a", Zone: "us-east-1a", ZoneID: "use1-az4"}, {ID: "subnet-b", Zone: "us-east-1b", ZoneID: "use1-az6"},
		{ID: "subnet-c", Zone: "us-east-1c"}}
	a, _ := awsv1.ParseAlias("al2023@latest")
	params, _ := AliasParameters(a, "1.34")
	amis := []awsv1.AMI{{ID: "ami-amd64", Requirements: params[0].Requirements}}
	it := &scheduling.InstanceType{Name: "m5.large", Requirements: scheduling.LabelRequirements(map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "linux"}),
		Offerings: []scheduling.Offering{{Zone: "us-east-1a", CapacityType: "on-demand", Price: 0.1, Available: true},
			{Zone: "us-east-1b", CapacityType: "on-demand", Price: 0.1, Available: true}, {Zone: "us-east-1c", CapacityType: "on-demand", Price: 0.1, Available: true}}}
	for _, tc := range []struct {
		name    string
		reqs    []v1.NodeSelectorRequirementWithMinValues
		subnets []string
	}{
		{"no zone-id requirement: every zone", nil, []string{"subnet-a", "subnet-b", "subnet-c"}},
		{"one zone ID", []v1.NodeSelectorRequirementWithMinValues{req(LabelTopologyZoneID, "use1-az6")}, []string{"subnet-b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := PlanFleet(claimWith(tc.reqs...), []*scheduling.InstanceType{it}, subnets, amis, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, g := range plan.Groups {
				for _, o := range g.Overrides {
					got = append(got, o.SubnetID)
				}
			}
			if diff := cmp.Diff(tc.subnets, got); diff != "" {
				t.Errorf("subnets (-want +got):\n%s", diff)
			}
		})
	}
}
