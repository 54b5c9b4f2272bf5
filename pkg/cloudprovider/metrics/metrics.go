// Package metrics wraps any CloudProvider to record how long each call takes and how
// it fails, under the metric names Karpenter uses, so existing dashboards work.
package metrics

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/prometheus/client_golang/prometheus"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Metrics are the collectors a decorated provider reports to.
type Metrics struct {
	Duration *prometheus.HistogramVec
	Errors   *prometheus.CounterVec
}

// NewMetrics makes the collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		// Karpenter leaves this histogram at Prometheus's default buckets.
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "karpenter_cloudprovider_duration_seconds",
			Help:    "Duration of cloud provider method calls, by calling controller, method and provider.",
			Buckets: prometheus.DefBuckets,
		}, []string{"controller", "method", "provider"}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "karpenter_cloudprovider_errors_total",
			Help: "Failed cloud provider calls, by calling controller, method, provider and error kind.",
		}, []string{"controller", "method", "provider", "error"}),
	}
	for _, c := range []prometheus.Collector{m.Duration, m.Errors} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return nil, err
			}
		}
	}
	return m, nil
}

// Collectors are the metrics, for a registry.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Duration, m.Errors}
}

type controllerKey struct{}

// WithController names the controller calling the provider with ctx, for the
// metrics' controller label (Karpenter's controller names: "provisioner",
// "disruption", …).
func WithController(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, controllerKey{}, name)
}

func controllerOf(ctx context.Context) string {
	name, _ := ctx.Value(controllerKey{}).(string)
	return name
}

// Decorate returns cp recording to m.
func Decorate(cp cloudprovider.CloudProvider, m *Metrics) cloudprovider.CloudProvider {
	return &decorator{cp: cp, m: m}
}

type decorator struct {
	cp cloudprovider.CloudProvider
	m  *Metrics
}

func (d *decorator) observe(ctx context.Context, method string, start time.Time, err error) {
	controller := controllerOf(ctx)
	d.m.Duration.WithLabelValues(controller, method, d.cp.Name()).Observe(time.Since(start).Seconds())
	if err != nil {
		d.m.Errors.WithLabelValues(controller, method, d.cp.Name(), kind(err)).Inc()
	}
}

// kind names an error for the errors metric without unbounded label values.
func kind(err error) string {
	switch {
	case cloudprovider.IsNodeClaimNotFound(err):
		return "NodeClaimNotFoundError"
	case cloudprovider.IsInsufficientCapacity(err):
		return "InsufficientCapacityError"
	case cloudprovider.IsNodeClassNotReady(err):
		return "NodeClassNotReadyError"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "ContextError"
	}
	return "Unknown"
}

func (d *decorator) Create(ctx context.Context, claim *v1.NodeClaim) (*v1.NodeClaim, error) {
	start := time.Now()
	nc, err := d.cp.Create(ctx, claim)
	d.observe(ctx, "Create", start, err)
	return nc, err
}

func (d *decorator) Delete(ctx context.Context, claim *v1.NodeClaim) error {
	start := time.Now()
	err := d.cp.Delete(ctx, claim)
	d.observe(ctx, "Delete", start, err)
	return err
}

func (d *decorator) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	start := time.Now()
	nc, err := d.cp.Get(ctx, providerID)
	d.observe(ctx, "Get", start, err)
	return nc, err
}

func (d *decorator) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	start := time.Now()
	list, err := d.cp.List(ctx)
	d.observe(ctx, "List", start, err)
	return list, err
}

func (d *decorator) InstanceTypes(ctx context.Context, pool *v1.NodePool) ([]*scheduling.InstanceType, error) {
	start := time.Now()
	types, err := d.cp.InstanceTypes(ctx, pool)
	d.observe(ctx, "InstanceTypes", start, err)
	return types, err
}

func (d *decorator) IsDrifted(ctx context.Context, claim *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	start := time.Now()
	reason, err := d.cp.IsDrifted(ctx, claim)
	d.observe(ctx, "IsDrifted", start, err)
	return reason, err
}

func (d *decorator) Name() string { return d.cp.Name() }

func (d *decorator) NodeClassKinds() []schema.GroupKind { return d.cp.NodeClassKinds() }

func (d *decorator) ProviderIDScheme() string { return d.cp.ProviderIDScheme() }
