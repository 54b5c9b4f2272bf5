package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	awscloud "github.com/nodetailor/tailor/pkg/cloudprovider/aws"
	"github.com/nodetailor/tailor/pkg/cloudprovider/sim"
	"github.com/nodetailor/tailor/pkg/operator"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// cloud is what the scenarios need of the cloud the suite runs against, beyond
// the API server: TAILOR_E2E_CLOUD=sim (the default) or aws (internal/fakeaws,
// whose kubelets' Nodes kwok plays).
type cloud interface {
	// nodeClass is a NodeClass of the cloud's kind that launches anything.
	nodeClass(name string) client.Object
	kind() string
	// instanceTypes are the NodePool's instance types as the controller sees them.
	instanceTypes(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error)
	// withoutCapacity makes launches of an offering fail for lack of capacity.
	withoutCapacity(t *testing.T, class client.Object, o v1alpha1.Offering)
	// interrupt announces the reclaim of a spot claim's instance and says when.
	interrupt(t *testing.T, claim *v1.NodeClaim) (reclaim time.Time)
	// changeImage makes the NodeClass boot another image, and tells that image.
	changeImage(t *testing.T, class client.Object) (isNew func(imageID string) bool)
	// hasInstance says whether the claim's instance still runs (or starts, or stops).
	hasInstance(ctx context.Context, claim *v1.NodeClaim) (bool, error)
}

// provider is the cloud of this run.
var provider cloud

// nodeClass is a NodeClass of the suite's cloud.
func nodeClass(name string) client.Object { return provider.nodeClass(name) }

func nodeClassRef(name string) *v1.NodeClassReference {
	group := v1alpha1.Group
	if provider.kind() == "EC2NodeClass" {
		group = awsv1.Group
	}
	return &v1.NodeClassReference{Group: group, Kind: provider.kind(), Name: name}
}

type simCloud struct{}

func (simCloud) nodeClass(name string) client.Object {
	return &v1alpha1.SimNodeClass{ObjectMeta: metaName(name)}
}

func (simCloud) kind() string { return "SimNodeClass" }

func (simCloud) instanceTypes(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	return sim.New(kube, clock.RealClock{}).InstanceTypes(ctx, np)
}

func (simCloud) withoutCapacity(t *testing.T, class client.Object, o v1alpha1.Offering) {
	t.Helper()
	nc := class.(*v1alpha1.SimNodeClass)
	if err := kube.Get(t.Context(), client.ObjectKeyFromObject(nc), nc); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(nc.DeepCopy())
	nc.Spec.UnavailableOfferings = append(nc.Spec.UnavailableOfferings, o)
	if err := kube.Patch(t.Context(), nc, patch); err != nil {
		t.Fatal(err)
	}
}

func (simCloud) interrupt(t *testing.T, claim *v1.NodeClaim) time.Time {
	t.Helper()
	reclaim := time.Now().Add(2 * time.Minute)
	if err := sim.New(kube, clock.RealClock{}).Interrupt(t.Context(), claim.Status.ProviderID, reclaim); err != nil {
		t.Fatal(err)
	}
	return reclaim
}

