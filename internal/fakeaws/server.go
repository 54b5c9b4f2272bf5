package fakeaws

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"k8s.io/utils/clock"

	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/cloudprovider/catalog"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Options configure a Server. The zero value is a us-east-1 account with the
// embedded EC2 catalog and a cluster named "tailor".
type Options struct {
	// Seed makes IDs, private addresses and random throttling repeatable.
	Seed uint64
	// Region defaults to us-east-1; the catalog's zones are renamed into it.
	Region    string
	AccountID string
	// InstanceTypes default to the embedded EC2 us-east-1 catalog. Their Capacity
	// must be the type's listing (memory as EC2 lists it, pods as the ENI limit),
	// as catalog.Catalog.InstanceTypes gives it with allocatable.Kwok, not a
	// node's capacity after VM overhead.
	InstanceTypes []*scheduling.InstanceType
	// Inventory, when set, edits the default inventory (see DefaultInventory)
	// before the server builds its state from it.
	Inventory func(*Inventory)
	// Cluster is the EKS cluster DescribeCluster answers for; empty fields get
	// defaults (name "tailor", a generated CA, Kubernetes 1.34).
	Cluster Cluster
	// InterruptionQueue is the SQS queue the EventBridge rules deliver to; it
	// exists from the start. Defaults to the cluster name, as Karpenter's setup does.
	InterruptionQueue string
	// StateChangeEvents posts an "EC2 Instance State-change Notification" to the
	// interruption queue on every instance state change, as the EventBridge rule
	// of a Karpenter installation does. Off by default so that tests see only the
	// messages they cause.
	StateChangeEvents bool
	// PendingDelay is how long a new instance stays pending before it runs.
	PendingDelay time.Duration
	// TerminationDelay is how long a terminating instance stays shutting-down.
	// Defaults to one second.
	TerminationDelay time.Duration
	// TerminatedRetention is how long a terminated instance stays visible to
	// DescribeInstances (EC2 keeps them about an hour). Defaults to one hour.
	TerminatedRetention time.Duration
	// InterruptionDelay is the time between a spot interruption warning and the
	// instance's termination. Defaults to EC2's two minutes.
	InterruptionDelay time.Duration
	// ConsistencyDelay hides a new instance from DescribeInstances, CreateTags and
	// TerminateInstances for this long, as EC2's eventual consistency does.
	ConsistencyDelay time.Duration
	// MaxReceiveWait caps ReceiveMessage's WaitTimeSeconds so long polls do not
	// slow tests down. Defaults to one second.
	MaxReceiveWait time.Duration
	// Clock tells the time of instance state changes and timestamps; waits
	// (latency, long polls) use real time regardless. Defaults to the real clock.
	Clock clock.PassiveClock
}

// Server is the fake. Create it with New, then Start it, or mount it as an
// http.Handler.
type Server struct {
	opts  Options
	clock clock.PassiveClock

	mu  sync.Mutex
	rng *rand.Rand
	inv inventory
	ec2 ec2State
	sqs map[string]*queue // by name
	k   knobs

	listener net.Listener
	http     *http.Server
	url      string
	stop     chan struct{}
	done     chan struct{}
}

