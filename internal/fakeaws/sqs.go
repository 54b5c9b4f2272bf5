package fakeaws

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SQS, JSON 1.0 protocol. Queues live by name; a queue URL is
// <server URL>/<account>/<name>, and any host is accepted in one so that a queue
// URL written for the real service ("https://sqs.us-east-1.amazonaws.com/…")
// reaches the same queue.

type queue struct {
	name      string
	attrs     map[string]string
	tags      map[string]string
	createdAt time.Time
	msgs      []*message
	// arrived is closed, and replaced, when a message arrives, to wake long polls.
	arrived chan struct{}
}

type message struct {
	id           string
	body         string
	md5          string
	sentAt       time.Time
	visibleAt    time.Time
	receiveCount int
	firstReceive time.Time
	receipt      string
}

// queueDefaults are the attributes SQS gives a new queue.
var queueDefaults = map[string]string{
	"VisibilityTimeout":             "30",
	"MaximumMessageSize":            "262144",
	"MessageRetentionPeriod":        "345600",
	"DelaySeconds":                  "0",
	"ReceiveMessageWaitTimeSeconds": "0",
	"SqsManagedSseEnabled":          "true",
}

// settableQueueAttributes are those CreateQueue accepts beyond the defaults.
var settableQueueAttributes = []string{
	"VisibilityTimeout", "MaximumMessageSize", "MessageRetentionPeriod", "DelaySeconds", "ReceiveMessageWaitTimeSeconds",
	"SqsManagedSseEnabled", "Policy", "RedrivePolicy", "RedriveAllowPolicy", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds",
}

