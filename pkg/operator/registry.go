package operator

import (
	"runtime"
	"runtime/debug"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	awscloud "github.com/nodetailor/tailor/pkg/cloudprovider/aws"
	"github.com/nodetailor/tailor/pkg/controllers/disruption"
	"github.com/nodetailor/tailor/pkg/controllers/interruption"
	"github.com/nodetailor/tailor/pkg/controllers/node/health"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim/lifecycle"
	"github.com/nodetailor/tailor/pkg/controllers/provisioning"
	"github.com/nodetailor/tailor/pkg/controllers/termination"
	"github.com/nodetailor/tailor/pkg/metrics"
)

// The pod informer's events time pods (see podTracker), under Karpenter's names.
var (
	podStartupDuration = prometheus.NewSummary(prometheus.SummaryOpts{
		Name:       "karpenter_pods_startup_duration_seconds",
		Help:       "The time from pod creation until the pod is running (ready), for pods seen pending.",
		Objectives: metrics.SummaryObjectives(),
	})
	podBoundDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "karpenter_pods_bound_duration_seconds",
		Help:    "The time from pod creation until the pod is bound, for pods seen unbound.",
		Buckets: metrics.DurationBuckets(),
	})
	// Timed from when the provisioner first found room for the pod (see
	// metrics.PodTimes), as Karpenter's alpha provisioning_ families are.
	podProvisioningStartupDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "karpenter_pods_provisioning_startup_duration_seconds",
		Help:    "The time from when the provisioner first found room for the pod until the pod is running (ready).",
		Buckets: metrics.DurationBuckets(),
	})
	podProvisioningBoundDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "karpenter_pods_provisioning_bound_duration_seconds",
		Help:    "The time from when the provisioner first found room for the pod until it binds.",
		Buckets: metrics.DurationBuckets(),
	})
)

// stamp is the version and commit SetBuild set; nil until it is called.
var stamp atomic.Pointer[[2]string]

// SetBuild sets the version and commit karpenter_build_info reports: cmd/tailor
// passes what `tailor version` prints (stamped at build time). Call it before Run.
// Never called, or called with an empty version, the Go build's own stamp is used.
func SetBuild(version, commit string) {
	if version == "" {
		stamp.Store(nil)
		return
	}
	stamp.Store(&[2]string{version, commit})
}

// BuildStamp returns the version and commit karpenter_build_info reports.
func BuildStamp() (version, commit string) {
	if s := stamp.Load(); s != nil {
		return s[0], s[1]
	}
	version = "dev"
	if info, ok := debug.ReadBuildInfo(); ok {
		if v := info.Main.Version; v != "" && v != "(devel)" {
			version = v
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
	}
	return version, commit
}

// buildInfo is karpenter_build_info: 1, labeled with the binary's version and
// commit (see BuildStamp), Go version and architecture.
func buildInfo() prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "karpenter_build_info",
		Help: "A metric with a constant '1' value labeled by the version, Go version, architecture and commit Tailor was built from.",
	}, []string{"version", "goversion", "goarch", "commit"})
	version, commit := BuildStamp()
	g.WithLabelValues(version, runtime.Version(), runtime.GOARCH, commit).Set(1)
	return g
}

// metricCollectors are every metric the controllers report to, in one explicit
// list (the cloud provider's, made with its decorator, and the cluster collector
// are registered where they are made).
func metricCollectors() []prometheus.Collector {
	out := []prometheus.Collector{buildInfo(), podStartupDuration, podBoundDuration, podProvisioningStartupDuration, podProvisioningBoundDuration,
		interruption.Received, kindlessConditions, nodePoolConditions, nodeClaimConditions, nodeConditions, ec2NodeClassConditions, bufferConditions}
	for _, cs := range [][]prometheus.Collector{metrics.Collectors(), provisioning.Collectors(), lifecycle.Collectors(), termination.Collectors(),
		disruption.Collectors(), health.Collectors(), awscloud.InterruptionCollectors(), awscloud.CloudProviderCollectors()} {
		out = append(out, cs...)
	}
	return out
}

// registerMetrics registers metricCollectors with reg.
func registerMetrics(reg prometheus.Registerer) error {
	for _, c := range metricCollectors() {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