// New builds a server and its inventory. It does not listen yet.
func New(opts Options) (*Server, error) {
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.AccountID == "" {
		opts.AccountID = "123456789012"
	}
	if opts.TerminationDelay == 0 {
		opts.TerminationDelay = time.Second
	}
	if opts.TerminatedRetention == 0 {
		opts.TerminatedRetention = time.Hour
	}
	if opts.InterruptionDelay == 0 {
		opts.InterruptionDelay = 2 * time.Minute
	}
	if opts.MaxReceiveWait == 0 {
		opts.MaxReceiveWait = time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.InstanceTypes == nil {
		c, err := catalog.EmbeddedAWSUSEast1()
		if err != nil {
			return nil, fmt.Errorf("loading the instance-type catalog: %w", err)
		}
		types, err := c.InstanceTypes(allocatable.Kwok{})
		if err != nil {
			return nil, fmt.Errorf("loading the instance-type catalog: %w", err)
		}
		opts.InstanceTypes = types
	}
	s := &Server{
		opts:  opts,
		clock: opts.Clock,
		rng:   rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		sqs:   map[string]*queue{},
		k:     newKnobs(),
	}
	if err := s.buildInventory(); err != nil {
		return nil, err
	}
	s.ec2 = newEC2State()
	if s.opts.InterruptionQueue == "" {
		s.opts.InterruptionQueue = s.inv.cluster.Name
	}
	if _, err := s.createQueueLocked(s.opts.InterruptionQueue, nil, nil); err != nil {
		return nil, err
	}
	return s, nil
}

// Start listens on a free loopback port and returns the server's URL, the
// BaseEndpoint for every SDK client.
func (s *Server) Start() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listening: %w", err)
	}
	s.mu.Lock()
	s.listener = l
	s.url = "http://" + l.Addr().String()
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.http = srv
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	s.mu.Unlock()
	// srv, not s.http: a Close right after Start clears s.http before this runs.
	go func() { _ = srv.Serve(l) }()
	// State changes are lazy (computed from timestamps when read); this loop makes
	// the time-driven ones (terminations, interruptions) happen, and their events
	// arrive, without anyone asking.
	go func() {
		defer close(s.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.mu.Lock()
				s.settleLocked()
				s.mu.Unlock()
			}
		}
	}()
	return s.url, nil
}

// URL is the address Start listens on.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Close stops listening and ends open requests.
func (s *Server) Close() error {
	s.mu.Lock()
	srv, stop, done := s.http, s.stop, s.done
	s.http = nil
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	close(stop)
	<-done
	return srv.Close()
}

// AWSConfig is an SDK configuration that reaches this server: its URL as base
// endpoint, static credentials, its region, and an HTTP client that sends request
// bodies from memory (see bufferedBodies). Service clients built from it keep the
// SDK's default (standard) retryer.
func (s *Server) AWSConfig() aws.Config {
	return aws.Config{
		Region:       s.opts.Region,
		Credentials:  credentials.NewStaticCredentialsProvider("AKIAFAKEAWSEXAMPLE", "fakeaws-secret", ""),
		BaseEndpoint: aws.String(s.URL()),
		HTTPClient:   &http.Client{Transport: bufferedBodies{next: awshttp.NewBuildableClient().GetTransport()}},
	}
}

// bufferedBodies sends each request with a copy of its body held in memory.
//
// The SDK closes a request's body as soon as the response headers arrive, and
// net/http's transport, after writing a body of known length, reads it once more
// to check that nothing is left over. A server on loopback answers fast enough
// for the SDK's close to land between the two: the check fails, the transport
// closes the connection, and reading the response body fails with "use of
// closed network connection". Real AWS is never that fast; the fake is. With a
// body the SDK does not own, the transport's check always sees a clean end.
type bufferedBodies struct{ next http.RoundTripper }

func (b bufferedBodies) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return b.next.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	r = r.Clone(r.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.ContentLength = int64(len(body))
	return b.next.RoundTrip(r)
}

// AWSConfigWithoutBackoff is AWSConfig with the SDK's standard retryer (the
// same retry decisions: throttling codes, 5xx, transient errors) making at most
// maxAttempts attempts and not sleeping between them, so tests of throttling
// take no time.
func (s *Server) AWSConfigWithoutBackoff(maxAttempts int) aws.Config {
	cfg := s.AWSConfig()
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = maxAttempts
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			// The client-side retry quota would stop retries after a burst of
			// injected throttling; tests want every attempt to reach the server.
			o.RateLimiter = ratelimit.None
		})
	}
	return cfg
}

// Region is the server's region.
func (s *Server) Region() string { return s.opts.Region }

// AccountID is the account every resource belongs to.
func (s *Server) AccountID() string { return s.opts.AccountID }

