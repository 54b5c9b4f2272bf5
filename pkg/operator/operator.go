// Package operator wires Tailor's controllers into one controller-runtime manager:
// options, scheme, cloud provider, metrics, health probes and leader election.
package operator

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/kubescheme"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	cpmetrics "github.com/nodetailor/tailor/pkg/cloudprovider/metrics"
	cptimeout "github.com/nodetailor/tailor/pkg/cloudprovider/timeout"
	disruptionctl "github.com/nodetailor/tailor/pkg/controllers/disruption"
	"github.com/nodetailor/tailor/pkg/controllers/interruption"
	"github.com/nodetailor/tailor/pkg/controllers/node/health"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim/expiration"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim/garbagecollection"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim/lifecycle"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim/podevents"
	"github.com/nodetailor/tailor/pkg/controllers/nodepool"
	"github.com/nodetailor/tailor/pkg/controllers/nodepool/registrationhealth"
	"github.com/nodetailor/tailor/pkg/controllers/nodepool/static"
	"github.com/nodetailor/tailor/pkg/controllers/provisioning"
	"github.com/nodetailor/tailor/pkg/controllers/termination"
	"github.com/nodetailor/tailor/pkg/disruption"
	"github.com/nodetailor/tailor/pkg/events"
	tailormetrics "github.com/nodetailor/tailor/pkg/metrics"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/state"
)

// Options configure the controller; cmd/tailor parses them from flags.
type Options struct {
	// Kubeconfig is a kubeconfig file; empty means in-cluster, or $KUBECONFIG.
	Kubeconfig    string
	CloudProvider string
	BatchIdle     time.Duration
	BatchMax      time.Duration
	// MetricsAddr, HealthAddr and PprofAddr (net/http/pprof, off when empty) are
	// listen addresses; "0" turns one off.
	MetricsAddr    string
	HealthAddr     string
	PprofAddr      string
	LeaderElection bool
	// LeaderElectionNamespace and LeaderElectionID place the leader Lease; an
	// empty namespace means the controller's own (see LeaseNamespace).
	LeaderElectionNamespace string
	LeaderElectionID        string
	// LogLevel is debug, info or error (see NewLogger).
	LogLevel string
	// MemoryLimit is the container's memory limit in bytes (MEMORY_LIMIT, as
	// Karpenter's chart sets it); the Go runtime keeps its heap under 90% of it.
	// Zero or less means none.
	MemoryLimit int64
	// UnavailableOfferingsTTL is how long an offering that ran out of capacity is
	// avoided.
	UnavailableOfferingsTTL time.Duration
	// GCInterval is how often leaked instances and vanished ones are looked for.
	GCInterval time.Duration
	// Disruption tunes the disruption loop (consolidation, drift, emptiness).
	Disruption disruptionctl.Options
	// InterruptionInterval is how often the provider's interruption notices are read.
	InterruptionInterval time.Duration
	// KubeClientQPS and KubeClientBurst bound the controller's API requests per
	// second, per kind (client-go's token bucket).
	KubeClientQPS   float32
	KubeClientBurst int
	// Scheduling are the engine's preference and minValues policies, for
	// provisioning and disruption alike (--preference-policy, --min-values-policy).
	Scheduling scheduling.Options
	// FeatureGates turn on Karpenter's optional features (--feature-gates).
	FeatureGates FeatureGates
	// AWS configures the aws cloud provider.
	AWS AWSOptions
	// NoReleaseHold registers every node as soon as it is up, without holding a
	// batch's larger nodes back for its smaller ones or a tier's nodes for each
	// other (the pods are still told their planned node); NoReleaseOrder does
	// neither (see nodeclaim.ReleaseOrder). For measuring what each gains
	// (test/fidelity); no flag sets them.
	NoReleaseHold, NoReleaseOrder bool

	// skipNameValidation lets a test Run the controller a second time in one
	// process (controller-runtime wants each controller name once per process).
	skipNameValidation bool
}

// DefaultOptions are the flags' defaults.
func DefaultOptions() Options {
	return Options{CloudProvider: "sim", BatchIdle: time.Second, BatchMax: 10 * time.Second,
		MetricsAddr: ":8080", HealthAddr: ":8081", LeaderElection: true, LeaderElectionID: DefaultLeaderElectionID,
		LogLevel: "info", MemoryLimit: -1, FeatureGates: DefaultFeatureGates(),
		UnavailableOfferingsTTL: 3 * time.Minute, GCInterval: 30 * time.Second,
		Disruption: disruptionctl.DefaultOptions(), InterruptionInterval: 2 * time.Second,
		KubeClientQPS: 200, KubeClientBurst: 400,
		AWS: AWSOptions{VMMemoryOverheadPercent: allocatable.DefaultVMMemoryOverheadPercent,
			OnDemandPriceRefresh: 12 * time.Hour, SpotPriceRefresh: 5 * time.Minute}}
}

