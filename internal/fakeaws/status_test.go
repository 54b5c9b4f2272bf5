package fakeaws

import (
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// DescribeInstanceStatus through the SDK: running instances pass both checks; an
// impaired one reports its check impaired, the reachability detail failed since
// when, and the status filters find it alone.
func TestDescribeInstanceStatus(t *testing.T) {
	s, clk := startClocked(t, Options{PendingDelay: time.Second})
	e := newFleetEnv(t, s)
	ids := fleetIDs(e.launch(t, fleetRequest{capacityType: "on-demand", types: []string{"m5.large"}, zones: []string{"us-east-1a"}, count: 2}))
	clk.Step(2 * time.Second)
	if err := s.ImpairInstance(ids[0], CheckSystem); err != nil {
		t.Fatal(err)
	}
	all := must(e.c.DescribeInstanceStatus(ctx(t), &ec2.DescribeInstanceStatusInput{InstanceIds: ids})).ok(t)
	if len(all.InstanceStatuses) != 2 {
		t.Fatalf("%d statuses, want 2", len(all.InstanceStatuses))
	}
	for _, st := range all.InstanceStatuses {
		want := ec2types.SummaryStatusOk
		if aws.ToString(st.InstanceId) == ids[0] {
			want = ec2types.SummaryStatusImpaired
			d := st.SystemStatus.Details[0]
			if d.Status != ec2types.StatusTypeFailed || d.Name != ec2types.StatusNameReachability || !aws.ToTime(d.ImpairedSince).Equal(clk.Now()) {
				t.Errorf("impaired detail %+v", d)
			}
		}
		if st.SystemStatus.Status != want || st.InstanceStatus.Status != ec2types.SummaryStatusOk {
			t.Errorf("%s: system %s, instance %s; want %s, ok", aws.ToString(st.InstanceId), st.SystemStatus.Status, st.InstanceStatus.Status, want)
		}
	}
	impaired := must(e.c.DescribeInstanceStatus(ctx(t), &ec2.DescribeInstanceStatusInput{
		Filters: []ec2types.Filter{flt("system-status.status", "impaired")}})).ok(t)
	if len(impaired.InstanceStatuses) != 1 || aws.ToString(impaired.InstanceStatuses[0].InstanceId) != ids[0] {
		t.Errorf("system-status.status=impaired found %+v", impaired.InstanceStatuses)
	}
	if _, err := e.c.DescribeInstanceStatus(ctx(t), &ec2.DescribeInstanceStatusInput{InstanceIds: ids, MaxResults: aws.Int32(5)}); err == nil {
		t.Error("instance IDs with MaxResults were accepted")
	}
}

// An instant fleet tags itself, its instances and volumes, and nothing else; the
// template tags network interfaces.
func TestFleetTagSpecifications(t *testing.T) {
	s := start(t, Options{})
	e := newFleetEnv(t, s)
	in := e.input(fleetRequest{capacityType: "on-demand", types: []string{"m5.large"}, zones: []string{"us-east-1a"}, tags: map[string]string{"team": "a"}})
	in.TagSpecifications = append(in.TagSpecifications, ec2types.TagSpecification{ResourceType: ec2types.ResourceTypeFleet,
		Tags: []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("a")}}})
	out := must(e.c.CreateFleet(ctx(t), in)).ok(t)
	if got := s.FleetTags(aws.ToString(out.FleetId)); got["team"] != "a" {
		t.Errorf("fleet tags %v", got)
	}
	in.TagSpecifications = append(in.TagSpecifications, ec2types.TagSpecification{ResourceType: ec2types.ResourceTypeNetworkInterface,
		Tags: []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("a")}}})
	if _, err := e.c.CreateFleet(ctx(t), in); err == nil {
		t.Error("a fleet tagging network interfaces was accepted")
	}
}

// Reclaiming an interruptible reservation warns each instance it takes back, as
// EC2 does, and takes them after the interruption delay.
func TestReclaimCapacityReservation(t *testing.T) {
	s, clk := startClocked(t, Options{InterruptionDelay: 2 * time.Minute, TerminationDelay: time.Second, Inventory: func(inv *Inventory) {
		inv.CapacityReservations = append(inv.CapacityReservations, CapacityReservation{ID: "cr-0e0e0e0e0e0e0e0e0", InstanceType: "m5.large",
			Zone: "us-east-1a", Total: 2, Available: 2, MatchCriteria: "targeted", Type: "default", Interruptible: true})
	}})
	e := newFleetEnv(t, s)
	lt := must(e.c.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("lent"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(s.inv.images[0].ID),
			CapacityReservationSpecification: &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
				CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String("cr-0e0e0e0e0e0e0e0e0")}},
			InstanceMarketOptions: &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeInterruptibleCapacityReservation}}})).ok(t)
	in := e.input(fleetRequest{capacityType: "reserved-capacity", types: []string{"m5.large"}, zones: []string{"us-east-1a"}})
	in.LaunchTemplateConfigs[0].LaunchTemplateSpecification.LaunchTemplateId = lt.LaunchTemplate.LaunchTemplateId
	in.SpotOptions, in.OnDemandOptions = nil, nil
	if out, err := e.c.CreateFleet(ctx(t), in); err == nil && len(fleetIDs(out)) > 0 {
		t.Fatal("a reserved-capacity fleet without its reservation type launched")
	}
	in.ClientToken = aws.String("second")
	in.ReservedCapacityOptions = &ec2types.ReservedCapacityOptionsRequest{
		ReservationTypes: []ec2types.FleetReservationType{ec2types.FleetReservationTypeInterruptibleCapacityReservation}}
	ids := fleetIDs(must(e.c.CreateFleet(ctx(t), in)).ok(t))
	if len(ids) != 1 {
		t.Fatalf("launched %v", ids)
	}
	desc := must(e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: ids})).ok(t)
	if lc := desc.Reservations[0].Instances[0].InstanceLifecycle; lc != ec2types.InstanceLifecycleTypeInterruptibleCapacityReservation {
		t.Errorf("instance lifecycle %q", lc)
	}
	if err := s.ReclaimCapacityReservation("cr-0e0e0e0e0e0e0e0e0", 2); err != nil {
		t.Fatal(err)
	}
	if n := s.QueueDepth(s.InterruptionQueue()); n != 1 {
		t.Fatalf("%d warnings on the queue, want 1 (one instance; the free slot goes first)", n)
	}
	clk.Step(2*time.Minute + 2*time.Second)
	inst, _ := s.Instance(ids[0])
	if !slices.Contains([]string{stateShuttingDown, stateTerminated}, inst.State) {
		t.Errorf("instance %s after the warning's two minutes, want taken", inst.State)
	}
}
