package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/metrics"
)

// Interruption kinds, as the interruption controller names its events and counts
// karpenter_interruption_received_messages_total.
const (
	KindSpotInterruption        = cloudprovider.KindSpotInterruption
	KindRebalanceRecommendation = "RebalanceRecommendation"
	KindScheduledChange         = "ScheduledChange"
	KindInstanceStopped         = "InstanceStopped"
	KindInstanceTerminated      = "InstanceTerminated"
	// KindCapacityReservationInterruption: the owner of an interruptible
	// capacity reservation takes its capacity back.
	KindCapacityReservationInterruption = "CapacityReservationInterruption"
)

// spotWarning is how long EC2 gives a spot instance after its interruption warning.
const spotWarning = 2 * time.Minute

// Interruption metrics besides the controller's received count, with Karpenter's names.
var (
	interruptionDeleted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "karpenter_interruption_deleted_messages_total",
		Help: "Messages deleted from the interruption queue.",
	})
	interruptionQueueDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "karpenter_interruption_message_queue_duration_seconds",
		Help:    "Time from a message's arrival in the interruption queue to its handling.",
		Buckets: metrics.DurationBuckets(),
	})
)

// InterruptionCollectors are the interruption queue's metrics, for registration.
func InterruptionCollectors() []prometheus.Collector {
	return []prometheus.Collector{interruptionDeleted, interruptionQueueDuration}
}

// InterruptionQueue reads the SQS queue that EventBridge rules deliver EC2 and
// AWS Health events to, as Karpenter's --interruption-queue. Every message is
// deleted once read: the events about this cluster's instances become
// interruptions, the rest (other instances, other events, malformed bodies) are
// dropped.
type InterruptionQueue struct {
	sqs   *sqs.Client
	kube  client.Client
	clock clock.Clock
	// queue is the name (or URL) given; url is resolved from it once.
	queue string
	// Wait is the long poll of each ReceiveMessage, in seconds (0–20).
	Wait int32
	// timeout bounds each SQS request, on top of the long poll for a receive
	// (see requestTimeout).
	timeout time.Duration

	// reclaimed, when set, hears of each reservation an interruption warning
	// takes an instance of this cluster's out of (see OnReservationReclaimed).
	reclaimed func(reservationID string)

	mu  sync.Mutex
	url string
}

// requestTimeout bounds each SQS request of the interruption queue, and a
// receive's long poll on top of its Wait. The poll runs on the manager's
// context, which has no deadline, so without one a receive that hangs would
// stop interruption handling for good; with it, the poll fails and the next one
// starts, well inside a spot warning's two minutes. SQS answers within a moment
// of the wait ending, so 10 s covers a retried request too. Messages a receive
// cut short had taken come back after the queue's visibility timeout.
const requestTimeout = 10 * time.Second

var _ cloudprovider.InterruptionSource = (*InterruptionQueue)(nil)

// NewInterruptionQueue reads queue, a queue name or URL; kube finds the
// NodeClaims the events are about.
func NewInterruptionQueue(sqsClient *sqs.Client, queue string, kube client.Client, clk clock.Clock) *InterruptionQueue {
	return &InterruptionQueue{sqs: sqsClient, kube: kube, clock: clk, queue: queue, Wait: 1, timeout: requestTimeout}
}

// OnReservationReclaimed has f told the capacity reservation of each of this
// cluster's instances an EC2 Capacity Reservation Instance Interruption Warning
// is about: its owner is taking capacity back, so it has no room for new nodes.
func (q *InterruptionQueue) OnReservationReclaimed(f func(reservationID string)) *InterruptionQueue {
	q.reclaimed = f
	return q
}

func (q *InterruptionQueue) queueURL(ctx context.Context) (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.url != "" {
		return q.url, nil
	}
	if strings.HasPrefix(q.queue, "https://") || strings.HasPrefix(q.queue, "http://") {
		q.url = q.queue
		return q.url, nil
	}
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	out, err := q.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q.queue)})
	if err != nil {
		return "", fmt.Errorf("finding interruption queue %s: %w", q.queue, err)
	}
	q.url = aws.ToString(out.QueueUrl)
	return q.url, nil
}

