package aws

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

func TestReservations(t *testing.T) {
	now := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }
	block := awsv1.CapacityReservationTypeCapacityBlock
	nc := &awsv1.EC2NodeClass{Status: awsv1.EC2NodeClassStatus{
		Subnets: []awsv1.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}},
		CapacityReservations: []awsv1.CapacityReservation{
			{ID: "cr-a", InstanceType: "m5.large", AvailabilityZone: "us-east-1a"},
			{ID: "cr-block", InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a", ReservationType: block, EndTime: at(2 * time.Hour)},
			{ID: "cr-closing", InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a", ReservationType: block, EndTime: at(39 * time.Minute)},
			{ID: "cr-expiring", InstanceType: "p5.48xlarge", AvailabilityZone: "us-east-1a", State: awsv1.CapacityReservationStateExpiring},
			{ID: "cr-b", InstanceType: "m5.large", AvailabilityZone: "us-east-1b"},       // no subnet there
			{ID: "cr-unknown", InstanceType: "m5.large", AvailabilityZone: "us-east-1a"}, // room not read yet
			{ID: "cr-lent", InstanceType: "m5.large", AvailabilityZone: "us-east-1a", Interruptible: true},
		},
	}}
	got := Reservations(nc, map[string]int{"cr-a": 3, "cr-block": 1, "cr-closing": 1, "cr-expiring": 1, "cr-b": 2, "cr-lent": 1}, now)
	dflt := awsv1.CapacityReservationTypeDefault
	want := []Reservation{
		{ID: "cr-a", InstanceType: "m5.large", Zone: "us-east-1a", Type: dflt, Available: 3},
		{ID: "cr-block", InstanceType: "p5.48xlarge", Zone: "us-east-1a", Type: block, Available: 1},
		// Listed for the nodes in them, with no room for new ones.
		{ID: "cr-closing", InstanceType: "p5.48xlarge", Zone: "us-east-1a", Type: block},
		{ID: "cr-expiring", InstanceType: "p5.48xlarge", Zone: "us-east-1a", Type: dflt},
		{ID: "cr-unknown", InstanceType: "m5.large", Zone: "us-east-1a", Type: dflt},
		{ID: "cr-lent", InstanceType: "m5.large", Zone: "us-east-1a", Type: dflt, Interruptible: true, Available: 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("reservations (-want +got):\n%s", d)
	}
}

func TestWithReservations(t *testing.T) {
	base := &scheduling.InstanceType{Name: "m5.large",
		Requirements: scheduling.NewRequirements(scheduling.MustRequirement(v1.CapacityTypeLabelKey, v1.NodeSelectorOpIn, CapacityTypeSpot, CapacityTypeOnDemand)),
		Offerings: []scheduling.Offering{
			{Zone: "us-east-1a", CapacityType: CapacityTypeSpot, Price: 0.04, Available: true},
			{Zone: "us-east-1a", CapacityType: CapacityTypeOnDemand, Price: 0.096, Available: true},
		}}
	other := &scheduling.InstanceType{Name: "c5.large"}
	got := WithReservations([]*scheduling.InstanceType{base, other}, []Reservation{
		{ID: "cr-1", InstanceType: "m5.large", Zone: "us-east-1a", Available: 1},
		{ID: "cr-2", InstanceType: "m5.large", Zone: "us-east-1a", Available: 2},
	})
	if got[1] != other {
		t.Error("a type without reservations was copied")
	}
	if len(base.Offerings) != 2 {
		t.Error("the input type was modified")
	}
	o := got[0].Offerings[2]
	if o.CapacityType != CapacityTypeReserved || o.ReservationCapacity != 3 || !o.Available || o.Price >= 0.04 || o.Price <= 0 {
		t.Errorf("reserved offering %+v, want available, 3 left (both reservations), priced below spot", o)
	}
	if ct, _ := got[0].Requirements.Get(v1.CapacityTypeLabelKey); !ct.Has(CapacityTypeReserved) || !ct.Has(CapacityTypeSpot) {
		t.Errorf("capacity types %s", ct)
	}
	full := WithReservations([]*scheduling.InstanceType{base}, []Reservation{{ID: "cr-1", InstanceType: "m5.large", Zone: "us-east-1a"}})
	if o := full[0].Offerings[2]; o.Available {
		t.Errorf("a full reservation is offered: %+v", o)
	}
}

