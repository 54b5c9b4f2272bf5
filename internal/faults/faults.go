// Package faults makes a Kubernetes client's writes fail, for the reliability
// tests (test/reliability): a chosen fraction of its POST, PUT, PATCH and DELETE
// requests answer 500 or 503 without reaching the API server, or reach it and
// then time out, so the caller cannot tell whether the write happened. Reads and
// watches pass untouched. It counts what it injected, by verb, resource and fault.
//
// The controller takes it from the environment (FromEnv), so a test can give the
// built binary faults without a flag a user would see:
//
//	TAILOR_FAULT_WRITE_RATE  fraction of writes that fail, 0 to 1 (unset: no faults)
//	TAILOR_FAULT_SEED        seed of the choice of writes (unset: random)
//	TAILOR_FAULT_TIMEOUT     how long a timed-out write hangs before it fails (default 1s)
package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// Fault is what happens to a write chosen to fail.
type Fault string

const (
	// InternalError answers 500 without sending the request: the write did not happen.
	InternalError Fault = "500"
	// Unavailable answers 503 without sending the request: the write did not happen.
	Unavailable Fault = "503"
	// Timeout sends the request, drops the answer and fails after a delay: the
	// write happened, the caller does not know it (the case that duplicates work).
	Timeout Fault = "timeout"
)

// Faults lists the kinds, in the order Pick chooses among them.
var Faults = []Fault{InternalError, Unavailable, Timeout}

// Environment variables FromEnv reads.
const (
	EnvWriteRate = "TAILOR_FAULT_WRITE_RATE"
	EnvSeed      = "TAILOR_FAULT_SEED"
	EnvTimeout   = "TAILOR_FAULT_TIMEOUT"
)

// Config says how often writes fail.
type Config struct {
	// WriteRate is the fraction of writes that fail, 0 to 1.
	WriteRate float64
	// Seed seeds the choice of failing writes and of their fault.
	Seed uint64
	// TimeoutDelay is how long a Timeout write hangs after its answer came back.
	TimeoutDelay time.Duration
}

// Injector fails writes as its Config says. It is safe for concurrent use.
type Injector struct {
	cfg Config

	mu  sync.Mutex
	rng *rand.Rand

	injected *prometheus.CounterVec
}

// New returns an Injector, or an error naming the bad setting.
func New(cfg Config) (*Injector, error) {
	if cfg.WriteRate < 0 || cfg.WriteRate > 1 {
		return nil, fmt.Errorf("fault write rate %v: want a fraction from 0 to 1", cfg.WriteRate)
	}
	if cfg.TimeoutDelay < 0 {
		return nil, fmt.Errorf("fault timeout %s: want a duration of 0 or more", cfg.TimeoutDelay)
	}
	return &Injector{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		injected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tailor_faults_injected_total",
			Help: "Write requests the fault injector failed (reliability tests only), by verb, resource and fault.",
		}, []string{"verb", "resource", "fault"})}, nil
}

// FromEnv reads the TAILOR_FAULT_* variables through getenv. It returns nil, and no
// error, when TAILOR_FAULT_WRITE_RATE is unset or empty.
func FromEnv(getenv func(string) string) (*Injector, error) {
	rate := getenv(EnvWriteRate)
	if rate == "" {
		return nil, nil
	}
	cfg := Config{TimeoutDelay: time.Second, Seed: rand.Uint64()}
	var err error
	if cfg.WriteRate, err = strconv.ParseFloat(rate, 64); err != nil {
		return nil, fmt.Errorf("%s=%q: want a fraction from 0 to 1", EnvWriteRate, rate)
	}
	if s := getenv(EnvSeed); s != "" {
		if cfg.Seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			return nil, fmt.Errorf("%s=%q: want a non-negative integer", EnvSeed, s)
		}
	}
	if s := getenv(EnvTimeout); s != "" {
		if cfg.TimeoutDelay, err = time.ParseDuration(s); err != nil {
			return nil, fmt.Errorf("%s=%q: want a duration such as 1s", EnvTimeout, s)
		}
	}
	in, err := New(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s=%q, %s=%q: %w", EnvWriteRate, rate, EnvTimeout, getenv(EnvTimeout), err)
	}
	return in, nil
}

// Config is the injector's configuration.
func (in *Injector) Config() Config { return in.cfg }

// Collector exports the counts as tailor_faults_injected_total{verb,resource,fault}.
func (in *Injector) Collector() prometheus.Collector { return in.injected }

// WrapConfig makes every client built from cfg go through the injector, after any
// wrapper cfg already has.
func (in *Injector) WrapConfig(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return in.Wrap(rt) })
}

// Wrap returns a RoundTripper that fails writes before handing them to rt.
func (in *Injector) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper{in: in, next: rt}
}

// IsWrite says whether a request of this method changes something.
func IsWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// Pick decides the fate of one write from two uniform draws in [0, 1): none when
// the first is at or above rate, else the fault the second selects, each kind
// equally likely.
func Pick(rate, draw, kind float64) (Fault, bool) {
	if draw >= rate {
		return "", false
	}
	return Faults[min(int(kind*float64(len(Faults))), len(Faults)-1)], true
}

// Resource names the resource of an API path, with its subresource:
// "/api/v1/namespaces/default/pods/web-1/eviction" is "pods/eviction",
// "/apis/karpenter.sh/v1/nodeclaims/a/status" is "nodeclaims/status".
func Resource(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return "other"
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) >= 3 {
		return parts[0] + "/" + parts[2]
	}
	return parts[0]
}

func (in *Injector) pick() (Fault, bool) {
	in.mu.Lock()
	draw, kind := in.rng.Float64(), in.rng.Float64()
	in.mu.Unlock()
	return Pick(in.cfg.WriteRate, draw, kind)
}

type roundTripper struct {
	in   *Injector
	next http.RoundTripper
}

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if !IsWrite(req.Method) {
		return r.next.RoundTrip(req)
	}
	fault, ok := r.in.pick()
	if !ok {
		return r.next.RoundTrip(req)
	}
	resource := Resource(req.URL.Path)
	r.in.injected.WithLabelValues(req.Method, resource, string(fault)).Inc()
	switch fault {
	case InternalError:
		return answer(req, http.StatusInternalServerError, metav1.StatusReasonInternalError, resource)
	case Unavailable:
		return answer(req, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, resource)
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	// The write is done; its answer is lost.
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	t := time.NewTimer(r.in.cfg.TimeoutDelay)
	defer t.Stop()
	select {
	case <-req.Context().Done():
	case <-t.C:
	}
	return nil, &timeoutError{method: req.Method, path: req.URL.Path}
}

// answer is an API server's error answer, a Status the client decodes into an
// apierrors.StatusError. Without a Retry-After header client-go does not retry.
func answer(req *http.Request, code int, reason metav1.StatusReason, resource string) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	body, err := json.Marshal(&metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason,
		Message: fmt.Sprintf("injected fault: %s %s answered %d", req.Method, resource, code),
	})
	if err != nil {
		return nil, err
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", code, http.StatusText(code)), StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": []string{"application/json"}},
		Body:          io.NopCloser(strings.NewReader(string(body))),
		ContentLength: int64(len(body)), Request: req,
	}, nil
}

// timeoutError is what a client sees when the server took too long: a net.Error
// whose Timeout is true.
type timeoutError struct{ method, path string }

func (e *timeoutError) Error() string {
	return fmt.Sprintf("injected fault: %s %s timed out after the API server applied it", e.method, e.path)
}
func (e *timeoutError) Timeout() bool   { return true }
func (e *timeoutError) Temporary() bool { return true }