// Scheme knows the kinds Tailor reads and writes.
func Scheme() (*runtime.Scheme, error) { return kubescheme.New() }

// controller is what each controller in pkg/controllers offers the operator.
// Register adds it to mgr: a reconciler as a controller-runtime controller, a loop
// as a runnable (mgr.Add), which then runs on the leader only.
type controller interface {
	Name() string
	Register(ctx context.Context, mgr manager.Manager) error
}

// controllerFunc puts what is not a controller of pkg/controllers (the paced pod
// events, the cloud provider's own controllers) in the same list.
type controllerFunc struct {
	name     string
	register func(context.Context, manager.Manager) error
}

func (c controllerFunc) Name() string { return c.name }

func (c controllerFunc) Register(ctx context.Context, mgr manager.Manager) error {
	return c.register(ctx, mgr)
}

// PodEventsPerSecond paces the provisioner's pod events and the lifecycle's claim
// events: half the event client's request budget, so other components' events
// still get through.
const PodEventsPerSecond = 100

// Run starts the controller and blocks until ctx ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	if opts.CloudProvider != "sim" && opts.CloudProvider != "aws" {
		return fmt.Errorf("cloud provider %q: want sim or aws", opts.CloudProvider)
	}
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	// A node's life takes several writes; the client's default 20 QPS would make
	// registration, not planning, the bottleneck at a few hundred nodes.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.KubeClientQPS, opts.KubeClientBurst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOptions(),
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress:  opts.HealthAddr,
		PprofBindAddress:        opts.PprofAddr,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        cmp.Or(opts.LeaderElectionID, DefaultLeaderElectionID),
		LeaderElectionNamespace: cmp.Or(opts.LeaderElectionNamespace, LeaseNamespace(os.LookupEnv, os.ReadFile)),
		Controller:              ctrlconfig.Controller{MaxConcurrentReconciles: 10, SkipNameValidation: &opts.skipNameValidation},

		// Step down when stopped, so a rollout's new leader takes over at once
		// rather than after the old lease expires (LeaseDuration, 15s).
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	clk := clock.RealClock{}
	kube := mgr.GetClient()
	recorder := mgr.GetEventRecorderFor("tailor")

	cpm, err := cpmetrics.NewMetrics(metrics.Registry)
	if err != nil {
		return err
	}
	unavailable := cloudprovider.NewUnavailableOfferings(clk, opts.UnavailableOfferingsTTL)
	prov, err := newProvider(ctx, mgr, clk, opts, unavailable)
	if err != nil {
		return err
	}
	cloud := cpmetrics.Decorate(cptimeout.Decorate(prov.cloud, cptimeout.Defaults()), cpm)
	if err := registerMetrics(metrics.Registry); err != nil {
		return err
	}
	instanceTypes := func(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
		types, err := cloud.InstanceTypes(ctx, np)
		if err != nil {
			return nil, err
		}
		return unavailable.Apply(types), nil
	}
	// One read-only view for the provisioner and disruption, its informers started
	// with the cache, its pods read from the pod informer's store.
	cluster := state.New(kube).WithNodeCosts(cloudprovider.NodeCosts(prov.cloud))
	for _, kind := range append(state.Kinds(), provisioning.OwnerKinds()...) {
		informer, err := mgr.GetCache().GetInformer(ctx, kind)
		if err != nil {
			return fmt.Errorf("watching %T: %w", kind, err)
		}
		cluster.WithSyncers(informer)
	}
	podInformer, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return err
	}
	if store, ok := podInformer.(interface{ GetStore() toolscache.Store }); ok {
		cluster.WithPodStore(store.GetStore())
	}
	collector, err := newClusterCollector(mgr.GetCache(), podInformer, instanceTypes, cluster.Synced)
	if err != nil {
		return err
	}
	collector.CostNodesWith(cloudprovider.NodeCosts(prov.cloud))
	_, onAWS := prov.nodeClass.(*awsv1.EC2NodeClass)
	if onAWS {
		collector.ReportEC2NodeClasses()
	}
	// CapacityBuffers' status conditions, as Karpenter reports them with its
	// CapacityBuffer gate: where the provisioner keeps buffers (the gate on and
	// the API server serving them).
	buffers := opts.FeatureGates.CapacityBuffer && provisioning.BuffersServed(mgr.GetRESTMapper())
	if buffers {
		collector.ReportCapacityBuffers()
	}
	podTimes := tailormetrics.NewPodTimes()
	collector.TimePods(podTimes)
	collector.leading = func() bool {
		select {
		case <-mgr.Elected():
			return true
		default:
			return false
		}
	}
	if err := metrics.Registry.Register(collector); err != nil {
		return err
	}
	// The leader counts status-condition transitions as the informers show them.
	type watch struct {
		kind client.Object
		to   *conditionTransitions
	}
	watched := []watch{{&v1.NodePool{}, nodePoolConditions}, {&v1.NodeClaim{}, nodeClaimConditions}, {&corev1.Node{}, nodeConditions}}
	if onAWS {
		watched = append(watched, watch{&awsv1.EC2NodeClass{}, ec2NodeClassConditions})
	}
	if buffers {
		watched = append(watched, watch{&cb.CapacityBuffer{}, bufferConditions})
	}
	for _, w := range watched {
		informer, err := mgr.GetCache().GetInformer(ctx, w.kind)
		if err != nil {
			return fmt.Errorf("watching %T: %w", w.kind, err)
		}
		w.to.leading = collector.leading
		if _, err := informer.AddEventHandler(w.to); err != nil {
			return fmt.Errorf("following %T for the status-condition metrics: %w", w.kind, err)
		}
	}
	// The provisioner records an event per pod it plans for, a thousand at once in a
	// large batch, and the lifecycle two per claim (Launched, Registered), hundreds
	// at once after one: they go out at a steady pace (see package events).
	pacedEvents := events.NewPaced(recorder, PodEventsPerSecond, 2*PodEventsPerSecond, 50_000)
	// A batch's nodes register smallest first (see nodeclaim.ReleaseOrder).
	release := nodeclaim.NewReleaseOrder(clk)
	switch {
	case opts.NoReleaseOrder:
		release = nil
	case opts.NoReleaseHold:
		release = release.WithoutHold()
	}
	provisioner := provisioning.NewProvisioner(kube, cluster, instanceTypes, pacedEvents, clk,
		provisioning.Options{BatchIdle: opts.BatchIdle, BatchMax: opts.BatchMax, Scheduling: opts.Scheduling,
			CapacityBuffers: opts.FeatureGates.CapacityBuffer}).OrderReleases(release).ReadEventsWith(mgr.GetAPIReader()).
		TimePodsWith(podTimes)

	opts.Disruption.SpotToSpotConsolidation = opts.FeatureGates.SpotToSpotConsolidation
	opts.Disruption.Scheduling = opts.Scheduling

	// Every controller, in one explicit list, registered in this order: lifecycle
	// registers the provider ID indexes that the later ones list by.
	controllers := []controller{
		controllerFunc{"events.pods", func(_ context.Context, mgr manager.Manager) error {
			return mgr.Add(manager.RunnableFunc(pacedEvents.Run))
		}},
		provisioner,
		provisioning.NewPodTrigger(kube, provisioner),
		lifecycle.NewController(kube, cloud, unavailable, pacedEvents, clk).OrderReleases(release).WithBootLog(cloudprovider.BootLogs(prov.cloud)),
		termination.NewController(kube, mgr.GetAPIReader(), cloud, recorder, clk),
		garbagecollection.NewController(kube, cloud, recorder, clk, opts.GCInterval),
		nodepool.NewController(kube, opts.FeatureGates.StaticCapacity, prov.nodeClass),
		registrationhealth.NewController(kube, cloud, clk),
	}
	if opts.FeatureGates.StaticCapacity {
		controllers = append(controllers, static.NewController(kube, cloud, recorder))
	}
	controllers = append(controllers,
		controllerFunc{"cloudprovider." + opts.CloudProvider, func(_ context.Context, mgr manager.Manager) error { return prov.register(mgr) }},
		disruptionctl.NewController(kube, mgr.GetAPIReader(), cluster, cloud, instanceTypes, recorder, clk, opts.Disruption, provisioner.Trigger))
	if opts.FeatureGates.NodeRepair {
		policies := prov.repairPolicies
		if len(policies) == 0 {
			policies = disruption.KubeletRepairPolicies
		}
		repair := health.NewController(kube, cloud, recorder, clk, policies, provisioner.Trigger)
		if prov.nodeHealth != nil {
			repair = repair.WithNodeHealth(prov.nodeHealth)
		}
		controllers = append(controllers, repair)
	}
	controllers = append(controllers,
		expiration.NewController(kube, cloud, recorder, clk, provisioner.Trigger),
		podevents.NewController(kube, clk))
	if prov.interruptions != nil {
		controllers = append(controllers,
			interruption.NewController(kube, prov.interruptions, unavailable, recorder, clk, opts.InterruptionInterval, provisioner.Trigger))
	}
	for _, c := range controllers {
		if err := c.Register(ctx, mgr); err != nil {
			return fmt.Errorf("registering controller %s: %w", c.Name(), err)
		}
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("cache", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("cache not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}
