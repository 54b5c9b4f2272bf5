package fakeaws

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// fleetEnv is a server with a node launch template, as a provider would make.
type fleetEnv struct {
	s        *Server
	c        *ec2.Client
	template string
	subnets  map[string]string // zone → private subnet
}

func newFleetEnv(t *testing.T, s *Server) *fleetEnv {
	t.Helper()
	c := ec2Client(s)
	var image string
	for _, im := range s.inv.images {
		if im.Architecture == "x86_64" {
			image = im.ID
			break
		}
	}
	lt := must(c.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("tailor-default"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:            aws.String(image),
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String("KarpenterNodeInstanceProfile-tailor")},
			SecurityGroupIds:   []string{s.inv.sgs[0].ID},
		},
	})).ok(t)
	e := &fleetEnv{s: s, c: c, template: aws.ToString(lt.LaunchTemplate.LaunchTemplateId), subnets: map[string]string{}}
	for _, sn := range s.inv.subnets {
		if !sn.MapPublicIP {
			e.subnets[sn.Zone] = sn.ID
		}
	}
	return e
}

type fleetRequest struct {
	capacityType string
	types        []string
	zones        []string
	token        string
	count        int32
	tags         map[string]string
}

func (e *fleetEnv) input(r fleetRequest) *ec2.CreateFleetInput {
	var overrides []ec2types.FleetLaunchTemplateOverridesRequest
	for _, typ := range r.types {
		for _, z := range r.zones {
			overrides = append(overrides, ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType: ec2types.InstanceType(typ), SubnetId: aws.String(e.subnets[z]),
			})
		}
	}
	var tags []ec2types.Tag
	for _, k := range sortedKeys(r.tags) {
		tags = append(tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(r.tags[k])})
	}
	in := &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: aws.String(e.template), Version: aws.String("$Latest")},
			Overrides:                   overrides,
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(max(r.count, 1)), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(r.capacityType),
		},
		SpotOptions:     &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized},
		OnDemandOptions: &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tags},
		},
	}
	if r.token != "" {
		in.ClientToken = aws.String(r.token)
	}
	return in
}

func (e *fleetEnv) launch(t *testing.T, r fleetRequest) *ec2.CreateFleetOutput {
	t.Helper()
	return must(e.c.CreateFleet(ctx(t), e.input(r))).ok(t)
}

func fleetIDs(out *ec2.CreateFleetOutput) []string {
	var ids []string
	for _, fi := range out.Instances {
		ids = append(ids, fi.InstanceIds...)
	}
	return ids
}

// cheapest is the offering a lowest-price fleet should pick.
func cheapest(s *Server, capacityType string, types, zones []string) (string, string) {
	bestType, bestZone, best := "", "", 0.0
	for _, typ := range types {
		for _, z := range zones {
			t := s.inv.types[typ]
			p := t.OnDemandPrice
			if capacityType == "spot" {
				p = t.SpotPrice[z]
			}
			if bestType == "" || p < best {
				bestType, bestZone, best = typ, z, p
			}
		}
	}
	return bestType, bestZone
}

