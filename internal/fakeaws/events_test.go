package fakeaws

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// received is an EventBridge event as a consumer reads it.
type received struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       time.Time       `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// drain reads and deletes every message on the interruption queue.
func drain(t *testing.T, s *Server) []received {
	t.Helper()
	c := sqsClient(s)
	url := aws.String(s.QueueURL(s.InterruptionQueue()))
	var out []received
	for {
		msgs := must(c.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: url, MaxNumberOfMessages: 10})).ok(t).Messages
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			var ev received
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &ev); err != nil {
				t.Fatalf("message %s: %v", aws.ToString(m.Body), err)
			}
			if ev.Version != "0" || ev.ID == "" || ev.Account != "123456789012" || ev.Region != "us-east-1" || ev.Time.IsZero() {
				t.Errorf("envelope %+v", ev)
			}
			out = append(out, ev)
			must(c.DeleteMessage(ctx(t), &sqs.DeleteMessageInput{QueueUrl: url, ReceiptHandle: m.ReceiptHandle})).ok(t)
		}
	}
}

func detail[T any](t *testing.T, ev received) T {
	t.Helper()
	var d T
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		t.Fatalf("detail of %s: %v", ev.DetailType, err)
	}
	return d
}

func TestSpotInterruption(t *testing.T) {
	s, clk := startClocked(t, Options{InterruptionDelay: 2 * time.Minute, TerminationDelay: time.Second, MaxReceiveWait: time.Millisecond})
	e := newFleetEnv(t, s)
	id := fleetIDs(e.launch(t, fleetRequest{capacityType: "spot", types: []string{"m5.large"}, zones: []string{"us-east-1a"}}))[0]
	if err := s.InterruptSpot(id); err != nil {
		t.Fatal(err)
	}
	evs := drain(t, s)
	if len(evs) != 1 || evs[0].DetailType != "EC2 Spot Instance Interruption Warning" || evs[0].Source != "aws.ec2" ||
		!slices.Equal(evs[0].Resources, []string{"arn:aws:ec2:us-east-1a:instance/" + id}) {
		t.Fatalf("events %+v", evs)
	}
	d := detail[map[string]string](t, evs[0])
	if d["instance-id"] != id || d["instance-action"] != "terminate" || len(d) != 2 {
		t.Errorf("detail %v", d)
	}
	state := func() ec2types.InstanceStateName {
		out := must(e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).ok(t)
		return out.Reservations[0].Instances[0].State.Name
	}
	clk.Step(time.Minute)
	if got := state(); got != ec2types.InstanceStateNameRunning {
		t.Fatalf("a minute after the warning: %s", got)
	}
	clk.Step(time.Minute)
	if got := state(); got != ec2types.InstanceStateNameShuttingDown {
		t.Fatalf("two minutes after the warning: %s", got)
	}
	clk.Step(time.Second)
	out := must(e.c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).ok(t)
	inst := out.Reservations[0].Instances[0]
	if inst.State.Name != ec2types.InstanceStateNameTerminated || aws.ToString(inst.StateReason.Code) != "Server.SpotInstanceTermination" {
		t.Errorf("reclaimed: %s %+v", inst.State.Name, inst.StateReason)
	}
	od := fleetIDs(e.launch(t, fleetRequest{capacityType: "on-demand", types: []string{"m5.large"}, zones: []string{"us-east-1a"}}))[0]
	if err := s.InterruptSpot(od); err == nil {
		t.Errorf("interrupting an on-demand instance should fail")
	}
}

func TestRebalanceAndScheduledChange(t *testing.T) {
	s, clk := startClocked(t, Options{MaxReceiveWait: time.Millisecond})
	e := newFleetEnv(t, s)
	id := fleetIDs(e.launch(t, fleetRequest{capacityType: "spot", types: []string{"m5.large"}, zones: []string{"us-east-1a"}}))[0]
	if err := s.RecommendRebalance(id); err != nil {
		t.Fatal(err)
	}
	if err := s.ScheduleChange(id, "", time.Hour); err != nil {
		t.Fatal(err)
	}
	evs := drain(t, s)
	if len(evs) != 2 {
		t.Fatalf("%d events", len(evs))
	}
	rb := evs[0]
	if rb.DetailType != "EC2 Instance Rebalance Recommendation" || rb.Source != "aws.ec2" ||
		!slices.Equal(rb.Resources, []string{"arn:aws:ec2:us-east-1:123456789012:instance/" + id}) ||
		detail[map[string]string](t, rb)["instance-id"] != id {
		t.Errorf("rebalance %+v %s", rb, rb.Detail)
	}
	h := evs[1]
	hd := detail[struct {
		Service           string `json:"service"`
		EventTypeCode     string `json:"eventTypeCode"`
		EventTypeCategory string `json:"eventTypeCategory"`
		StartTime         string `json:"startTime"`
		AffectedEntities  []struct {
			EntityValue string `json:"entityValue"`
		} `json:"affectedEntities"`
	}](t, h)
	start, err := time.Parse(time.RFC1123, hd.StartTime)
	if h.DetailType != "AWS Health Event" || h.Source != "aws.health" || !slices.Equal(h.Resources, []string{id}) || hd.Service != "EC2" ||
		hd.EventTypeCategory != "scheduledChange" || hd.EventTypeCode != HealthInstanceRetirement ||
		len(hd.AffectedEntities) != 1 || hd.AffectedEntities[0].EntityValue != id || err != nil || !start.Equal(clk.Now().Add(time.Hour)) {
		t.Errorf("health %+v %s (start %v, %v)", h, h.Detail, start, err)
	}
	// Neither touches the instance.
	if got, _ := s.Instance(id); got.State != "running" {
		t.Errorf("state %s", got.State)
	}
}

func TestStateChangeEvents(t *testing.T) {
	s, clk := startClocked(t, Options{StateChangeEvents: true, PendingDelay: time.Second, TerminationDelay: time.Second, MaxReceiveWait: time.Millisecond})
	e := newFleetEnv(t, s)
	id := fleetIDs(e.launch(t, fleetRequest{capacityType: "on-demand", types: []string{"m5.large"}, zones: []string{"us-east-1a"}}))[0]
	clk.Step(time.Second)
	must(e.c.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{InstanceIds: []string{id}})).ok(t)
	clk.Step(time.Second)
	s.Instances() // settle

	stop := fleetIDs(e.launch(t, fleetRequest{capacityType: "on-demand", types: []string{"m5.large"}, zones: []string{"us-east-1a"}}))[0]
	if err := s.StopInstance(stop); err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Second)
	s.Instances()

	var got []string
	for _, ev := range drain(t, s) {
		if ev.DetailType != "EC2 Instance State-change Notification" || ev.Source != "aws.ec2" || len(ev.Resources) != 1 {
			t.Errorf("event %+v", ev)
		}
		d := detail[map[string]string](t, ev)
		got = append(got, d["instance-id"]+" "+d["state"])
	}
	want := []string{id + " pending", id + " running", id + " shutting-down", id + " terminated", stop + " pending", stop + " stopping", stop + " stopped"}
	if !slices.Equal(got, want) {
		t.Errorf("state changes\n got %v\nwant %v", got, want)
	}

	s.SetStateChangeEvents(false)
	e.launch(t, fleetRequest{capacityType: "on-demand", types: []string{"m5.large"}, zones: []string{"us-east-1a"}})
	if n := s.QueueDepth(s.InterruptionQueue()); n != 0 {
		t.Errorf("%d messages with state-change events off", n)
	}
}

func TestRawMessage(t *testing.T) {
	s := start(t, Options{MaxReceiveWait: time.Millisecond})
	if err := s.SendMessage(s.InterruptionQueue(), "not json"); err != nil {
		t.Fatal(err)
	}
	msgs := must(sqsClient(s).ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: aws.String(s.QueueURL(s.InterruptionQueue()))})).ok(t).Messages
	if len(msgs) != 1 || aws.ToString(msgs[0].Body) != "not json" {
		t.Fatalf("%+v", msgs)
	}
}
