package operator

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	awscloud "github.com/nodetailor/tailor/pkg/cloudprovider/aws"
	"github.com/nodetailor/tailor/pkg/cloudprovider/sim"
)

// AWSOptions configure the aws cloud provider.
type AWSOptions struct {
	ClusterName     string
	ClusterEndpoint string
	// ClusterCABundle is the cluster CA, base64-encoded PEM.
	ClusterCABundle string
	// Region defaults to the SDK's (AWS_REGION).
	Region                  string
	VMMemoryOverheadPercent float64
	// OnDemandPriceRefresh and SpotPriceRefresh are how often prices are read again.
	OnDemandPriceRefresh, SpotPriceRefresh time.Duration
	// InterruptionQueue is the SQS queue (name or URL) the EventBridge rules
	// deliver interruption events to; empty turns interruption handling off.
	InterruptionQueue string
	// Config, when set, replaces the SDK's default configuration (credentials,
	// endpoint): tests point it at internal/fakeaws.
	Config *aws.Config
}

// provider is a cloud provider with what the controller wires around it.
type provider struct {
	cloud cloudprovider.CloudProvider
	// nodeClass is the provider's NodeClass kind, for the NodePool status.
	nodeClass client.Object
	// interruptions, when the provider announces them.
	interruptions cloudprovider.InterruptionSource
	// register adds the provider's own controllers.
	register func(mgr ctrl.Manager) error
	// repairPolicies are the provider's node repair policies; none means the
	// kubelet's (disruption.KubeletRepairPolicies).
	repairPolicies []cloudprovider.RepairPolicy
	// nodeHealth, when the provider has its own view of its instances' health.
	nodeHealth cloudprovider.NodeHealthSource
}

// newProvider builds the cloud provider the options name.
func newProvider(ctx context.Context, mgr ctrl.Manager, clk clock.Clock, opts Options, unavailable *cloudprovider.UnavailableOfferings) (provider, error) {
	kube := mgr.GetClient()
	switch opts.CloudProvider {
	case "sim":
		simCloud := sim.New(kube, clk).WithAPIReader(mgr.GetAPIReader())
		return provider{cloud: simCloud, nodeClass: &v1alpha1.SimNodeClass{}, interruptions: simCloud,
			register: func(mgr ctrl.Manager) error {
				if err := sim.NewRegistrar(kube, simCloud, clk).WithKubeletVersion(kubeletVersion(mgr.GetConfig())).Register(mgr); err != nil {
					return err
				}
				return sim.NewNodeClassController(kube, simCloud).Register(mgr)
			}}, nil
	case "aws":
		return newAWSProvider(ctx, mgr, clk, opts.AWS, opts.FeatureGates.ReservedCapacity, unavailable)
	}
	return provider{}, fmt.Errorf("cloud provider %q: want sim or aws", opts.CloudProvider)
}