func TestLapsedReservation(t *testing.T) {
	reserved := map[string]string{v1.CapacityTypeLabelKey: CapacityTypeReserved, LabelCapacityReservationID: "cr-1",
		LabelCapacityReservationType: "default", "team": "a"}
	if _, changed := LapsedReservation(reserved, "cr-1"); changed {
		t.Error("still in its reservation, yet relabelled")
	}
	if _, changed := LapsedReservation(map[string]string{v1.CapacityTypeLabelKey: CapacityTypeSpot}, ""); changed {
		t.Error("a spot node relabelled")
	}
	got, changed := LapsedReservation(reserved, "")
	want := map[string]string{v1.CapacityTypeLabelKey: CapacityTypeOnDemand, "team": "a"}
	if d := cmp.Diff(want, got); !changed || d != "" {
		t.Errorf("lapsed labels (-want +got):\n%s", d)
	}
	if reserved[v1.CapacityTypeLabelKey] != CapacityTypeReserved {
		t.Error("the input labels were modified")
	}
}

func TestPlanFleetReserved(t *testing.T) {
	subnets := []awsv1.Subnet{{ID: "subnet-a", Zone: "us-east-1a"}, {ID: "subnet-b", Zone: "us-east-1b"}}
	amis := []awsv1.AMI{{ID: "ami-1"}}
	it := &scheduling.InstanceType{Name: "m5.large", Requirements: scheduling.NewRequirements(
		scheduling.MustRequirement(v1.LabelInstanceType, v1.NodeSelectorOpIn, "m5.large")),
		Offerings: []scheduling.Offering{
			{Zone: "us-east-1a", CapacityType: CapacityTypeOnDemand, Price: 0.096, Available: true},
			{Zone: "us-east-1a", CapacityType: CapacityTypeReserved, Price: 1e-7, Available: true, ReservationCapacity: 3},
			{Zone: "us-east-1b", CapacityType: CapacityTypeOnDemand, Price: 0.096, Available: true},
		}}
	reservations := []Reservation{
		{ID: "cr-1", InstanceType: "m5.large", Zone: "us-east-1a", Type: awsv1.CapacityReservationTypeDefault, Available: 1},
		{ID: "cr-2", InstanceType: "m5.large", Zone: "us-east-1a", Type: awsv1.CapacityReservationTypeDefault, Available: 2},
		{ID: "cr-full", InstanceType: "m5.large", Zone: "us-east-1a", Type: awsv1.CapacityReservationTypeDefault},
	}
	claim := func(reqs ...v1.NodeSelectorRequirementWithMinValues) *v1.NodeClaim {
		return &v1.NodeClaim{Spec: v1.NodeClaimSpec{Requirements: reqs}}
	}
	for _, tt := range []struct {
		name      string
		claim     *v1.NodeClaim
		captype   string
		templates []string // reservation of each launch group
		ice       bool
	}{
		{"reserved first, one template per reservation with room", claim(req(v1.CapacityTypeLabelKey, CapacityTypeReserved, CapacityTypeOnDemand)),
			CapacityTypeReserved, []string{"cr-1", "cr-2"}, false},
		{"reserved not allowed", claim(req(v1.CapacityTypeLabelKey, CapacityTypeOnDemand)), CapacityTypeOnDemand, []string{""}, false},
		{"one reservation by id", claim(req(LabelCapacityReservationID, "cr-2")), CapacityTypeReserved, []string{"cr-2"}, false},
		{"a reservation label with none to give", claim(req(LabelCapacityReservationID, "cr-full")), "", nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := PlanFleet(tt.claim, []*scheduling.InstanceType{it}, subnets, amis, reservations)
			if tt.ice {
				if !cloudprovider.IsInsufficientCapacity(err) {
					t.Fatalf("got %+v, %v; want insufficient capacity", plan, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var templates []string
			for _, g := range plan.Groups {
				templates = append(templates, g.ReservationID)
				for _, o := range g.Overrides {
					if g.ReservationID != "" && o.Zone != "us-east-1a" {
						t.Errorf("reserved override in %s", o.Zone)
					}
				}
			}
			if plan.CapacityType != tt.captype || !cmp.Equal(templates, tt.templates) {
				t.Errorf("capacity type %s, groups for %q; want %s, %q", plan.CapacityType, templates, tt.captype, tt.templates)
			}
		})
	}
}
