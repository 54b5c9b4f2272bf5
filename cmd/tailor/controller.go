package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nodetailor/tailor/internal/faults"
	"github.com/nodetailor/tailor/pkg/operator"
)

func parseController(args []string, stderr io.Writer) (operator.Options, error) {
	opts := operator.DefaultOptions()
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster, or $KUBECONFIG)")
	fs.StringVar(&opts.CloudProvider, "cloud-provider", opts.CloudProvider, "cloud provider: sim")
	fs.DurationVar(&opts.BatchIdle, "batch-idle-duration", opts.BatchIdle, "close a batch of pending pods after this long without a new one")
	fs.DurationVar(&opts.BatchMax, "batch-max-duration", opts.BatchMax, "close a batch this long after its first pod")
	fs.StringVar(&opts.MetricsAddr, "metrics-bind-address", opts.MetricsAddr, "Prometheus metrics address (0 turns it off)")
	fs.StringVar(&opts.HealthAddr, "health-probe-bind-address", opts.HealthAddr, "liveness and readiness probe address (0 turns it off)")
	fs.StringVar(&opts.PprofAddr, "pprof-bind-address", opts.PprofAddr, "net/http/pprof address (off unless set)")
	fs.BoolVar(&opts.LeaderElection, "leader-elect", opts.LeaderElection, "elect a leader through a Lease, so replicas can stand by")
	fs.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", opts.LeaderElectionNamespace, "namespace of the leader Lease")
	fs.DurationVar(&opts.UnavailableOfferingsTTL, "unavailable-offerings-ttl", opts.UnavailableOfferingsTTL, "how long an offering that ran out of capacity is avoided")
	fs.DurationVar(&opts.Disruption.Interval, "disruption-interval", opts.Disruption.Interval, "pause between disruption passes (emptiness, drift, consolidation)")
	fs.DurationVar(&opts.Disruption.ValidationDelay, "consolidation-validation-delay", opts.Disruption.ValidationDelay, "how long a consolidation decision waits before it is checked again and carried out")
	fs.DurationVar(&opts.Disruption.ReplacementTimeout, "replacement-timeout", opts.Disruption.ReplacementTimeout, "how long replacements may take to initialize before a disruption is rolled back")
	fs.Float64Var(&opts.Disruption.MinSavings, "consolidation-min-savings", opts.Disruption.MinSavings, "fraction of the current price a consolidation replacement must save (deleting a node always may)")
	fs.DurationVar(&opts.InterruptionInterval, "interruption-interval", opts.InterruptionInterval, "how often the cloud provider's interruption notices are read")
	fs.Func("kube-client-qps", fmt.Sprintf("API requests per second the controller may make, per kind (default %v)", opts.KubeClientQPS), func(v string) error {
		q, err := strconv.ParseFloat(v, 32)
		if err != nil || q <= 0 {
			return fmt.Errorf("want a positive number, got %q", v)
		}
		opts.KubeClientQPS = float32(q)
		return nil
	})
	fs.IntVar(&opts.KubeClientBurst, "kube-client-burst", opts.KubeClientBurst, "API requests the controller may make at once above --kube-client-qps, per kind")
	fs.Func("feature-gates", "Karpenter feature gates, Name=bool comma-separated: NodeRepair (replace nodes NotReady for 30 minutes; default false)", func(v string) error {
		gates, err := operator.ParseFeatureGates(v)
		opts.FeatureGates = gates
		return err
	})
	return opts, fs.Parse(args)
}

func runController(opts operator.Options, stderr io.Writer) error {
	tuneGC()
	ctrl.SetLogger(zap.New(zap.WriteTo(stderr)))
	cfg, err := operator.RESTConfig(opts)
	if err != nil {
		return err
	}
	// Reliability tests make the controller's writes fail (TAILOR_FAULT_WRITE_RATE,
	// see internal/faults); unset, nothing changes.
	if inj, err := faults.FromEnv(os.Getenv); err != nil {
		return err
	} else if inj != nil {
		inj.WrapConfig(cfg)
		if err := metrics.Registry.Register(inj.Collector()); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return operator.Run(ctx, cfg, opts)
}