var queueName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,80}$`)

func (s *Server) createQueueLocked(name string, attrs, tags map[string]string) (*queue, error) {
	if !queueName.MatchString(name) {
		return nil, badRequest("InvalidParameterValue", "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	for k := range attrs {
		if !slices.Contains(settableQueueAttributes, k) {
			return nil, badRequest("InvalidAttributeName", "Unknown Attribute %s.", k)
		}
	}
	merged := maps.Clone(queueDefaults)
	maps.Copy(merged, attrs)
	if q := s.sqs[name]; q != nil {
		// CreateQueue is idempotent unless the attributes differ.
		for k, v := range attrs {
			if q.attrs[k] != v {
				return nil, badRequest("QueueNameExists", "A queue already exists with the same name and a different value for attribute %s", k)
			}
		}
		return q, nil
	}
	q := &queue{name: name, attrs: merged, tags: cloneTags(tags), createdAt: s.now(), arrived: make(chan struct{})}
	s.sqs[name] = q
	return q, nil
}

// QueueURL is the URL of a queue on this server.
func (s *Server) QueueURL(name string) string {
	return s.URL() + "/" + s.opts.AccountID + "/" + name
}

// InterruptionQueue is the name of the queue EventBridge messages go to.
func (s *Server) InterruptionQueue() string { return s.opts.InterruptionQueue }

// QueueDepth is how many messages a queue holds, in flight or not.
func (s *Server) QueueDepth(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.sqs[name]; q != nil {
		return len(q.msgs)
	}
	return 0
}

// SendMessage puts a raw message on a queue, as another producer would (a test's
// malformed event, say).
func (s *Server) SendMessage(queueName, body string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.sqs[queueName]
	if q == nil {
		return fmt.Errorf("no queue %s", queueName)
	}
	s.enqueueLocked(q, body, 0)
	return nil
}

func (s *Server) enqueueLocked(q *queue, body string, delay time.Duration) *message {
	now := s.now()
	sum := md5.Sum([]byte(body))
	m := &message{id: s.newUUIDLocked(), body: body, md5: hex.EncodeToString(sum[:]), sentAt: now, visibleAt: now.Add(delay)}
	q.msgs = append(q.msgs, m)
	close(q.arrived)
	q.arrived = make(chan struct{})
	return m
}

func (s *Server) queueByURL(u string) (*queue, error) {
	if u == "" {
		return nil, badRequest("MissingParameter", "The request must contain the parameter QueueUrl.")
	}
	parsed, err := url.Parse(u)
	if err != nil {
		return nil, badRequest("InvalidAddress", "The address %s is not valid for this endpoint.", u)
	}
	parts := strings.Split(strings.Trim(parsed.Path, "/"), "/")
	if len(parts) != 2 {
		return nil, badRequest("InvalidAddress", "The address %s is not valid for this endpoint.", u)
	}
	q := s.sqs[parts[1]]
	if parts[0] != s.opts.AccountID || q == nil {
		return nil, badRequest("QueueDoesNotExist", "The specified queue does not exist.")
	}
	return q, nil
}

// sqsErrorShape gives the JSON error shape of an SQS error and the code the
// query-compatible header carries (which the SDK reports as the error code).
func sqsErrorShape(code string) (shape, queryCode string) {
	switch code {
	case "QueueDoesNotExist":
		return code, "AWS.SimpleQueueService.NonExistentQueue"
	case "QueueNameExists":
		return code, "QueueAlreadyExists"
	case "MessageNotInflight", "UnsupportedOperation", "PurgeQueueInProgress", "QueueDeletedRecently":
		return code, "AWS.SimpleQueueService." + code
	}
	return code, code
}

type sqsHandler func(*Server, context.Context, []byte) (any, error)

var sqsHandlers = map[string]sqsHandler{
	"CreateQueue":        (*Server).sqsCreateQueue,
	"GetQueueUrl":        (*Server).sqsGetQueueURL,
	"DeleteQueue":        (*Server).sqsDeleteQueue,
	"ListQueues":         (*Server).sqsListQueues,
	"SendMessage":        (*Server).sqsSendMessage,
	"ReceiveMessage":     (*Server).sqsReceiveMessage,
	"DeleteMessage":      (*Server).sqsDeleteMessage,
	"GetQueueAttributes": (*Server).sqsGetQueueAttributes,
	"PurgeQueue":         (*Server).sqsPurgeQueue,
}

func (s *Server) serveSQS(w http.ResponseWriter, c *call) error {
	h, ok := sqsHandlers[c.action]
	if !ok {
		return badRequest("UnsupportedOperation", "fakeaws does not serve SQS %s", c.action)
	}
	out, err := h(s, c.ctx, c.body)
	if err != nil {
		return err
	}
	w.Header().Set("X-Amzn-RequestId", c.reqID)
	writeJSON(w, http.StatusOK, "application/x-amz-json-1.0", out)
	return nil
}

func (s *Server) sqsCreateQueue(_ context.Context, body []byte) (any, error) {
	var in struct {
		QueueName  string
		Attributes map[string]string
		Tags       map[string]string `json:"tags"`
	}
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.createQueueLocked(in.QueueName, in.Attributes, in.Tags); err != nil {
		return nil, err
	}
	return map[string]string{"QueueUrl": s.queueURLLocked(in.QueueName)}, nil
}

func (s *Server) queueURLLocked(name string) string {
	return s.url + "/" + s.opts.AccountID + "/" + name
}

func (s *Server) sqsGetQueueURL(_ context.Context, body []byte) (any, error) {
	var in struct {
		QueueName              string
		QueueOwnerAWSAccountId string
	}
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sqs[in.QueueName] == nil || (in.QueueOwnerAWSAccountId != "" && in.QueueOwnerAWSAccountId != s.opts.AccountID) {
		return nil, badRequest("QueueDoesNotExist", "The specified queue does not exist.")
	}
	return map[string]string{"QueueUrl": s.queueURLLocked(in.QueueName)}, nil
}

func (s *Server) sqsDeleteQueue(_ context.Context, body []byte) (any, error) {
	var in struct{ QueueUrl string }
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	delete(s.sqs, q.name)
	return struct{}{}, nil
}

func (s *Server) sqsListQueues(_ context.Context, body []byte) (any, error) {
	var in struct {
		QueueNamePrefix string
		MaxResults      int
		NextToken       string
	}
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var urls []string
	for _, name := range slices.Sorted(maps.Keys(s.sqs)) {
		if strings.HasPrefix(name, in.QueueNamePrefix) {
			urls = append(urls, s.queueURLLocked(name))
		}
	}
	offset, err := decodeToken(in.NextToken)
	if err != nil {
		return nil, err
	}
	page, next := cut(urls, offset, in.MaxResults)
	out := map[string]any{"QueueUrls": page}
	if next != "" {
		out["NextToken"] = next
	}
	return out, nil
}

func (s *Server) sqsSendMessage(_ context.Context, body []byte) (any, error) {
	var in struct {
		QueueUrl                string
		MessageBody             string
		DelaySeconds            *int
		MessageAttributes       map[string]any
		MessageSystemAttributes map[string]any
		MessageDeduplicationId  string
		MessageGroupId          string
	}
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if in.MessageBody == "" {
		return nil, badRequest("MissingParameter", "The request must contain the parameter MessageBody.")
	}
	if max, _ := strconv.Atoi(q.attrs["MaximumMessageSize"]); len(in.MessageBody) > max {
		return nil, badRequest("InvalidParameterValue", "One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", max)
	}
	delay, _ := strconv.Atoi(q.attrs["DelaySeconds"])
	if in.DelaySeconds != nil {
		if *in.DelaySeconds < 0 || *in.DelaySeconds > 900 {
			return nil, badRequest("InvalidParameterValue", "Value %d for parameter DelaySeconds is invalid. Reason: must be between 0 and 900, if provided.", *in.DelaySeconds)
		}
		delay = *in.DelaySeconds
	}
	m := s.enqueueLocked(q, in.MessageBody, time.Duration(delay)*time.Second)
	return map[string]string{"MessageId": m.id, "MD5OfMessageBody": m.md5}, nil
}

func (s *Server) sqsReceiveMessage(ctx context.Context, body []byte) (any, error) {
	var in struct {
		QueueUrl                    string
		MaxNumberOfMessages         *int
		WaitTimeSeconds             *int
		VisibilityTimeout           *int
		AttributeNames              []string
		MessageSystemAttributeNames []string
		MessageAttributeNames       []string
		ReceiveRequestAttemptId     string
	}
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	limit := 1
	if in.MaxNumberOfMessages != nil {
		if limit = *in.MaxNumberOfMessages; limit < 1 || limit > 10 {
			return nil, badRequest("InvalidParameterValue", "Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", limit)
		}
	}
	s.mu.Lock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	waitSeconds, _ := strconv.Atoi(q.attrs["ReceiveMessageWaitTimeSeconds"])
	if in.WaitTimeSeconds != nil {
		if waitSeconds = *in.WaitTimeSeconds; waitSeconds < 0 || waitSeconds > 20 {
			s.mu.Unlock()
			return nil, badRequest("InvalidParameterValue", "Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", waitSeconds)
		}
	}
	visibility, _ := strconv.Atoi(q.attrs["VisibilityTimeout"])
	if in.VisibilityTimeout != nil {
		visibility = *in.VisibilityTimeout
	}
	stop := s.stop
	s.mu.Unlock()
	wanted := slices.Concat(in.AttributeNames, in.MessageSystemAttributeNames)

	// Long polling waits in real time, at most MaxReceiveWait, for a message.
	deadline := time.Now().Add(min(time.Duration(waitSeconds)*time.Second, s.opts.MaxReceiveWait))
	for {
		s.mu.Lock()
		s.settleLocked()
		msgs := s.receiveLocked(q, limit, time.Duration(visibility)*time.Second, wanted)
		arrived := q.arrived
		s.mu.Unlock()
		wait := time.Until(deadline)
		if len(msgs) > 0 || wait <= 0 {
			return map[string]any{"Messages": msgs}, nil
		}
		// Re-check at least every 50ms: a fake clock may have made a message
		// visible without anything arriving.
		t := time.NewTimer(min(wait, 50*time.Millisecond))
		select {
		case <-arrived:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-stop:
			t.Stop()
			return map[string]any{"Messages": msgs}, nil
		}
		t.Stop()
	}
}

type sqsMessage struct {
	MessageId     string
	ReceiptHandle string
	MD5OfBody     string
	Body          string
	Attributes    map[string]string `json:",omitempty"`
}

func (s *Server) receiveLocked(q *queue, limit int, visibility time.Duration, wanted []string) []sqsMessage {
	now := s.now()
	out := []sqsMessage{}
	for _, m := range q.msgs {
		if len(out) == limit {
			break
		}
		if now.Before(m.visibleAt) {
			continue
		}
		m.receiveCount++
		if m.firstReceive.IsZero() {
			m.firstReceive = now
		}
		m.visibleAt = now.Add(visibility)
		m.receipt = fmt.Sprintf("%s#%d#%s", m.id, m.receiveCount, s.newUUIDLocked())
		x := sqsMessage{MessageId: m.id, ReceiptHandle: m.receipt, MD5OfBody: m.md5, Body: m.body}
		all := map[string]string{
			"SenderId":                         "AIDAFAKEAWSEVENTBRIDGE",
			"SentTimestamp":                    strconv.FormatInt(m.sentAt.UnixMilli(), 10),
			"ApproximateReceiveCount":          strconv.Itoa(m.receiveCount),
			"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstReceive.UnixMilli(), 10),
		}
		for _, name := range wanted {
			if name == "All" {
				x.Attributes = all
				break
			}
			if v, ok := all[name]; ok {
				if x.Attributes == nil {
					x.Attributes = map[string]string{}
				}
				x.Attributes[name] = v
			}
		}
		out = append(out, x)
	}
	return out
}

func (s *Server) sqsDeleteMessage(_ context.Context, body []byte) (any, error) {
	var in struct {
		QueueUrl      string
		ReceiptHandle string
	}
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	id, _, _ := strings.Cut(in.ReceiptHandle, "#")
	for i, m := range q.msgs {
		if m.id == id {
			// SQS accepts a stale receipt handle of a message that is still there.
			q.msgs = slices.Delete(q.msgs, i, i+1)
			return struct{}{}, nil
		}
	}
	if !strings.Contains(in.ReceiptHandle, "#") {
		return nil, badRequest("ReceiptHandleIsInvalid", "The input receipt handle \"%s\" is not a valid receipt handle.", in.ReceiptHandle)
	}
	return struct{}{}, nil // deleting a message twice succeeds
}

func (s *Server) sqsPurgeQueue(_ context.Context, body []byte) (any, error) {
	var in struct{ QueueUrl string }
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	q.msgs = nil
	return struct{}{}, nil
}

func (s *Server) sqsGetQueueAttributes(_ context.Context, body []byte) (any, error) {
	var in struct {
		QueueUrl       string
		AttributeNames []string
	}
	if err := decodeJSON(body, &in); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	now := s.now()
	all := maps.Clone(q.attrs)
	var visible, inFlight, delayed int
	for _, m := range q.msgs {
		switch {
		case !now.Before(m.visibleAt):
			visible++
		case m.receiveCount > 0:
			inFlight++
		default:
			delayed++
		}
	}
	all["QueueArn"] = fmt.Sprintf("arn:aws:sqs:%s:%s:%s", s.opts.Region, s.opts.AccountID, q.name)
	all["ApproximateNumberOfMessages"] = strconv.Itoa(visible)
	all["ApproximateNumberOfMessagesNotVisible"] = strconv.Itoa(inFlight)
	all["ApproximateNumberOfMessagesDelayed"] = strconv.Itoa(delayed)
	all["CreatedTimestamp"] = strconv.FormatInt(q.createdAt.Unix(), 10)
	all["LastModifiedTimestamp"] = strconv.FormatInt(q.createdAt.Unix(), 10)
	out := map[string]string{}
	for _, name := range in.AttributeNames {
		if name == "All" {
			out = all
			break
		}
		v, ok := all[name]
		if !ok {
			return nil, badRequest("InvalidAttributeName", "Unknown Attribute %s.", name)
		}
		out[name] = v
	}
	return map[string]any{"Attributes": out}, nil
}