// Services, for error formats and throttling codes.
const (
	svcEC2     = "ec2"
	svcIAM     = "iam"
	svcSQS     = "sqs"
	svcSSM     = "ssm"
	svcPricing = "pricing"
	svcEKS     = "eks"
)

// call is one request, routed.
type call struct {
	ctx     context.Context
	service string
	action  string
	body    []byte
	query   *queryParams // Query protocol
	path    string       // REST-JSON
	reqID   string
	// queryMode: SQS clients in query-compatible mode want the query error code in
	// a header.
	queryMode bool
}

func (c *call) name() string { return c.service + ":" + c.action }

// ServeHTTP routes a request by X-Amz-Target (JSON protocols), by the Action and
// Version of the form (Query protocols), or by path (REST-JSON).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	c, err := route(r, body)
	if c == nil {
		c = &call{service: svcEC2}
	}
	c.ctx = r.Context()
	s.mu.Lock()
	c.reqID = s.newUUIDLocked()
	s.mu.Unlock()
	if err == nil {
		err = s.admit(r.Context(), c)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return // the client is gone
	}
	if err != nil {
		s.writeError(w, c, asAPIError(err))
		return
	}
	s.dispatch(w, c)
}

func route(r *http.Request, body []byte) (*call, error) {
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		prefix, action, ok := strings.Cut(target, ".")
		if !ok || r.Method != http.MethodPost {
			return nil, badRequest("UnknownOperationException", "cannot route X-Amz-Target %q", target)
		}
		ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		c := &call{action: action, body: body}
		var want string
		switch prefix {
		case "AmazonSQS":
			c.service, want = svcSQS, "application/x-amz-json-1.0"
			c.queryMode = r.Header.Get("X-Amzn-Query-Mode") == "true"
		case "AmazonSSM":
			c.service, want = svcSSM, "application/x-amz-json-1.1"
		case "AWSPriceListService":
			c.service, want = svcPricing, "application/x-amz-json-1.1"
		default:
			return nil, badRequest("UnknownOperationException", "no service answers X-Amz-Target %q", target)
		}
		if ct != want {
			return c, badRequest("SerializationException", "%s expects Content-Type %s, got %q", prefix, want, ct)
		}
		return c, nil
	}
	if strings.HasPrefix(r.URL.Path, "/clusters") {
		c := &call{service: svcEKS, path: r.URL.Path}
		name, ok := strings.CutPrefix(r.URL.Path, "/clusters/")
		if !ok || name == "" || strings.Contains(name, "/") || r.Method != http.MethodGet {
			return c, errorf(http.StatusNotFound, "UnknownOperationException", "fakeaws serves only GET /clusters/{name} of EKS, not %s %s", r.Method, r.URL.Path)
		}
		c.action = "DescribeCluster"
		return c, nil
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if r.Method != http.MethodPost || ct != "application/x-www-form-urlencoded" {
		return nil, badRequest("UnknownOperationException", "cannot route %s %s (Content-Type %q)", r.Method, r.URL.Path, ct)
	}
	q, err := parseQuery(body)
	if err != nil {
		return nil, err
	}
	c := &call{action: q.str("Action"), query: q, body: body}
	switch version := q.str("Version"); version {
	case ec2Version:
		c.service = svcEC2
	case iamVersion:
		c.service = svcIAM
	default:
		return c, badRequest("InvalidParameterValue", "no service answers Version %q (EC2 is %s, IAM %s)", version, ec2Version, iamVersion)
	}
	if c.action == "" {
		return c, badRequest("MissingAction", "The request must contain the parameter Action")
	}
	return c, nil
}

// admit counts the call and applies the latency and throttling knobs.
func (s *Server) admit(ctx context.Context, c *call) error {
	s.mu.Lock()
	s.k.calls[c.name()]++
	delay := s.k.latencyFor(c)
	throttled := s.k.throttle(c, s.rng)
	s.settleLocked()
	s.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if throttled {
		return throttlingError(c.service)
	}
	return nil
}