func TestCreateFleetLaunchesTheCheapestOffering(t *testing.T) {
	s, clk := startClocked(t, Options{PendingDelay: 5 * time.Second})
	e := newFleetEnv(t, s)
	types, zones := []string{"m5.large", "m5a.large", "c5.large"}, []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	for _, capacityType := range []string{"spot", "on-demand"} {
		t.Run(capacityType, func(t *testing.T) {
			out := e.launch(t, fleetRequest{capacityType: capacityType, types: types, zones: zones, tags: map[string]string{"karpenter.sh/nodepool": "default"}})
			if len(out.Errors) != 0 || len(out.Instances) != 1 || len(out.Instances[0].InstanceIds) != 1 {
				t.Fatalf("fleet: errors %+v instances %+v", out.Errors, out.Instances)
			}
			wantType, wantZone := cheapest(s, capacityType, types, zones)
			fi := out.Instances[0]
			if string(fi.InstanceType) != wantType || aws.ToString(fi.LaunchTemplateAndOverrides.Overrides.AvailabilityZone) != wantZone ||
				string(fi.Lifecycle) != capacityType {
				t.Fatalf("launched %s in %s (%s), want %s in %s", fi.InstanceType, aws.ToString(fi.LaunchTemplateAndOverrides.Overrides.AvailabilityZone), fi.Lifecycle, wantType, wantZone)
			}
			id := fi.InstanceIds[0]
			desc := must(e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).ok(t)
			inst := desc.Reservations[0].Instances[0]
			tags := map[string]string{}
			for _, tg := range inst.Tags {
				tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
			}
			if inst.State.Name != ec2types.InstanceStateNamePending || string(inst.InstanceType) != wantType ||
				aws.ToString(inst.Placement.AvailabilityZone) != wantZone || tags["karpenter.sh/nodepool"] != "default" ||
				tags["aws:ec2:fleet-id"] != aws.ToString(out.FleetId) || aws.ToString(inst.PrivateIpAddress) == "" ||
				aws.ToString(inst.IamInstanceProfile.Arn) != "arn:aws:iam::123456789012:instance-profile/KarpenterNodeInstanceProfile-tailor" ||
				len(inst.SecurityGroups) != 1 {
				t.Fatalf("instance %+v tags %v", inst, tags)
			}
			if (inst.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot) != (capacityType == "spot") {
				t.Errorf("lifecycle %q for %s", inst.InstanceLifecycle, capacityType)
			}
			clk.Step(5 * time.Second)
			desc = must(e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).ok(t)
			if got := desc.Reservations[0].Instances[0].State.Name; got != ec2types.InstanceStateNameRunning {
				t.Errorf("after PendingDelay: %s", got)
			}
		})
	}
}

func TestCreateFleetIsIdempotent(t *testing.T) {
	s := start(t, Options{})
	e := newFleetEnv(t, s)
	r := fleetRequest{capacityType: "on-demand", types: []string{"m5.large"}, zones: []string{"us-east-1a"}, token: "nodeclaim-abc"}
	first := e.launch(t, r)
	second := e.launch(t, r)
	if aws.ToString(first.FleetId) != aws.ToString(second.FleetId) || !slices.Equal(fleetIDs(first), fleetIDs(second)) {
		t.Fatalf("same token: %s %v, then %s %v", aws.ToString(first.FleetId), fleetIDs(first), aws.ToString(second.FleetId), fleetIDs(second))
	}
	if n := len(s.Instances()); n != 1 {
		t.Fatalf("%d instances after a retried CreateFleet, want 1", n)
	}
	r.types = []string{"c5.large"}
	if _, err := e.c.CreateFleet(ctx(t), e.input(r)); apiCode(err) != "IdempotentParameterMismatch" {
		t.Fatalf("same token, different request: %v", err)
	}
	r.token = "nodeclaim-def"
	e.launch(t, r)
	if n := len(s.Instances()); n != 2 {
		t.Fatalf("%d instances after a new token, want 2", n)
	}
}

