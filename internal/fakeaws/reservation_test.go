package fakeaws

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// reservedFleet launches one m5.large in us-east-1a through a template targeting
// reservation id, in the given fleet capacity type.
func reservedFleet(t *testing.T, s *Server, c *ec2.Client, name, id string, capacityType ec2types.DefaultTargetCapacityType) *ec2.CreateFleetOutput {
	t.Helper()
	var image, subnet string
	for _, im := range s.inv.images {
		if im.Architecture == "x86_64" {
			image = im.ID
			break
		}
	}
	for _, sn := range s.inv.subnets {
		if sn.Zone == "us-east-1a" && !sn.MapPublicIP {
			subnet = sn.ID
		}
	}
	data := &ec2types.RequestLaunchTemplateData{ImageId: aws.String(image), SecurityGroupIds: []string{s.inv.sgs[0].ID},
		CapacityReservationSpecification: &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(id)}}}
	if capacityType == ec2types.DefaultTargetCapacityTypeCapacityBlock {
		data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
	}
	lt := must(c.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: data})).ok(t)
	return must(c.CreateFleet(ctx(t), &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", SubnetId: aws.String(subnet)}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: capacityType},
	})).ok(t)
}

// Capacity blocks launch only as the capacity-block market, and ODCRs only as
// on-demand; an instance in a block reports the capacity-block lifecycle.
func TestCapacityBlockFleet(t *testing.T) {
	s := start(t, Options{Inventory: func(inv *Inventory) {
		inv.CapacityReservations = append(inv.CapacityReservations,
			CapacityReservation{ID: "cr-block", InstanceType: "m5.large", Zone: "us-east-1a", Total: 1, Available: 1, Type: "capacity-block"},
			CapacityReservation{ID: "cr-odcr", InstanceType: "m5.large", Zone: "us-east-1a", Total: 1, Available: 1})
	}})
	c := ec2Client(s)
	if out := reservedFleet(t, s, c, "block-as-od", "cr-block", ec2types.DefaultTargetCapacityTypeOnDemand); len(out.Instances) != 0 || len(out.Errors) != 1 {
		t.Errorf("a capacity block launched as on-demand: %+v", out)
	}
	if out := reservedFleet(t, s, c, "odcr-as-block", "cr-odcr", ec2types.DefaultTargetCapacityTypeCapacityBlock); len(out.Instances) != 0 || len(out.Errors) != 1 {
		t.Errorf("an ODCR launched as a capacity block: %+v", out)
	}
	out := reservedFleet(t, s, c, "block", "cr-block", ec2types.DefaultTargetCapacityTypeCapacityBlock)
	if len(out.Instances) != 1 {
		t.Fatalf("capacity block launch: %+v", out.Errors)
	}
	id := out.Instances[0].InstanceIds[0]
	inst := must(c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).ok(t).Reservations[0].Instances[0]
	if inst.InstanceLifecycle != ec2types.InstanceLifecycleTypeCapacityBlock || aws.ToString(inst.CapacityReservationId) != "cr-block" {
		t.Errorf("lifecycle %q, reservation %q", inst.InstanceLifecycle, aws.ToString(inst.CapacityReservationId))
	}
}

// Cancelling a reservation leaves its instances running outside it, and launches
// into it fail.
func TestCancelCapacityReservation(t *testing.T) {
	s := start(t, Options{Inventory: func(inv *Inventory) {
		inv.CapacityReservations = append(inv.CapacityReservations,
			CapacityReservation{ID: "cr-odcr", InstanceType: "m5.large", Zone: "us-east-1a", Total: 2, Available: 2})
	}})
	c := ec2Client(s)
	out := reservedFleet(t, s, c, "first", "cr-odcr", ec2types.DefaultTargetCapacityTypeOnDemand)
	if len(out.Instances) != 1 {
		t.Fatalf("launch: %+v", out.Errors)
	}
	id := out.Instances[0].InstanceIds[0]
	if err := s.CancelCapacityReservation("cr-odcr"); err != nil {
		t.Fatal(err)
	}
	inst := must(c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).ok(t).Reservations[0].Instances[0]
	if r := aws.ToString(inst.CapacityReservationId); r != "" {
		t.Errorf("instance still in %s", r)
	}
	res := must(c.DescribeCapacityReservations(ctx(t), &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{"cr-odcr"}})).ok(t)
	if got := res.CapacityReservations[0].State; got != ec2types.CapacityReservationStateCancelled {
		t.Errorf("state %q, want cancelled", got)
	}
	again := reservedFleet(t, s, c, "second", "cr-odcr", ec2types.DefaultTargetCapacityTypeOnDemand)
	if len(again.Instances) != 0 || len(again.Errors) != 1 || aws.ToString(again.Errors[0].ErrorCode) != "ReservationCapacityExceeded" {
		t.Errorf("launch into a cancelled reservation: %+v", again)
	}
}