// throttlingError is what each service answers when over its request rate:
// RequestLimitExceeded with 503 for EC2, Throttling for IAM, ThrottlingException
// for the JSON services. The SDK's standard retryer retries all of
// these by code (retry.DefaultThrottleErrorCodes), and 503 by status as well.
func throttlingError(service string) *apiError {
	switch service {
	case svcEC2:
		return errorf(http.StatusServiceUnavailable, "RequestLimitExceeded", "Request limit exceeded.")
	case svcIAM:
		return badRequest("Throttling", "Rate exceeded")
	case svcEKS:
		return errorf(http.StatusTooManyRequests, "ThrottlingException", "Rate exceeded")
	}
	return badRequest("ThrottlingException", "Rate exceeded")
}

func (s *Server) dispatch(w http.ResponseWriter, c *call) {
	var err error
	switch c.service {
	case svcEC2:
		err = s.serveEC2(w, c)
	case svcIAM:
		err = s.serveIAM(w, c)
	case svcSQS:
		err = s.serveSQS(w, c)
	case svcSSM:
		err = s.serveSSM(w, c)
	case svcPricing:
		err = s.servePricing(w, c)
	case svcEKS:
		err = s.serveEKS(w, c)
	}
	if err != nil {
		s.writeError(w, c, asAPIError(err))
	}
}

func (s *Server) writeError(w http.ResponseWriter, c *call, e *apiError) {
	switch c.service {
	case svcEC2:
		type xmlError struct {
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		}
		doc := struct {
			Errors    []xmlError `xml:"Errors>Error"`
			RequestID string     `xml:"RequestID"`
		}{[]xmlError{{e.Code, e.Message}}, c.reqID}
		writeXML(w, e.Status, xml.StartElement{Name: xml.Name{Local: "Response"}}, doc)
	case svcIAM:
		fault := "Sender"
		if e.Status >= 500 {
			fault = "Receiver"
		}
		doc := struct {
			Type      string `xml:"Error>Type"`
			Code      string `xml:"Error>Code"`
			Message   string `xml:"Error>Message"`
			RequestID string `xml:"RequestId"`
		}{fault, e.Code, e.Message, c.reqID}
		writeXML(w, e.Status, xml.StartElement{Name: xml.Name{Local: "ErrorResponse"}, Attr: []xml.Attr{{Name: xml.Name{Local: "xmlns"}, Value: iamNamespace}}}, doc)
	case svcSQS:
		shape, queryCode := sqsErrorShape(e.Code)
		if c.queryMode {
			fault := "Sender"
			if e.Status >= 500 {
				fault = "Receiver"
			}
			w.Header().Set("X-Amzn-Query-Error", queryCode+";"+fault)
		}
		w.Header().Set("X-Amzn-RequestId", c.reqID)
		writeJSON(w, e.Status, "application/x-amz-json-1.0", map[string]string{"__type": "com.amazonaws.sqs#" + shape, "message": e.Message})
	case svcSSM, svcPricing:
		w.Header().Set("X-Amzn-ErrorType", e.Code)
		w.Header().Set("X-Amzn-RequestId", c.reqID)
		writeJSON(w, e.Status, "application/x-amz-json-1.1", map[string]string{"__type": e.Code, "message": e.Message})
	case svcEKS:
		w.Header().Set("X-Amzn-ErrorType", e.Code)
		w.Header().Set("X-Amzn-RequestId", c.reqID)
		writeJSON(w, e.Status, "application/json", map[string]string{"message": e.Message})
	}
}

// newUUIDLocked is a random (seeded) UUID, for request, message and event IDs.
func (s *Server) newUUIDLocked() string {
	a, b := s.rng.Uint64(), s.rng.Uint64()
	return fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x", a>>32, (a>>16)&0xffff, a&0xfff, (b>>48)&0x3fff|0x8000, b&0xffffffffffff)
}

// newIDLocked is an EC2-style resource ID: prefix, dash, 17 hex digits.
func (s *Server) newIDLocked(prefix string) string {
	return fmt.Sprintf("%s-0%016x", prefix, s.rng.Uint64())
}

func (s *Server) now() time.Time { return s.clock.Now() }