func TestCreateFleetInsufficientCapacity(t *testing.T) {
	s := start(t, Options{})
	e := newFleetEnv(t, s)
	types, zones := []string{"m5.large", "c5.large"}, []string{"us-east-1a", "us-east-1b"}
	bestType, bestZone := cheapest(s, "spot", types, zones)
	s.SetInsufficientCapacity(Offering{InstanceType: bestType, Zone: bestZone, CapacityType: "spot"}, true)

	out := e.launch(t, fleetRequest{capacityType: "spot", types: types, zones: zones})
	if len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "InsufficientInstanceCapacity" ||
		string(out.Errors[0].LaunchTemplateAndOverrides.Overrides.InstanceType) != bestType ||
		aws.ToString(out.Errors[0].LaunchTemplateAndOverrides.Overrides.AvailabilityZone) != bestZone ||
		out.Errors[0].Lifecycle != ec2types.InstanceLifecycleSpot {
		t.Fatalf("errors %+v, want one InsufficientInstanceCapacity for %s in %s", out.Errors, bestType, bestZone)
	}
	if len(fleetIDs(out)) != 1 {
		t.Fatalf("the fleet should fall back to the next offering: %+v", out.Instances)
	}
	// On-demand capacity of the same offering is not affected.
	od := e.launch(t, fleetRequest{capacityType: "on-demand", types: []string{bestType}, zones: []string{bestZone}})
	if len(od.Errors) != 0 || len(fleetIDs(od)) != 1 {
		t.Fatalf("on-demand: %+v", od.Errors)
	}

	// A zone-wide shortage takes every type there; with nothing left the fleet
	// launches nothing and reports every pool it tried.
	for _, z := range zones {
		s.SetInsufficientCapacity(Offering{Zone: z, CapacityType: "spot"}, true)
	}
	none := e.launch(t, fleetRequest{capacityType: "spot", types: types, zones: zones})
	if len(fleetIDs(none)) != 0 || len(none.Errors) != len(types)*len(zones) {
		t.Fatalf("all capacity gone: instances %+v, %d errors", none.Instances, len(none.Errors))
	}
	for _, z := range zones {
		s.SetInsufficientCapacity(Offering{Zone: z, CapacityType: "spot"}, false)
	}
	s.SetInsufficientCapacity(Offering{InstanceType: bestType, Zone: bestZone, CapacityType: "spot"}, false)
	back := e.launch(t, fleetRequest{capacityType: "spot", types: types, zones: zones})
	if len(back.Errors) != 0 || string(back.Instances[0].InstanceType) != bestType {
		t.Fatalf("after clearing: %+v", back)
	}
}

func TestCreateFleetReportsBadOverrides(t *testing.T) {
	s := start(t, Options{})
	e := newFleetEnv(t, s)
	in := e.input(fleetRequest{capacityType: "on-demand", types: []string{"m5.large"}, zones: []string{"us-east-1a"}})
	in.LaunchTemplateConfigs = append(in.LaunchTemplateConfigs, ec2types.FleetLaunchTemplateConfigRequest{
		LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("gone"), Version: aws.String("$Latest")},
		Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", SubnetId: aws.String(e.subnets["us-east-1b"])}},
	})
	in.LaunchTemplateConfigs[0].Overrides = append(in.LaunchTemplateConfigs[0].Overrides,
		ec2types.FleetLaunchTemplateOverridesRequest{InstanceType: "m6g.large", SubnetId: aws.String(e.subnets["us-east-1a"])})
	out := must(e.c.CreateFleet(ctx(t), in)).ok(t)
	var codes []string
	for _, fe := range out.Errors {
		codes = append(codes, aws.ToString(fe.ErrorCode))
	}
	slices.Sort(codes)
	if want := []string{"InvalidLaunchTemplateName.NotFoundException", "InvalidParameterValue"}; !slices.Equal(codes, want) {
		t.Errorf("error codes %v, want %v (a missing template, an arm64 type with an x86_64 image)", codes, want)
	}
	if len(fleetIDs(out)) != 1 {
		t.Errorf("the valid override should launch: %+v", out.Instances)
	}
}