// Interruptions receives up to ten messages (waiting at most Wait seconds for
// the first) and returns the interruptions of this cluster's instances.
func (q *InterruptionQueue) Interruptions(ctx context.Context) ([]cloudprovider.Interruption, error) {
	url, err := q.queueURL(ctx)
	if err != nil {
		return nil, err
	}
	out, err := q.receive(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("receiving from interruption queue %s: %w", q.queue, err)
	}
	if len(out.Messages) == 0 {
		return nil, nil
	}
	ours, reservations, err := q.claimedInstances(ctx)
	if err != nil {
		return nil, err
	}
	logger := log.FromContext(ctx)
	var notices []cloudprovider.Interruption
	for _, m := range out.Messages {
		if sent, err := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
			interruptionQueueDuration.Observe(q.clock.Since(time.UnixMilli(sent)).Seconds())
		}
		parsed, err := parseMessage([]byte(aws.ToString(m.Body)))
		if err != nil {
			logger.Error(err, "dropping an interruption queue message", "queue", q.queue, "messageID", aws.ToString(m.MessageId))
		} else {
			notices = append(notices, claimed(parsed, ours)...)
			q.tellReclaimed(parsed, reservations)
		}
		// Deleted whatever it held: a message that cannot be read now never can.
		if err := q.delete(ctx, url, m.ReceiptHandle); err != nil {
			logger.Error(err, "deleting an interruption queue message", "queue", q.queue, "messageID", aws.ToString(m.MessageId))
			continue
		}
		interruptionDeleted.Inc()
	}
	return notices, nil
}

// receive long-polls for up to ten messages, within the wait and q.timeout.
func (q *InterruptionQueue) receive(ctx context.Context, url string) (*sqs.ReceiveMessageOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(q.Wait)*time.Second+q.timeout)
	defer cancel()
	return q.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: q.Wait,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp},
	})
}

// delete removes a message read, within q.timeout.
func (q *InterruptionQueue) delete(ctx context.Context, url string, receipt *string) error {
	ctx, cancel := context.WithTimeout(ctx, q.timeout)
	defer cancel()
	_, err := q.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: receipt})
	return err
}

// claimedInstances are the provider IDs of the cluster's NodeClaims, and the
// capacity reservations of those in one, by instance ID.
func (q *InterruptionQueue) claimedInstances(ctx context.Context) (providerIDs, reservations map[string]string, err error) {
	claims := &v1.NodeClaimList{}
	if err := q.kube.List(ctx, claims); err != nil {
		return nil, nil, fmt.Errorf("listing NodeClaims for interruption messages: %w", err)
	}
	providerIDs, reservations = map[string]string{}, map[string]string{}
	for _, c := range claims.Items {
		if id, err := ParseProviderID(c.Status.ProviderID); err == nil {
			providerIDs[id] = c.Status.ProviderID
			if r := c.Labels[LabelCapacityReservationID]; r != "" {
				reservations[id] = r
			}
		}
	}
	return providerIDs, reservations, nil
}

// tellReclaimed tells the reclaimed hook of the reservations the notices'
// capacity reservation interruptions are about (reservations: by instance ID).
func (q *InterruptionQueue) tellReclaimed(notices []instanceNotice, reservations map[string]string) {
	if q.reclaimed == nil {
		return
	}
	for _, n := range notices {
		if r := reservations[n.instanceID]; r != "" && n.kind == KindCapacityReservationInterruption {
			q.reclaimed(r)
		}
	}
}

// event is an EventBridge event as delivered to SQS.
type event struct {
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Time       time.Time       `json:"time"`
	Detail     json.RawMessage `json:"detail"`
}

type ec2Detail struct {
	InstanceID string `json:"instance-id"`
	State      string `json:"state"`
	// TerminationTime is when a capacity reservation interruption takes the
	// instance (RFC 3339).
	TerminationTime string `json:"instance-termination-time"`
}

type healthDetail struct {
	Service           string `json:"service"`
	EventTypeCode     string `json:"eventTypeCode"`
	EventTypeCategory string `json:"eventTypeCategory"`
	StartTime         string `json:"startTime"`
	AffectedEntities  []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
}

// parseMessage reads a message body as an EventBridge event and returns what it
// announces.
func parseMessage(body []byte) ([]instanceNotice, error) {
	var ev event
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("message is not an EventBridge event: %w", err)
	}
	if ev.Source == "" || ev.DetailType == "" {
		return nil, fmt.Errorf("message is not an EventBridge event: no source or detail-type")
	}
	return noticesOf(ev)
}