func (simCloud) changeImage(t *testing.T, class client.Object) func(string) bool {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"imageID":"image-2"}}`))
	if err := kube.Patch(t.Context(), class, patch); err != nil {
		t.Fatal(err)
	}
	return func(id string) bool { return id == "image-2" }
}

func (simCloud) hasInstance(ctx context.Context, claim *v1.NodeClaim) (bool, error) {
	instances := &v1alpha1.SimInstanceList{}
	if err := kube.List(ctx, instances); err != nil {
		return false, err
	}
	return slices.ContainsFunc(instances.Items, func(i v1alpha1.SimInstance) bool { return i.Spec.NodeClaim == claim.Name }), nil
}

// awsCloud is the fake AWS account, served in this process.
type awsCloud struct {
	fake *fakeaws.Server
	// view prices and lists instance types as the controller does, from the same
	// fake: the scenarios compare what was launched with a plan of their own.
	view *awscloud.CloudProvider
}

// awsCluster names the EKS cluster the subnets and security groups are tagged for.
const awsCluster = "tailor-e2e"

// startAWS starts the fake AWS and its kubelets, and points the controller at it.
func startAWS(ctx context.Context, cfg *rest.Config, opts *operator.Options) (*awsCloud, func(), error) {
	version := serverVersion(cfg)
	fakeOpts := fakeaws.LocalClusterOptions(awsCluster, version, cfg.Host, cfg.CAData)
	// EC2 takes about a minute to terminate; the scenarios remove dozens of nodes
	// one at a time and would wait for each.
	fakeOpts.TerminationDelay = 100 * time.Millisecond
	fake, err := fakeaws.New(fakeOpts)
	if err != nil {
		return nil, nil, err
	}
	if _, err := fake.Start(); err != nil {
		return nil, nil, err
	}
	awsCfg := fake.AWSConfig()
	opts.CloudProvider = "aws"
	opts.AWS.ClusterName, opts.AWS.Region, opts.AWS.Config = awsCluster, fake.Region(), &awsCfg
	opts.AWS.InterruptionQueue = fake.InterruptionQueue()

	clients := awscloud.NewClients(awsCfg)
	prices, err := awscloud.NewPriceBook(fake.Region(), clients.Pricing, clients.EC2, clock.RealClock{}, time.Hour, time.Hour)
	if err != nil {
		_ = fake.Close()
		return nil, nil, err
	}
	if err := prices.Refresh(ctx); err != nil {
		_ = fake.Close()
		return nil, nil, err
	}
	view := awscloud.New(kube, clients, awscloud.Options{ClusterName: awsCluster, Region: fake.Region(), KubernetesVersion: version,
		VMMemoryOverheadPercent: opts.AWS.VMMemoryOverheadPercent}, clock.RealClock{}, prices,
		cloudprovider.NewUnavailableOfferings(clock.RealClock{}, time.Minute))

	kubeletCtx, stopKubelets := context.WithCancel(ctx)
	kubelets := make(chan struct{})
	go func() {
		defer close(kubelets)
		_ = fakeaws.NewKubelet(fake, kube, fakeaws.KubeletOptions{}).Run(kubeletCtx, 250*time.Millisecond)
	}()
	stop := func() {
		stopKubelets()
		<-kubelets
		_ = fake.Close()
	}
	return &awsCloud{fake: fake, view: view}, stop, nil
}

// serverVersion is the API server's major.minor, as the controller reads it to
// pick the AMIs of an alias; the fake publishes its AMIs for that version.
func serverVersion(cfg *rest.Config) string {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return ""
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return ""
	}
	return v.Major + "." + strings.TrimRight(v.Minor, "+")
}

// nodeClass is shaped like Karpenter's examples/v1 default EC2NodeClass.
func (a *awsCloud) nodeClass(name string) client.Object {
	discovery := map[string]string{"karpenter.sh/discovery": awsCluster}
	return &awsv1.EC2NodeClass{ObjectMeta: metaName(name), Spec: awsv1.EC2NodeClassSpec{
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: discovery}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: discovery}},
		Role:                       "KarpenterNodeRole-" + awsCluster,
	}}
}

func (a *awsCloud) kind() string { return "EC2NodeClass" }

func (a *awsCloud) instanceTypes(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	return a.view.InstanceTypes(ctx, np)
}

// withoutCapacity takes the offering's capacity from the whole account (the
// class does not matter on EC2) until the test ends.
func (a *awsCloud) withoutCapacity(t *testing.T, _ client.Object, o v1alpha1.Offering) {
	off := fakeaws.Offering{InstanceType: o.InstanceType, Zone: o.Zone, CapacityType: o.CapacityType}
	a.fake.SetInsufficientCapacity(off, true)
	t.Cleanup(func() { a.fake.SetInsufficientCapacity(off, false) })
}

func (a *awsCloud) interrupt(t *testing.T, claim *v1.NodeClaim) time.Time {
	t.Helper()
	id, err := awscloud.ParseProviderID(claim.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	// EC2 reclaims two minutes after the warning (the fake's default).
	reclaim := time.Now().Add(2 * time.Minute)
	if err := a.fake.InterruptSpot(id); err != nil {
		t.Fatal(err)
	}
	return reclaim
}

// olderAL2023 is the fake's previous AL2023 release; pinning the alias to it is an
// AMI change as a user makes one.
const olderAL2023 = "v20250715"

func (a *awsCloud) changeImage(t *testing.T, class client.Object) func(string) bool {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"amiSelectorTerms":[{"alias":"al2023@%s"}]}}`, olderAL2023))
	if err := kube.Patch(t.Context(), class, patch); err != nil {
		t.Fatal(err)
	}
	var older []string
	for _, im := range a.fake.InventorySnapshot().Images {
		if strings.HasPrefix(im.Name, "amazon-eks-node-al2023-") && strings.HasSuffix(im.Name, "-"+olderAL2023) {
			older = append(older, im.ID)
		}
	}
	if len(older) == 0 {
		t.Fatalf("the fake has no AL2023 image of release %s", olderAL2023)
	}
	return func(id string) bool { return slices.Contains(older, id) }
}

func (a *awsCloud) hasInstance(_ context.Context, claim *v1.NodeClaim) (bool, error) {
	return slices.ContainsFunc(a.fake.Instances(), func(i fakeaws.Instance) bool {
		return i.Tags[awscloud.TagNodeClaim] == claim.Name && i.State != "terminated"
	}), nil
}