func TestDescribeInstancesFiltersAndPages(t *testing.T) {
	s := start(t, Options{})
	e := newFleetEnv(t, s)
	a := e.launch(t, fleetRequest{capacityType: "on-demand", types: []string{"m5.large"}, zones: []string{"us-east-1a"}, count: 7,
		tags: map[string]string{"karpenter.sh/nodepool": "a", "kubernetes.io/cluster/tailor": "owned"}})
	b := e.launch(t, fleetRequest{capacityType: "spot", types: []string{"c5.large"}, zones: []string{"us-east-1b"}, count: 5,
		tags: map[string]string{"karpenter.sh/nodepool": "b", "kubernetes.io/cluster/tailor": "owned"}})
	e.launch(t, fleetRequest{capacityType: "spot", types: []string{"c5.large"}, zones: []string{"us-east-1b"}, tags: map[string]string{"other": "x"}})

	list := func(in *ec2.DescribeInstancesInput) []string {
		var ids []string
		p := ec2.NewDescribeInstancesPaginator(e.c, in)
		for p.HasMorePages() {
			for _, r := range must(p.NextPage(ctx(t))).ok(t).Reservations {
				for _, i := range r.Instances {
					ids = append(ids, aws.ToString(i.InstanceId))
				}
			}
		}
		return ids
	}
	all := append(fleetIDs(a), fleetIDs(b)...)
	slices.Sort(all)
	for name, f := range map[string][]ec2types.Filter{
		"tag-key":  {flt("tag-key", "kubernetes.io/cluster/tailor")},
		"tag":      {flt("tag:kubernetes.io/cluster/tailor", "owned"), flt("instance-state-name", "pending", "running")},
		"tag glob": {flt("tag:karpenter.sh/nodepool", "?")},
	} {
		got := list(&ec2.DescribeInstancesInput{Filters: f, MaxResults: aws.Int32(5)})
		slices.Sort(got)
		if !slices.Equal(got, all) {
			t.Errorf("%s: got %v, want %v", name, got, all)
		}
	}
	onePage := must(e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{flt("tag-key", "kubernetes.io/cluster/tailor")}, MaxResults: aws.Int32(5)})).ok(t)
	if onePage.NextToken == nil {
		t.Errorf("12 instances in pages of 5: no NextToken")
	}
	byID := list(&ec2.DescribeInstancesInput{Filters: []ec2types.Filter{flt("instance-id", fleetIDs(b)...)}})
	if len(byID) != 5 {
		t.Errorf("instance-id filter: %v", byID)
	}
	spot := list(&ec2.DescribeInstancesInput{Filters: []ec2types.Filter{flt("instance-lifecycle", "spot"), flt("tag:karpenter.sh/nodepool", "b")}})
	if len(spot) != 5 {
		t.Errorf("spot of nodepool b: %v", spot)
	}

	_, err := e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{all[0], "i-0123456789abcdef0"}})
	if apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("unknown ID: %v", err)
	}
	_, err = e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{flt("instance-colour", "red")}})
	if apiCode(err) != "InvalidParameterValue" {
		t.Errorf("unknown filter: %v", err)
	}
}

func TestTerminateAndTag(t *testing.T) {
	s, clk := startClocked(t, Options{PendingDelay: 30 * time.Second, TerminationDelay: 10 * time.Second, TerminatedRetention: time.Hour})
	e := newFleetEnv(t, s)
	id := fleetIDs(e.launch(t, fleetRequest{capacityType: "on-demand", types: []string{"m5.large"}, zones: []string{"us-east-1a"}}))[0]

	must(e.c.CreateTags(ctx(t), &ec2.CreateTagsInput{Resources: []string{id}, Tags: []ec2types.Tag{{Key: aws.String("Name"), Value: aws.String("node-1")}}})).ok(t)
	if got, _ := s.Instance(id); got.Tags["Name"] != "node-1" {
		t.Errorf("tags after CreateTags: %v", got.Tags)
	}
	if _, err := e.c.CreateTags(ctx(t), &ec2.CreateTagsInput{Resources: []string{id}, Tags: []ec2types.Tag{{Key: aws.String("aws:reserved"), Value: aws.String("x")}}}); apiCode(err) != "InvalidParameterValue" {
		t.Errorf("aws: tag: %v", err)
	}

	_, err := e.c.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{InstanceIds: []string{id}, DryRun: aws.Bool(true)})
	if got, _ := s.Instance(id); apiCode(err) != "DryRunOperation" || got.State != "pending" {
		t.Fatalf("dry run: %v, state %s", err, got.State)
	}
	out := must(e.c.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{InstanceIds: []string{id}})).ok(t)
	if ch := out.TerminatingInstances[0]; ch.PreviousState.Name != ec2types.InstanceStateNamePending || ch.CurrentState.Name != ec2types.InstanceStateNameShuttingDown {
		t.Errorf("state change %+v → %+v", ch.PreviousState, ch.CurrentState)
	}
	state := func() ec2types.InstanceStateName {
		d := must(e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).ok(t)
		return d.Reservations[0].Instances[0].State.Name
	}
	if got := state(); got != ec2types.InstanceStateNameShuttingDown {
		t.Errorf("after terminate: %s", got)
	}
	clk.Step(10 * time.Second)
	if got := state(); got != ec2types.InstanceStateNameTerminated {
		t.Errorf("after TerminationDelay: %s", got)
	}
	again := must(e.c.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{InstanceIds: []string{id}})).ok(t)
	if again.TerminatingInstances[0].CurrentState.Name != ec2types.InstanceStateNameTerminated {
		t.Errorf("terminating twice: %+v", again.TerminatingInstances[0])
	}
	clk.Step(time.Hour)
	if _, err := e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{id}}); apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("after TerminatedRetention: %v", err)
	}
	if _, err := e.c.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}}); apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("terminating an unknown instance: %v", err)
	}
}

