package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nodetailor/tailor/internal/faults"
	"github.com/nodetailor/tailor/pkg/operator"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// newControllerCommand is `tailor controller`; run gets the options once the flags
// and their environment variables are read.
func newControllerCommand(env environment, run func(operator.Options) error) *cobra.Command {
	opts := operator.DefaultOptions()
	fs := pflag.NewFlagSet("controller", pflag.ContinueOnError)
	addControllerFlags(fs, &opts)
	vars := flagEnv(fs)
	documentEnv(fs, vars)
	cmd := &cobra.Command{
		Use:   "controller",
		Short: "run the autoscaler against a cluster",
		Long: `Runs the autoscaler against a cluster. Every flag the command line leaves out is
read from the environment variable named after it, as [$NAME] (flag, then
variable, then default); docs/settings.md lists them.`,
		Args: noArgs(""),
		RunE: func(*cobra.Command, []string) error {
			if err := applyEnv(fs, vars, env.lookup); err != nil {
				return err
			}
			finishController(&opts, env)
			return run(opts)
		},
	}
	cmd.Flags().AddFlagSet(fs)
	return cmd
}

// parseControllerEnv parses args as `tailor controller` does, in env.
func parseControllerEnv(args []string, env environment, stderr io.Writer) (operator.Options, error) {
	var got operator.Options
	cmd := newControllerCommand(env, func(opts operator.Options) error { got = opts; return nil })
	err := parseOnly(cmd, args, stderr)
	return got, err
}

// addControllerFlags defines the controller's flags, which fill in opts.
func addControllerFlags(fs *pflag.FlagSet, opts *operator.Options) {
	fs.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else in-cluster, else ~/.kube/config)")
	fs.StringVar(&opts.CloudProvider, "cloud-provider", opts.CloudProvider, "cloud provider: sim or aws")
	fs.StringVar(&opts.AWS.ClusterName, "cluster-name", opts.AWS.ClusterName, "aws: the EKS cluster's name, which tags and bootstraps its instances")
	fs.StringVar(&opts.AWS.ClusterEndpoint, "cluster-endpoint", opts.AWS.ClusterEndpoint, "aws: the API server URL nodes join (default: from EKS DescribeCluster)")
	fs.StringVar(&opts.AWS.ClusterCABundle, "cluster-ca-bundle", opts.AWS.ClusterCABundle, "aws: the cluster CA, base64-encoded PEM (default: from EKS DescribeCluster)")
	fs.StringVar(&opts.AWS.Region, "aws-region", os.Getenv("AWS_REGION"), "aws: the region to launch in (default $AWS_REGION)")
	fs.StringVar(&opts.AWS.InterruptionQueue, "interruption-queue", opts.AWS.InterruptionQueue, "aws: the SQS queue (name or URL) EventBridge delivers interruption events to; empty turns interruption handling off")
	fs.Float64Var(&opts.AWS.VMMemoryOverheadPercent, "vm-memory-overhead-percent", opts.AWS.VMMemoryOverheadPercent, "aws: the share of an instance type's memory the hypervisor keeps (0.075 is 7.5%)")
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
	fs.Func("feature-gates", "Karpenter's feature gates, Name=bool comma-separated, over the defaults (default "+opts.FeatureGates.String()+")", func(v string) error {
		gates, err := operator.ParseFeatureGates(v)
		opts.FeatureGates = gates
		return err
	})
	fs.Func("preference-policy", "Respect or Ignore pods' scheduling preferences (preferred affinities, ScheduleAnyway spreads) when planning nodes (default Respect)", func(v string) error {
		p, err := scheduling.ParsePreferencePolicy(v)
		opts.Scheduling.PreferencePolicy = p
		return err
	})
	fs.Func("min-values-policy", "Strict or BestEffort: whether NodePools' minValues may be relaxed when pods would otherwise fit nowhere (default Strict)", func(v string) error {
		p, err := scheduling.ParseMinValuesPolicy(v)
		opts.Scheduling.MinValuesPolicy = p
		return err
	})
	addOperationFlags(fs, opts)
}

func runController(opts operator.Options, stderr io.Writer) error {
	// karpenter_build_info reports what `tailor version` prints.
	b := Build()
	operator.SetBuild(b.Version, b.Commit)
	tuneGC(opts.MemoryLimit)
	logger, err := operator.NewLogger(stderr, opts.LogLevel)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logger)
	klog.SetLogger(logger) // client-go's own logs (leader election) at the same level
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