// instanceNotice is what an event says of one instance.
type instanceNotice struct {
	instanceID string
	kind       string
	at         time.Time
	recordOnly bool
}

// noticesOf reads what an event announces, as Karpenter acts on it: a spot
// interruption warning, a capacity reservation interruption warning, an EC2
// scheduled change and an instance stopping or terminating take the instance
// away; a rebalance recommendation is only recorded; anything else says nothing.
func noticesOf(ev event) ([]instanceNotice, error) {
	switch {
	case ev.Source == "aws.ec2" && ev.DetailType == "EC2 Spot Instance Interruption Warning":
		d, err := decodeDetail[ec2Detail](ev)
		if err != nil || d.InstanceID == "" {
			return nil, detailError(ev, err, "instance-id")
		}
		return []instanceNotice{{instanceID: d.InstanceID, kind: KindSpotInterruption, at: ev.Time.Add(spotWarning)}}, nil
	case ev.Source == "aws.ec2" && ev.DetailType == "EC2 Capacity Reservation Instance Interruption Warning":
		d, err := decodeDetail[ec2Detail](ev)
		if err != nil || d.InstanceID == "" {
			return nil, detailError(ev, err, "instance-id")
		}
		// EC2 warns two minutes ahead, and says when.
		at := ev.Time.Add(spotWarning)
		if t, err := time.Parse(time.RFC3339, d.TerminationTime); err == nil {
			at = t
		}
		return []instanceNotice{{instanceID: d.InstanceID, kind: KindCapacityReservationInterruption, at: at}}, nil
	case ev.Source == "aws.ec2" && ev.DetailType == "EC2 Instance Rebalance Recommendation":
		d, err := decodeDetail[ec2Detail](ev)
		if err != nil || d.InstanceID == "" {
			return nil, detailError(ev, err, "instance-id")
		}
		return []instanceNotice{{instanceID: d.InstanceID, kind: KindRebalanceRecommendation, at: ev.Time, recordOnly: true}}, nil
	case ev.Source == "aws.ec2" && ev.DetailType == "EC2 Instance State-change Notification":
		d, err := decodeDetail[ec2Detail](ev)
		if err != nil || d.InstanceID == "" {
			return nil, detailError(ev, err, "instance-id")
		}
		switch d.State {
		case "stopping", "stopped":
			return []instanceNotice{{instanceID: d.InstanceID, kind: KindInstanceStopped, at: ev.Time}}, nil
		case "shutting-down", "terminated":
			return []instanceNotice{{instanceID: d.InstanceID, kind: KindInstanceTerminated, at: ev.Time}}, nil
		}
		return nil, nil
	case ev.Source == "aws.health" && ev.DetailType == "AWS Health Event":
		d, err := decodeDetail[healthDetail](ev)
		if err != nil {
			return nil, detailError(ev, err, "")
		}
		if d.Service != "EC2" || d.EventTypeCategory != "scheduledChange" {
			return nil, nil
		}
		at := ev.Time
		if start, err := time.Parse(time.RFC1123, d.StartTime); err == nil {
			at = start
		}
		var out []instanceNotice
		for _, e := range d.AffectedEntities {
			if strings.HasPrefix(e.EntityValue, "i-") {
				out = append(out, instanceNotice{instanceID: e.EntityValue, kind: KindScheduledChange, at: at})
			}
		}
		return out, nil
	}
	return nil, nil
}

func decodeDetail[T any](ev event) (T, error) {
	var d T
	err := json.Unmarshal(ev.Detail, &d)
	return d, err
}

func detailError(ev event, err error, field string) error {
	if err != nil {
		return fmt.Errorf("%s event from %s: detail: %w", ev.DetailType, ev.Source, err)
	}
	return fmt.Errorf("%s event from %s: detail has no %s", ev.DetailType, ev.Source, field)
}

// claimed are the interruptions of the notices' instances in ours (provider IDs
// by instance ID); notices of other instances are dropped.
func claimed(notices []instanceNotice, ours map[string]string) []cloudprovider.Interruption {
	var out []cloudprovider.Interruption
	for _, n := range notices {
		if pid, ok := ours[n.instanceID]; ok {
			out = append(out, cloudprovider.Interruption{ProviderID: pid, At: n.at, Kind: n.kind, RecordOnly: n.recordOnly})
		}
	}
	return out
}