func TestEventualConsistency(t *testing.T) {
	s, clk := startClocked(t, Options{ConsistencyDelay: 3 * time.Second})
	e := newFleetEnv(t, s)
	id := fleetIDs(e.launch(t, fleetRequest{capacityType: "on-demand", types: []string{"m5.large"}, zones: []string{"us-east-1a"},
		tags: map[string]string{"karpenter.sh/nodepool": "a"}}))[0]
	if _, err := e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{id}}); apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Fatalf("a new instance by ID: %v, want InvalidInstanceID.NotFound", err)
	}
	listed := must(e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{flt("tag:karpenter.sh/nodepool", "a")}})).ok(t)
	if len(listed.Reservations) != 0 {
		t.Fatalf("a new instance listed: %+v", listed.Reservations)
	}
	if _, err := e.c.CreateTags(ctx(t), &ec2.CreateTagsInput{Resources: []string{id}, Tags: []ec2types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}); apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Fatalf("tagging a new instance: %v", err)
	}
	if _, ok := s.Instance(id); !ok {
		t.Fatalf("the test view sees every instance")
	}
	clk.Step(3 * time.Second)
	if d := must(e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).ok(t); len(d.Reservations) != 1 {
		t.Fatalf("after the window: %+v", d.Reservations)
	}
	s.SetConsistencyDelay(0)
	next := fleetIDs(e.launch(t, fleetRequest{capacityType: "on-demand", types: []string{"m5.large"}, zones: []string{"us-east-1a"}}))[0]
	must(e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{next}})).ok(t)
}

func TestThrottling(t *testing.T) {
	s := start(t, Options{})
	c := ec2.NewFromConfig(config(s, 3))
	s.ThrottleNext("ec2:DescribeAvailabilityZones", 2)
	must(c.DescribeAvailabilityZones(ctx(t), &ec2.DescribeAvailabilityZonesInput{})).ok(t)
	if n := s.Calls("ec2:DescribeAvailabilityZones"); n != 3 {
		t.Errorf("%d calls, want 2 throttled and 1 retried to success", n)
	}

	s.ResetCalls()
	s.ThrottleNext("ec2:*", 3)
	_, err := c.DescribeSubnets(ctx(t), &ec2.DescribeSubnetsInput{})
	var exhausted *retry.MaxAttemptsError
	if apiCode(err) != "RequestLimitExceeded" || !errors.As(err, &exhausted) {
		t.Fatalf("after 3 throttled attempts: %v", err)
	}
	if n := s.Calls("ec2:DescribeSubnets"); n != 3 {
		t.Errorf("%d calls, want 3 attempts", n)
	}

	// A fraction of 1 throttles everything; 0 turns it off.
	s.ThrottleFraction("ec2:DescribeImages", 1)
	if _, err := c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{}); apiCode(err) != "RequestLimitExceeded" {
		t.Errorf("fraction 1: %v", err)
	}
	s.ThrottleFraction("ec2:DescribeImages", 0)
	must(c.DescribeImages(ctx(t), &ec2.DescribeImagesInput{})).ok(t)
}