func newAWSProvider(ctx context.Context, mgr ctrl.Manager, clk clock.Clock, opts AWSOptions, reservedCapacity bool, unavailable *cloudprovider.UnavailableOfferings) (provider, error) {
	if opts.ClusterName == "" {
		return provider{}, fmt.Errorf("the aws cloud provider needs --cluster-name")
	}
	if p := opts.VMMemoryOverheadPercent; p < 0 || p >= 1 {
		return provider{}, fmt.Errorf("--vm-memory-overhead-percent %v: want a share in [0, 1), such as 0.075", p)
	}
	cfg, err := awsConfig(ctx, opts)
	if err != nil {
		return provider{}, err
	}
	if cfg.Region == "" {
		return provider{}, fmt.Errorf("the aws cloud provider needs a region: --aws-region or AWS_REGION")
	}
	clients := awscloud.NewClients(cfg)
	prices, err := awscloud.NewPriceBook(cfg.Region, clients.Pricing, clients.EC2, clk,
		cmp.Or(opts.OnDemandPriceRefresh, 12*time.Hour), cmp.Or(opts.SpotPriceRefresh, 5*time.Minute))
	if err != nil {
		return provider{}, err
	}
	kube := mgr.GetClient()
	cloud := awscloud.New(kube, clients, awscloud.Options{
		ClusterName: opts.ClusterName, ClusterEndpoint: opts.ClusterEndpoint, ClusterCABundle: opts.ClusterCABundle,
		KubernetesVersion: kubernetesVersion(mgr), Region: cfg.Region, VMMemoryOverheadPercent: opts.VMMemoryOverheadPercent,
		ReservedCapacity: reservedCapacity,
	}, clk, prices, unavailable)
	// Capacity blocks end on a schedule the provider knows: their nodes are
	// drained ahead of it with or without an interruption queue.
	interruptions := awscloud.Interruptions{awscloud.NewCapacityBlocks(kube, clk)}
	if opts.InterruptionQueue != "" {
		interruptions = append(interruptions, awscloud.NewInterruptionQueue(clients.SQS, opts.InterruptionQueue, kube, clk).
			OnReservationReclaimed(cloud.ReservationReclaimed))
	}
	return provider{cloud: cloud, nodeClass: &awsv1.EC2NodeClass{}, interruptions: interruptions, register: func(mgr ctrl.Manager) error {
		if err := mgr.Add(manager.RunnableFunc(prices.Start)); err != nil {
			return err
		}
		if err := awscloud.NewTaggingController(kube, clients.EC2, opts.ClusterName).Register(mgr); err != nil {
			return err
		}
		return awscloud.NewNodeClassController(kube, cloud).Register(mgr)
	}, repairPolicies: awscloud.RepairPolicies, nodeHealth: awscloud.NewInstanceHealth(clients.EC2, clk)}, nil
}

// awsConfig is opts.Config, or the SDK's default configuration, in opts.Region
// when that is set.
func awsConfig(ctx context.Context, opts AWSOptions) (aws.Config, error) {
	if opts.Config != nil {
		cfg := opts.Config.Copy()
		if opts.Region != "" {
			cfg.Region = opts.Region
		}
		return cfg, nil
	}
	var loadOpts []func(*config.LoadOptions) error
	if opts.Region != "" {
		loadOpts = append(loadOpts, config.WithRegion(opts.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loadOpts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	return cfg, nil
}

// kubeletVersion is what the sim cloud's nodes report as their kubelet's version:
// the API server's (v1.34.4), as a cluster's nodes usually run the control
// plane's. A control plane built from source without a version stamp (the local
// one: v0.0.0-master) is taken for the Kubernetes release of Tailor's own client
// libraries, which the local control plane is pinned to.
func kubeletVersion(cfg *rest.Config) string {
	server := ""
	if dc, err := discovery.NewDiscoveryClientForConfig(cfg); err == nil {
		if v, err := dc.ServerVersion(); err == nil {
			server = v.GitVersion
		}
	}
	var deps []*debug.Module
	if info, ok := debug.ReadBuildInfo(); ok {
		deps = info.Deps
	}
	return chooseKubeletVersion(server, deps)
}

// releaseVersion is a Kubernetes release's version, v1.34.4 (perhaps with a
// suffix, v1.34.4-eks-3025e55).
var releaseVersion = regexp.MustCompile(`^v1\.\d+\.\d+`)

// chooseKubeletVersion is the server's version when it is a release's, else the
// release of the client-go among deps (v0.34.4 is Kubernetes v1.34.4), else "".
func chooseKubeletVersion(server string, deps []*debug.Module) string {
	if releaseVersion.MatchString(server) {
		return server
	}
	for _, m := range deps {
		if m.Path != "k8s.io/client-go" {
			continue
		}
		if rest, ok := strings.CutPrefix(m.Version, "v0."); ok && releaseVersion.MatchString("v1."+rest) {
			return "v1." + rest
		}
	}
	return ""
}

// kubernetesVersion is the API server's minor version (1.34), which picks the AMIs
// of an alias, as Karpenter does; "" when it cannot be read, and EKS is asked.
func kubernetesVersion(mgr ctrl.Manager) string {
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return ""
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return ""
	}
	return v.Major + "." + strings.TrimRight(v.Minor, "+")
}
