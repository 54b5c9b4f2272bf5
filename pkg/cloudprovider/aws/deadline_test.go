package aws

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
)

// The AWS calls made outside the CloudProvider interface (which
// pkg/cloudprovider/timeout bounds) have deadlines of their own: an API that
// hangs (the fake's latency of an hour) fails the call at its deadline rather
// than holding the caller for good. The deadlines here are shortened to 200ms;
// each check allows far more, on a loaded machine, and far less than the hour.

const (
	shortDeadline = 200 * time.Millisecond
	// returnsWithin is how long a call with shortDeadline may take at most.
	returnsWithin = 15 * time.Second
)

// timed runs f and fails the test if it took longer than returnsWithin.
func timed(t *testing.T, what string, f func()) {
	t.Helper()
	start := time.Now()
	f()
	if took := time.Since(start); took > returnsWithin {
		t.Errorf("%s took %s with a %s deadline", what, took, shortDeadline)
	}
}

// A hung DescribeSubnets and DescribeImages fail their parts of the resolution
// at the deadline; the other parts, each with a deadline of its own, resolve.
func TestResolveDeadline(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	e.opts.CallTimeout = shortDeadline
	cloud := e.restart()
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "hung-resolve"}, Spec: awsv1.EC2NodeClassSpec{
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": e.opts.ClusterName}}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": e.opts.ClusterName}}},
		Role:                       "KarpenterNodeRole-" + e.opts.ClusterName,
	}}
	e.fake.SetLatency("ec2:DescribeSubnets", time.Hour)
	e.fake.SetLatency("ec2:DescribeImages", time.Hour)
	var r Resolution
	timed(t, "Resolve", func() { r = cloud.Resolve(t.Context(), nc) })
	for part, err := range map[string]error{"subnets": r.SubnetsErr, "AMIs": r.AMIsErr} {
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s of a hung API: want a deadline error, got %v", part, err)
		}
	}
	if r.SecurityGroupsErr != nil || len(r.SecurityGroups) == 0 || r.InstanceProfileErr != nil || r.InstanceProfile == "" {
		t.Errorf("the parts whose APIs answer must resolve: %+v", r)
	}
}