func TestLatency(t *testing.T) {
	s := start(t, Options{})
	s.SetLatency("ec2:DescribeAvailabilityZones", time.Hour)
	c := ec2.NewFromConfig(config(s, 1))
	// The request waits out the latency; a caller's deadline ends it first.
	tctx, cancel := context.WithTimeout(ctx(t), 50*time.Millisecond)
	defer cancel()
	_, err := c.DescribeAvailabilityZones(tctx, &ec2.DescribeAvailabilityZonesInput{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("with an hour of latency: %v", err)
	}
	s.SetLatency("ec2:DescribeAvailabilityZones", 0)
	must(c.DescribeAvailabilityZones(ctx(t), &ec2.DescribeAvailabilityZonesInput{})).ok(t)
}

func TestUnknownParameterFails(t *testing.T) {
	s := start(t, Options{})
	resp, err := http.Post(s.URL(), "application/x-www-form-urlencoded",
		strings.NewReader(url.Values{"Action": {"DescribeSubnets"}, "Version": {ec2Version}, "SubnetIdentifier.1": {"x"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "<Code>UnknownParameter</Code>") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestCapacityReservations(t *testing.T) {
	s := start(t, Options{Inventory: func(inv *Inventory) {
		inv.CapacityReservations = []CapacityReservation{{ID: "cr-0123456789abcdef0", InstanceType: "m5.large", Zone: "us-east-1a", Total: 1, Available: 1,
			MatchCriteria: "targeted", Tags: map[string]string{"team": "payments"}}}
	}})
	e := newFleetEnv(t, s)
	lt := must(e.c.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String("reserved"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId: aws.String(s.InventorySnapshot().Images[0].ID),
			CapacityReservationSpecification: &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
				CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String("cr-0123456789abcdef0")},
			},
		},
	})).ok(t)
	e.template = aws.ToString(lt.LaunchTemplate.LaunchTemplateId)
	available := func() int32 {
		out := must(e.c.DescribeCapacityReservations(ctx(t), &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{flt("tag:team", "payments")}})).ok(t)
		if len(out.CapacityReservations) != 1 || out.CapacityReservations[0].State != ec2types.CapacityReservationStateActive ||
			out.CapacityReservations[0].InstanceMatchCriteria != ec2types.InstanceMatchCriteriaTargeted {
			t.Fatalf("reservations %+v", out.CapacityReservations)
		}
		return aws.ToInt32(out.CapacityReservations[0].AvailableInstanceCount)
	}
	first := e.launch(t, fleetRequest{capacityType: "on-demand", types: []string{"m5.large"}, zones: []string{"us-east-1a"}})
	if len(fleetIDs(first)) != 1 || available() != 0 {
		t.Fatalf("first launch: %+v, %d available", first, available())
	}
	id := fleetIDs(first)[0]
	d := must(e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).ok(t)
	if got := aws.ToString(d.Reservations[0].Instances[0].CapacityReservationId); got != "cr-0123456789abcdef0" {
		t.Errorf("instance's reservation %q", got)
	}
	second := e.launch(t, fleetRequest{capacityType: "on-demand", types: []string{"m5.large"}, zones: []string{"us-east-1a"}})
	if len(fleetIDs(second)) != 0 || len(second.Errors) != 1 || aws.ToString(second.Errors[0].ErrorCode) != "ReservationCapacityExceeded" {
		t.Fatalf("a full reservation: %+v", second.Errors)
	}
	must(e.c.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{InstanceIds: []string{id}})).ok(t)
	if n := available(); n != 1 {
		t.Errorf("%d available after termination", n)
	}
}
