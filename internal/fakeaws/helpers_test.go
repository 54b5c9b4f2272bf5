package fakeaws

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// epoch is the fake clock's start in tests that move time themselves.
var epoch = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

// start runs a server for one test.
func start(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// startClocked runs a server whose instance lifecycle follows a fake clock.
func startClocked(t *testing.T, opts Options) (*Server, *clocktesting.FakeClock) {
	t.Helper()
	clk := clocktesting.NewFakeClock(epoch)
	opts.Clock = clk
	return start(t, opts), clk
}

// config is the server's SDK configuration with the standard retryer, its
// backoff removed so that retried throttling costs no time.
func config(s *Server, attempts int) aws.Config { return s.AWSConfigWithoutBackoff(attempts) }

func ec2Client(s *Server) *ec2.Client { return ec2.NewFromConfig(config(s, 3)) }

func ctx(t *testing.T) context.Context { return t.Context() }

func flt(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}

// must holds a call's result until ok checks it: must(c.X(ctx, in)).ok(t).
func must[T any](v T, err error) checked[T] { return checked[T]{v, err} }

type checked[T any] struct {
	v   T
	err error
}

func (c checked[T]) ok(t *testing.T) T {
	t.Helper()
	if c.err != nil {
		t.Fatal(c.err)
	}
	return c.v
}