// relabelLapsed lists the instances through the provider's List outside the
// CloudProvider interface: a hung DescribeInstances fails the reconcile at the
// deadline.
func TestRelabelLapsedDeadline(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	e.opts.ReservedCapacity = true
	nc := e.nodeClass(t, nil)
	claim := e.claim(nc, "hung-relabel", req(v1.LabelInstanceType, "m5.large"))
	claim.UID = ""
	claim.Labels[v1.CapacityTypeLabelKey] = CapacityTypeReserved
	if err := kube.Create(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), claim) })
	claim.Status.ProviderID = ProviderID(e.opts.Region+"a", "i-0123456789abcdef0")
	if err := kube.Status().Update(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	e.opts.CallTimeout = shortDeadline
	ctrl := NewNodeClassController(kube, e.restart())
	e.fake.SetLatency("ec2:DescribeInstances", time.Hour)
	var err error
	timed(t, "relabelLapsed", func() { err = ctrl.relabelLapsed(t.Context(), nc) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("relabelling against a hung DescribeInstances: want a deadline error, got %v", err)
	}
}

// A receive whose ReceiveMessage hangs fails at its wait plus the timeout, as do
// a hung GetQueueUrl and DeleteMessage; a healthy long poll, which SQS holds for
// the whole wait, is not cut short.
func TestInterruptionQueueDeadline(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{Seed: 0xdead1})
	queue := e.fake.InterruptionQueue()
	newQueue := func() *InterruptionQueue {
		q := NewInterruptionQueue(e.clients.SQS, queue, kube, e.clock)
		q.Wait, q.timeout = 1, shortDeadline
		return q
	}

	// The fake holds an empty receive for its MaxReceiveWait (1s), longer than
	// the timeout: the deadline is the wait plus the timeout.
	q := newQueue()
	if _, err := q.Interruptions(t.Context()); err != nil {
		t.Fatalf("a long poll of 1s with a %s timeout: %v", shortDeadline, err)
	}

	e.fake.SetLatency("sqs:ReceiveMessage", time.Hour)
	var err error
	timed(t, "a hung receive", func() { _, err = q.Interruptions(t.Context()) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a hung receive: want a deadline error, got %v", err)
	}
	e.fake.SetLatency("sqs:ReceiveMessage", 0)

	e.fake.SetLatency("sqs:GetQueueUrl", time.Hour)
	timed(t, "a hung GetQueueUrl", func() { _, err = newQueue().Interruptions(t.Context()) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a hung GetQueueUrl: want a deadline error, got %v", err)
	}
	e.fake.SetLatency("sqs:GetQueueUrl", 0)

	// A message whose deletion hangs: the poll ends, and the message stays.
	if err := e.fake.SendMessage(queue, `{"hello":"world"}`); err != nil {
		t.Fatal(err)
	}
	e.fake.SetLatency("sqs:DeleteMessage", time.Hour)
	timed(t, "a hung delete", func() { _, err = q.Interruptions(t.Context()) })
	if err != nil {
		t.Errorf("a failed deletion is logged, not returned: %v", err)
	}
	if e.fake.Calls("sqs:DeleteMessage") == 0 {
		t.Error("the message was never deleted, so the test proves nothing")
	}
}

// A hung Pricing API or spot price history fails the refresh at the deadline,
// and the prices read before stay.
func TestPriceRefreshDeadline(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	e.prices.readTimeout = shortDeadline
	before := e.prices.Prices()
	e.fake.SetLatency("pricing:GetProducts", time.Hour)
	e.fake.SetLatency("ec2:DescribeSpotPriceHistory", time.Hour)
	for what, refresh := range map[string]func(context.Context) error{"on-demand": e.prices.RefreshOnDemand, "spot": e.prices.RefreshSpot} {
		var err error
		timed(t, what+" refresh", func() { err = refresh(t.Context()) })
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s refresh against a hung API: want a deadline error, got %v", what, err)
		}
	}
	if after := e.prices.Prices(); after.OnDemand["m5.large"] != before.OnDemand["m5.large"] {
		t.Errorf("a failed refresh changed m5.large's price: %v, then %v", before.OnDemand["m5.large"], after.OnDemand["m5.large"])
	}
}

// The clients' HTTP timeout bounds each attempt even without a deadline in the
// context: a hung attempt is retried, and the call fails once the retryer gives
// up, instead of never.
func TestHTTPAttemptTimeout(t *testing.T) {
	t.Parallel()
	fake, cfg := startFake(t, fakeaws.Options{})
	var err error
	clients := newClients(cfg, shortDeadline)
	fake.SetLatency("ec2:DescribeSubnets", time.Hour)
	timed(t, "DescribeSubnets", func() {
		_, err = clients.EC2.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{})
	})
	if err == nil {
		t.Error("DescribeSubnets against a hung API succeeded")
	}
	if n := fake.Calls("ec2:DescribeSubnets"); n != 3 {
		t.Errorf("%d attempts of a hung DescribeSubnets, want the retryer's 3", n)
	}
	// Every client has it (not only EC2's).
	fake.SetLatency("sqs:GetQueueUrl", time.Hour)
	timed(t, "GetQueueUrl", func() {
		_, err = clients.SQS.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: aws.String(fake.InterruptionQueue())})
	})
	if err == nil {
		t.Error("GetQueueUrl against a hung API succeeded")
	}

	// The SQS long poll holds a healthy request for up to 20 s, then the receive's
	// own deadline adds its timeout: the backstop must not cut either.
	if HTTPAttemptTimeout <= 20*time.Second+requestTimeout {
		t.Errorf("HTTPAttemptTimeout %s would cut a healthy long poll of 20 s", HTTPAttemptTimeout)
	}
}

// withHTTPTimeout bounds the SDK's default client and a plain http.Client, keeps
// a timeout the configuration already has, and leaves other clients alone.
func TestWithHTTPTimeout(t *testing.T) {
	const d = 7 * time.Second
	timeoutOf := func(hc aws.HTTPClient) time.Duration {
		switch c := hc.(type) {
		case *awshttp.BuildableClient:
			return c.GetTimeout()
		case *http.Client:
			return c.Timeout
		}
		return -1
	}
	plain := &http.Client{}
	for _, tc := range []struct {
		name string
		in   aws.HTTPClient
		want time.Duration
	}{
		{"SDK default (nil)", nil, d},
		{"SDK buildable client", awshttp.NewBuildableClient(), d},
		{"buildable client with a timeout", awshttp.NewBuildableClient().WithTimeout(time.Second), time.Second},
		{"plain client", plain, d},
		{"plain client with a timeout", &http.Client{Timeout: time.Second}, time.Second},
		{"another kind of client", otherClient{}, -1},
	} {
		cfg := withHTTPTimeout(aws.Config{HTTPClient: tc.in}, d)
		if got := timeoutOf(cfg.HTTPClient); got != tc.want {
			t.Errorf("%s: timeout %s, want %s", tc.name, got, tc.want)
		}
	}
	if plain.Timeout != 0 {
		t.Error("the caller's http.Client was changed, not copied")
	}
}

type otherClient struct{}

func (otherClient) Do(*http.Request) (*http.Response, error) { return nil, errors.New("unused") }
