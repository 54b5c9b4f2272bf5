package aws

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/cloudprovider/timeout"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Options configure the provider.
type Options struct {
	ClusterName string
	// ClusterEndpoint and ClusterCABundle (base64 PEM) are what nodes join; when
	// either is empty both come from EKS DescribeCluster.
	ClusterEndpoint string
	ClusterCABundle string
	// ClusterDNS overrides the DNS address derived from the service range.
	ClusterDNS []string
	// KubernetesVersion (1.34) picks the AMIs of an alias; empty asks EKS.
	KubernetesVersion string
	Region            string
	// VMMemoryOverheadPercent is the share of memory the hypervisor keeps (0.075).
	VMMemoryOverheadPercent float64
	// CatalogTTL is how long instance types and their offerings are kept (5m).
	CatalogTTL time.Duration
	// LaunchVisibility is how long a launched instance that EC2 does not show yet
	// (eventual consistency) is taken to exist (5m).
	LaunchVisibility time.Duration
	// ReservedCapacity is Karpenter's feature gate of that name: the NodeClass's
	// capacity reservations are offered as capacity type "reserved", and spot and
	// on-demand launches stay out of open reservations.
	ReservedCapacity bool
	// CallTimeout bounds the AWS reads the provider makes outside the
	// CloudProvider interface (whose calls pkg/cloudprovider/timeout bounds): each
	// part of a NodeClass's resolution, and the instance listing that relabels
	// claims whose reservation lapsed. Defaults to timeout.CallTimeout (30s).
	CallTimeout time.Duration
}

// Clients are the AWS API clients the provider calls.
type Clients struct {
	EC2     *ec2.Client
	SSM     *ssm.Client
	IAM     *iam.Client
	EKS     *eks.Client
	Pricing *pricing.Client
	// SQS reads the interruption queue.
	SQS *sqs.Client
}

// HTTPAttemptTimeout bounds each HTTP request (one attempt of an operation) of
// the clients NewClients builds, unless the configuration's client has a timeout
// of its own.
//
// Deadlines are set per operation, in the context, where the provider calls AWS:
// there each can fit its call (a launch 3 minutes, a read 30 s, a long poll its
// wait and some) and covers its retries and pages. This timeout is only the
// backstop under them: a request made without a deadline still ends, and a hung
// attempt of a long operation (a launch, the catalog read) is retried within the
// operation's deadline rather than spending all of it. It must stay above the
// longest healthy request: an SQS long poll holds its answer for up to 20 s, and
// a page of the Price List API is large.
const HTTPAttemptTimeout = time.Minute

// NewClients builds every client from one configuration (its retryer retries
// throttling with backoff), their requests bounded by HTTPAttemptTimeout.
func NewClients(cfg aws.Config) Clients {
	return newClients(cfg, HTTPAttemptTimeout)
}

func newClients(cfg aws.Config, attempt time.Duration) Clients {
	cfg = withHTTPTimeout(cfg, attempt)
	// The Price List API is served from a few regions only; us-east-1's lists
	// every region's prices.
	pricingCfg := cfg.Copy()
	if pricingCfg.BaseEndpoint == nil && !slices.Contains([]string{"us-east-1", "eu-central-1", "ap-south-1"}, cfg.Region) {
		pricingCfg.Region = "us-east-1"
	}
	return Clients{EC2: ec2.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg), IAM: iam.NewFromConfig(cfg),
		EKS: eks.NewFromConfig(cfg), Pricing: pricing.NewFromConfig(pricingCfg), SQS: sqs.NewFromConfig(cfg)}
}

// withHTTPTimeout returns cfg with its HTTP client's requests bounded by d: the
// SDK's default client (nil, or a BuildableClient) and a plain http.Client get
// it, unless they have a timeout already; a client of another kind is the
// caller's and keeps its own.
func withHTTPTimeout(cfg aws.Config, d time.Duration) aws.Config {
	cfg = cfg.Copy()
	switch hc := cfg.HTTPClient.(type) {
	case nil:
		cfg.HTTPClient = awshttp.NewBuildableClient().WithTimeout(d)
	case *awshttp.BuildableClient:
		if hc.GetTimeout() == 0 {
			cfg.HTTPClient = hc.WithTimeout(d)
		}
	case *http.Client:
		if hc.Timeout == 0 {
			bounded := *hc
			bounded.Timeout = d
			cfg.HTTPClient = &bounded
		}
	}
	return cfg
}

// CloudProvider launches EC2 instances for claims of EC2NodeClasses.
type CloudProvider struct {
	kube        client.Client
	aws         Clients
	opts        Options
	clock       clock.Clock
	prices      *PriceBook
	unavailable *cloudprovider.UnavailableOfferings

	mu      sync.Mutex
	catalog *ec2Catalog
	// catalogRead is the catalog read in progress, which every caller waits for.
	catalogRead *catalogRead
	built       map[string][]*scheduling.InstanceType
	templates   map[string]string // launch template IDs by name
	cluster     *Cluster
	version     string
	// recent are instances launched by this process that EC2 may not show yet.
	recent map[string]recentLaunch
	// byClaim answers a retried Create for the same claim without a request, whose
	// overrides may differ and so clash with the first under its client token.
	byClaim map[types.UID]recentLaunch
	// reservationRoom is how many instances each capacity reservation has left, by
	// ID: read with the NodeClasses' reservations, less what was launched since.
	reservationRoom map[string]int
	// placementGroups are the NodeClasses' resolved placement groups, by NodeClass.
	placementGroups map[string]placementGroupEntry
	// publicSubnets: whether nodes get a public address (see NodeCost).
	publicSubnets publicSubnets
}

type ec2Catalog struct {
	types     []ec2types.InstanceTypeInfo
	zones     map[string][]string // by instance type, every zone of the region
	fetchedAt time.Time
}

type recentLaunch struct {
	claim *v1.NodeClaim
	at    time.Time
}

var _ cloudprovider.CloudProvider = (*CloudProvider)(nil)

// New returns the provider. prices keeps the region's prices (see NewPriceBook);
// unavailable remembers offerings that ran out of capacity.
func New(kube client.Client, clients Clients, opts Options, clk clock.Clock, prices *PriceBook, unavailable *cloudprovider.UnavailableOfferings) *CloudProvider {
	if opts.CatalogTTL == 0 {
		opts.CatalogTTL = 5 * time.Minute
	}
	if opts.LaunchVisibility == 0 {
		opts.LaunchVisibility = 5 * time.Minute
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = timeout.CallTimeout
	}
	return &CloudProvider{kube: kube, aws: clients, opts: opts, clock: clk, prices: prices, unavailable: unavailable,
		built: map[string][]*scheduling.InstanceType{}, templates: map[string]string{},
		recent: map[string]recentLaunch{}, byClaim: map[types.UID]recentLaunch{}, reservationRoom: map[string]int{},
		placementGroups: map[string]placementGroupEntry{}}
}

// Name is "aws".
func (c *CloudProvider) Name() string { return "aws" }

// ProviderIDScheme is "aws", as in aws:///<zone>/<instance-id> (see ProviderID).
func (c *CloudProvider) ProviderIDScheme() string { return "aws" }

// NodeClassKinds is karpenter.k8s.aws/EC2NodeClass.
func (c *CloudProvider) NodeClassKinds() []schema.GroupKind {
	return []schema.GroupKind{{Group: awsv1.Group, Kind: "EC2NodeClass"}}
}

// nodeClass returns the claim's or pool's NodeClass once it is Ready.
func (c *CloudProvider) nodeClass(ctx context.Context, ref *v1.NodeClassReference) (*awsv1.EC2NodeClass, error) {
	if ref == nil || ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" {
		kind, name := "NodeClass", "(none)"
		if ref != nil {
			kind, name = ref.Group+"/"+ref.Kind, ref.Name
		}
		return nil, &cloudprovider.NodeClassNotReadyError{Kind: kind, Name: name, Reason: "the aws provider serves only karpenter.k8s.aws EC2NodeClasses"}
	}
	nc := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &cloudprovider.NodeClassNotReadyError{Kind: "EC2NodeClass", Name: ref.Name, Reason: "not found"}
		}
		return nil, err
	}
	if !nc.IsReady() {
		reason := "not resolved yet"
		if cond := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady); cond != nil && cond.Message != "" {
			reason = cond.Message
		}
		return nil, &cloudprovider.NodeClassNotReadyError{Kind: "EC2NodeClass", Name: nc.Name, Reason: reason}
	}
	return nc, nil
}

// InstanceTypes lists what the pool's NodeClass can launch in the zones of its
// subnets, with offerings that just ran out of capacity switched off.
func (c *CloudProvider) InstanceTypes(ctx context.Context, pool *v1.NodePool) ([]*scheduling.InstanceType, error) {
	nc, err := c.nodeClass(ctx, pool.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	types, err := c.instanceTypes(ctx, nc, TenancyFor(pool.Spec.Template.Spec.Requirements))
	if err != nil {
		return nil, err
	}
	return c.unavailable.Apply(types), nil
}

// instanceTypes builds the NodeClass's instance types, with a reserved offering
// where its capacity reservations are, kept while the catalog, the prices, the
// NodeClass's settings and its reservations' room stay the same.
func (c *CloudProvider) instanceTypes(ctx context.Context, nc *awsv1.EC2NodeClass, tenancy string) ([]*scheduling.InstanceType, error) {
	key, types, err := c.baseInstanceTypes(ctx, nc, tenancy)
	if err != nil {
		return nil, err
	}
	rs := c.reservations(nc)
	if len(rs) == 0 || tenancy == TenancyDedicated {
		return types, nil
	}
	key += "|" + reservationKey(rs)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cached, ok := c.built[key]; ok {
		return cached, nil
	}
	c.built[key] = WithReservations(types, rs)
	return c.built[key], nil
}

// reservations are the NodeClass's reservations with room known; none while the
// ReservedCapacity gate is off.
func (c *CloudProvider) reservations(nc *awsv1.EC2NodeClass) []Reservation {
	if !c.opts.ReservedCapacity {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return Reservations(nc, c.reservationRoom, c.clock.Now())
}

// baseInstanceTypes builds the NodeClass's instance types without reservations,
// and the key they are cached under.
func (c *CloudProvider) baseInstanceTypes(ctx context.Context, nc *awsv1.EC2NodeClass, tenancy string) (string, []*scheduling.InstanceType, error) {
	cat, err := c.ec2Catalog(ctx)
	if err != nil {
		return "", nil, err
	}
	zoneSet := map[string]bool{}
	zoneIDs := map[string]string{}
	for _, s := range nc.Status.Subnets {
		zoneSet[s.Zone] = true
		if s.ZoneID != "" {
			zoneIDs[s.Zone] = s.ZoneID
		}
	}
	root := RootVolumeSize(nc)
	model := allocatable.EKS{VMMemoryOverheadPercent: c.opts.VMMemoryOverheadPercent, Kubelet: kubeletOf(nc.Spec.Kubelet)}
	osLabels := OSLabels(nc.AMIFamily())
	prices := c.prices.PricesFor(osLabels[v1.LabelOS])
	fields := FieldsOf(nc, tenancy)
	keyJSON, _ := json.Marshal(struct {
		Model   allocatable.EKS
		Zones   map[string]bool
		ZoneIDs map[string]string
		Root    string
		Fetched time.Time
		Prices  int64
		OS      map[string]string
		Fields  NodeClassFields
	}{model, zoneSet, zoneIDs, root.String(), cat.fetchedAt, c.prices.Generation(), osLabels, fields})
	key := string(keyJSON)
	c.mu.Lock()
	if types, ok := c.built[key]; ok {
		c.mu.Unlock()
		return key, types, nil
	}
	c.mu.Unlock()
	zones := map[string][]string{}
	for name, zs := range cat.zones {
		for _, z := range zs {
			if zoneSet[z] {
				zones[name] = append(zones[name], z)
			}
		}
	}
	types, err := BuildInstanceTypes(Catalog{Region: c.opts.Region, Types: cat.types, Zones: zones, ZoneIDs: zoneIDs, Prices: prices, OSLabels: osLabels, Fields: fields}, model, root)
	if err != nil {
		return "", nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	if err := dedicatedPriced(tenancy, prices, types); err != nil {
		return "", nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Only the latest settings of each NodeClass matter; a small cache suffices.
	if len(c.built) > 32 {
		clear(c.built)
	}
	c.built[key] = types
	return key, types, nil
}

func kubeletOf(k *awsv1.KubeletConfiguration) allocatable.Kubelet {
	if k == nil {
		return allocatable.Kubelet{}
	}
	return allocatable.Kubelet{MaxPods: k.MaxPods, PodsPerCore: k.PodsPerCore, SystemReserved: toStrings(k.SystemReserved),
		KubeReserved: toStrings(k.KubeReserved), EvictionHard: toStrings(k.EvictionHard), EvictionSoft: toStrings(k.EvictionSoft)}
}

// ec2Catalog reads the region's instance types and where they are offered, once
// per CatalogTTL.
// catalogRead is one read of EC2's catalog; done closes when it ends.
type catalogRead struct {
	done chan struct{}
	cat  *ec2Catalog
	err  error
}

// catalogReadTimeout bounds one read of the catalog, whoever waits for it.
const catalogReadTimeout = 5 * time.Minute

// ec2Catalog returns the cached catalog, or reads it once for every caller. The
// read runs under its own deadline, not the caller's: twenty-odd pages of
// instance types take a while on a loaded node, and callers each starting their
// own read, each given up at their own deadline, would never finish one.
func (c *CloudProvider) ec2Catalog(ctx context.Context) (*ec2Catalog, error) {
	c.mu.Lock()
	if cat := c.catalog; cat != nil && c.clock.Since(cat.fetchedAt) < c.opts.CatalogTTL {
		c.mu.Unlock()
		return cat, nil
	}
	read := c.catalogRead
	if read == nil {
		read = &catalogRead{done: make(chan struct{})}
		c.catalogRead = read
		go func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), catalogReadTimeout)
			defer cancel()
			read.cat, read.err = c.readCatalog(rctx)
			c.mu.Lock()
			if read.err == nil {
				c.catalog = read.cat
			}
			c.catalogRead = nil
			c.mu.Unlock()
			close(read.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-read.done:
		return read.cat, read.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for EC2's instance types: %w", ctx.Err())
	}
}

// readCatalog reads every instance type and where each is offered.
func (c *CloudProvider) readCatalog(ctx context.Context) (*ec2Catalog, error) {
	fresh := &ec2Catalog{zones: map[string][]string{}, fetchedAt: c.clock.Now()}
	for p := ec2.NewDescribeInstanceTypesPaginator(c.aws.EC2, &ec2.DescribeInstanceTypesInput{}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instance types: %w", err)
		}
		fresh.types = append(fresh.types, page.InstanceTypes...)
	}
	in := &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone}
	for p := ec2.NewDescribeInstanceTypeOfferingsPaginator(c.aws.EC2, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instance type offerings: %w", err)
		}
		for _, o := range page.InstanceTypeOfferings {
			name := string(o.InstanceType)
			fresh.zones[name] = append(fresh.zones[name], deref(o.Location))
		}
	}
	return fresh, nil
}

// clusterInfo is what nodes need to join: from the options, or from EKS.
func (c *CloudProvider) clusterInfo(ctx context.Context) (Cluster, error) {
	c.mu.Lock()
	if c.cluster != nil {
		defer c.mu.Unlock()
		return *c.cluster, nil
	}
	c.mu.Unlock()
	info := Cluster{Name: c.opts.ClusterName, Endpoint: c.opts.ClusterEndpoint, CABundle: c.opts.ClusterCABundle, DNS: c.opts.ClusterDNS}
	version := c.opts.KubernetesVersion
	// The service CIDR is looked up even when the endpoint and CA are given:
	// nodeadm needs it in every AL2023 NodeConfig, as Karpenter's does.
	out, err := c.aws.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(c.opts.ClusterName)})
	switch {
	case err != nil && (info.Endpoint == "" || info.CABundle == ""):
		return Cluster{}, fmt.Errorf("describing EKS cluster %s for its endpoint and CA (or set --cluster-endpoint and --cluster-ca-bundle): %w", c.opts.ClusterName, err)
	case err != nil:
		// Not kept: the next launch asks again, and AL2023 user data refuses to
		// render without the service CIDR meanwhile (UserData says why).
		info.ServiceCIDRError = fmt.Errorf("describing EKS cluster %s for its service CIDR: %w", c.opts.ClusterName, err)
		return info, nil
	}
	cl := out.Cluster
	if info.Endpoint == "" || info.CABundle == "" {
		info.Endpoint = deref(cl.Endpoint)
		if cl.CertificateAuthority != nil {
			info.CABundle = deref(cl.CertificateAuthority.Data)
		}
	}
	if n := cl.KubernetesNetworkConfig; n != nil {
		// The cluster's IP family decides: an IPv6 cluster's services have IPv6
		// addresses, whatever IPv4 range is also listed.
		info.ServiceCIDR = deref(n.ServiceIpv4Cidr)
		if n.IpFamily == ekstypes.IpFamilyIpv6 || info.ServiceCIDR == "" {
			info.ServiceCIDR = cmp.Or(deref(n.ServiceIpv6Cidr), info.ServiceCIDR)
		}
	}
	if version == "" {
		version = deref(cl.Version)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cluster = &info
	if c.version == "" {
		c.version = version
	}
	return info, nil
}

// Create launches the claim's instance with one instant fleet request over all its
// instance types and zones. The claim's UID is the request's client token, so a
// retry after a lost answer gets the first instance back instead of a second.
func (c *CloudProvider) Create(ctx context.Context, claim *v1.NodeClaim) (*v1.NodeClaim, error) {
	if claim.UID == "" {
		return nil, fmt.Errorf("nodeclaim %s has no metadata.uid, the client token of its launch: create the NodeClaim before launching it", claim.Name)
	}
	c.mu.Lock()
	c.pruneLocked()
	done, ok := c.byClaim[claim.UID]
	c.mu.Unlock()
	if ok {
		return withClaim(done.claim, claim), nil
	}
	nc, err := c.nodeClass(ctx, claim.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	tenancy := TenancyFor(claim.Spec.Requirements)
	types, err := c.instanceTypes(ctx, nc, tenancy)
	if err != nil {
		return nil, err
	}
	reservations := c.reservations(nc)
	if tenancy == TenancyDedicated {
		reservations = nil // the reservations Tailor reads are of shared tenancy
	}
	plan, err := PlanFleet(claim, c.unavailable.Apply(types), nc.Status.Subnets, nc.Status.AMIs, reservations)
	if err != nil {
		return nil, err
	}
	splitByEFA(&plan, func(typ string) int { return EFAInterfaces(claim, nc, plan.Types[typ]) })
	cluster, err := c.clusterInfo(ctx)
	if err != nil {
		return nil, err
	}
	tags := InstanceTags(claim, nc, c.opts.ClusterName)
	group, err := c.placementGroupFor(ctx, nc)
	if err != nil {
		return nil, err
	}
	var groups []string
	for _, g := range nc.Status.SecurityGroups {
		groups = append(groups, g.ID)
	}
	var templateIDs []string
	for i, g := range plan.Groups {
		userData, err := UserData(BootstrapFor(claim, nc, cluster, g.MaxPods))
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
		}
		name, data := LaunchTemplate(LaunchTemplateInput{Cluster: c.opts.ClusterName, NodeClass: nc, ImageID: g.AMI.ID,
			UserData: userData, SecurityGroups: groups, InstanceProfile: nc.Status.InstanceProfile,
			CapacityReservationID: g.ReservationID, CapacityBlock: plan.ReservationType == awsv1.CapacityReservationTypeCapacityBlock,
			AvoidOpenReservations:    c.opts.ReservedCapacity && plan.CapacityType != CapacityTypeReserved,
			InterruptibleReservation: plan.ReservationInterruptible, InterfaceTags: TemplateTags(tags),
			IPv6: strings.Contains(cluster.ServiceCIDR, ":"), PlacementGroupID: group.ID, EFA: g.EFA, Tenancy: tenancy})
		id, err := c.ensureTemplate(ctx, name, data, nc)
		if err != nil {
			return nil, err
		}
		templateIDs = append(templateIDs, id)
		plan.Groups[i].TemplateID = id
	}
	fleet := FleetInput(plan, templateIDs, string(claim.UID), tags)
	fleet.Context = nc.Spec.Context
	out, err := c.aws.EC2.CreateFleet(ctx, fleet)
	if err != nil {
		code := errorCode(err)
		if code == "IdempotentParameterMismatch" {
			// The claim launched before, with other options (prices or capacity
			// moved since): that launch stands.
			return c.launchedBefore(ctx, claim, err)
		}
		if strings.HasPrefix(code, "InvalidLaunchTemplate") {
			// Someone deleted a template Tailor remembers: forget them all and retry.
			c.mu.Lock()
			clear(c.templates)
			c.mu.Unlock()
		}
		return nil, fmt.Errorf("launching nodeclaim %s: %w", claim.Name, err)
	}
	countLaunchFailures(out, plan, nc)
	launched, ice, err := ReadFleet(out, plan)
	c.unavailable.Mark(ice...)
	if SpotRoleMissing(out) {
		c.unavailable.MarkCapacityType(CapacityTypeSpot)
	}
	c.spendRoom(plan, launched, ice)
	if err != nil {
		return nil, fmt.Errorf("launching nodeclaim %s: %w", claim.Name, err)
	}
	inst := Instance{ID: launched.InstanceID, Type: launched.InstanceType, Zone: launched.Zone, CapacityType: launched.CapacityType,
		ImageID: launched.ImageID, Tags: tags, LaunchTime: c.clock.Now(), State: ec2types.InstanceStateNamePending,
		CapacityReservationID: launched.ReservationID, CapacityReservationType: launched.ReservationType,
		CapacityReservationInterruptible: launched.ReservationInterruptible, Tenancy: tenancy, ZoneID: zoneIDOf(nc, launched.Zone)}
	c.placeLaunched(ctx, &inst, group)
	result := withClaim(inst.NodeClaim(plan.Types[launched.InstanceType]), claim)
	c.mu.Lock()
	c.recent[launched.InstanceID] = recentLaunch{claim: result.DeepCopy(), at: c.clock.Now()}
	c.byClaim[claim.UID] = recentLaunch{claim: result.DeepCopy(), at: c.clock.Now()}
	c.mu.Unlock()
	return result, nil
}

// zoneIDOf is the ID of the zone of the NodeClass's subnets, or "".
func zoneIDOf(nc *awsv1.EC2NodeClass, zone string) string {
	for _, s := range nc.Status.Subnets {
		if s.Zone == zone && s.ZoneID != "" {
			return s.ZoneID
		}
	}
	return ""
}

// spendRoom counts a reserved launch against its reservation's room, and takes
// the room of the reservations EC2 found full, until they are read again.
func (c *CloudProvider) spendRoom(plan FleetPlan, launched Launched, ice []cloudprovider.UnavailableOffering) {
	if plan.CapacityType != CapacityTypeReserved {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n, ok := c.reservationRoom[launched.ReservationID]; ok && n > 0 {
		c.reservationRoom[launched.ReservationID] = n - 1
	}
	for _, o := range ice {
		for _, g := range plan.Groups {
			if g.ReservationID != "" && slices.ContainsFunc(g.Overrides, func(ov Override) bool {
				return ov.InstanceType == o.InstanceType && ov.Zone == o.Zone
			}) {
				c.reservationRoom[g.ReservationID] = 0
			}
		}
	}
}

// pruneLocked forgets launches older than LaunchVisibility: EC2 shows them by now.
func (c *CloudProvider) pruneLocked() {
	for id, r := range c.recent {
		if c.clock.Since(r.at) >= c.opts.LaunchVisibility {
			delete(c.recent, id)
		}
	}
	for uid, r := range c.byClaim {
		if c.clock.Since(r.at) >= c.opts.LaunchVisibility {
			delete(c.byClaim, uid)
		}
	}
}

// launchedBefore finds the instance an earlier launch of the claim made, by its
// nodeclaim tag; cause is returned, for a retry, while EC2 does not show it.
func (c *CloudProvider) launchedBefore(ctx context.Context, claim *v1.NodeClaim, cause error) (*v1.NodeClaim, error) {
	out, err := c.aws.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		filter("tag:"+TagNodeClaim, claim.Name),
		filter("tag-key", ClusterTag(c.opts.ClusterName)),
		filter("instance-state-name", "pending", "running"),
	}})
	if err != nil {
		return nil, fmt.Errorf("nodeclaim %s: finding the instance launched before: %w", claim.Name, err)
	}
	for _, r := range out.Reservations {
		for _, raw := range r.Instances {
			inst := c.instanceOf(raw)
			return withClaim(inst.NodeClaim(c.typeOf(ctx, inst)), claim), nil
		}
	}
	return nil, fmt.Errorf("nodeclaim %s launched before, and EC2 does not show its instance yet: %w", claim.Name, cause)
}

// withClaim returns the claim with what the launch decided: its labels, provider
// ID, image, capacity, allocatable and the NodeClass hash it launched with.
func withClaim(launched, claim *v1.NodeClaim) *v1.NodeClaim {
	out := claim.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for k, v := range launched.Labels {
		out.Labels[k] = v
	}
	if len(launched.Annotations) > 0 && out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	for k, v := range launched.Annotations {
		out.Annotations[k] = v
	}
	out.Status.ProviderID = launched.Status.ProviderID
	out.Status.ImageID = launched.Status.ImageID
	out.Status.Capacity = launched.Status.Capacity
	out.Status.Allocatable = launched.Status.Allocatable
	return out
}

// ensureTemplate returns the ID of the launch template named name, creating it.
func (c *CloudProvider) ensureTemplate(ctx context.Context, name string, data *ec2types.RequestLaunchTemplateData, nc *awsv1.EC2NodeClass) (string, error) {
	c.mu.Lock()
	id, ok := c.templates[name]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	found, err := c.aws.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
	switch {
	case err == nil && len(found.LaunchTemplates) > 0:
		id = deref(found.LaunchTemplates[0].LaunchTemplateId)
	case err == nil || errorCode(err) == "InvalidLaunchTemplateName.NotFoundException":
		created, err := c.aws.EC2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
			LaunchTemplateName: aws.String(name), LaunchTemplateData: data,
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: []ec2types.Tag{
				{Key: aws.String(ClusterTag(c.opts.ClusterName)), Value: aws.String("owned")},
				{Key: aws.String(TagNodeClass), Value: aws.String(nc.Name)},
			}}},
		})
		switch {
		case errorCode(err) == "InvalidLaunchTemplateName.AlreadyExistsException":
			// A launch running alongside (claims of one batch launch together)
			// made it first: use theirs.
			again, derr := c.aws.EC2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
			if derr != nil || len(again.LaunchTemplates) == 0 {
				return "", fmt.Errorf("creating launch template %s: %w", name, errors.Join(err, derr))
			}
			id = deref(again.LaunchTemplates[0].LaunchTemplateId)
		case err != nil:
			return "", fmt.Errorf("creating launch template %s: %w", name, err)
		default:
			id = deref(created.LaunchTemplate.LaunchTemplateId)
		}
	default:
		return "", fmt.Errorf("describing launch template %s: %w", name, err)
	}
	c.mu.Lock()
	c.templates[name] = id
	c.mu.Unlock()
	return id, nil
}

// describe reads one instance; found is false when EC2 does not know it.
func (c *CloudProvider) describe(ctx context.Context, id string) (Instance, bool, error) {
	out, err := c.aws.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		if errorCode(err) == "InvalidInstanceID.NotFound" {
			return Instance{}, false, nil
		}
		return Instance{}, false, fmt.Errorf("describing instance %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		for _, in := range r.Instances {
			if deref(in.InstanceId) == id {
				return c.instanceOf(in), true, nil
			}
		}
	}
	return Instance{}, false, nil
}

// recentClaim is the claim of an instance launched within LaunchVisibility, which
// EC2 may not show yet; an older one is forgotten.
func (c *CloudProvider) recentClaim(id string) (*v1.NodeClaim, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.recent[id]
	if !ok {
		return nil, false
	}
	if c.clock.Since(r.at) >= c.opts.LaunchVisibility {
		delete(c.recent, id)
		return nil, false
	}
	return r.claim.DeepCopy(), true
}

// seen forgets a recent launch once EC2 shows it.
func (c *CloudProvider) seen(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.recent, id)
}

// Get describes the instance with the provider ID. An instance this process just
// launched is taken to exist while EC2 does not show it yet, so that it is not
// collected as vanished.
func (c *CloudProvider) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	id, err := ParseProviderID(providerID)
	if err != nil {
		return nil, &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
	}
	inst, found, err := c.describe(ctx, id)
	if err != nil {
		return nil, err
	}
	if !found {
		if claim, ok := c.recentClaim(id); ok {
			return claim, nil
		}
		return nil, &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
	}
	c.seen(id)
	if inst.Gone() {
		return nil, &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
	}
	return inst.NodeClaim(c.typeOf(ctx, inst)), nil
}

// List describes the cluster's instances that Tailor (or Karpenter) launched and
// that are not terminated, and those just launched that EC2 does not show yet.
func (c *CloudProvider) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	in := &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		filter("tag-key", ClusterTag(c.opts.ClusterName)),
		filter("tag-key", TagNodePool),
		filter("instance-state-name", "pending", "running", "stopping", "stopped", "shutting-down"),
	}}
	var out []*v1.NodeClaim
	listed := map[string]bool{}
	for p := ec2.NewDescribeInstancesPaginator(c.aws.EC2, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing instances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, raw := range r.Instances {
				inst := c.instanceOf(raw)
				listed[inst.ID] = true
				c.seen(inst.ID)
				out = append(out, inst.NodeClaim(c.typeOf(ctx, inst)))
			}
		}
	}
	c.mu.Lock()
	var recent []string
	for id := range c.recent {
		if !listed[id] {
			recent = append(recent, id)
		}
	}
	c.mu.Unlock()
	for _, id := range recent {
		if claim, ok := c.recentClaim(id); ok {
			out = append(out, claim)
		}
	}
	slices.SortFunc(out, func(a, b *v1.NodeClaim) int { return strings.Compare(a.Status.ProviderID, b.Status.ProviderID) })
	return out, nil
}

// Delete terminates the claim's instance; NodeClaimNotFoundError once EC2 says it
// is terminated or unknown. An instance just launched that EC2 does not show yet
// is not taken for gone: the caller retries.
func (c *CloudProvider) Delete(ctx context.Context, claim *v1.NodeClaim) error {
	providerID := claim.Status.ProviderID
	id, err := ParseProviderID(providerID)
	if err != nil {
		return &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
	}
	inst, found, err := c.describe(ctx, id)
	if err != nil {
		return err
	}
	if !found {
		if _, ok := c.recentClaim(id); ok {
			return fmt.Errorf("instance %s was launched moments ago and EC2 does not show it yet", id)
		}
		return &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
	}
	c.seen(id)
	switch {
	case inst.Gone():
		return &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
	case inst.State == ec2types.InstanceStateNameShuttingDown:
		return nil
	}
	if _, err := c.aws.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		terminationFailures.WithLabelValues(inst.Zone, inst.ZoneID).Inc()
		if errorCode(err) == "InvalidInstanceID.NotFound" {
			return &cloudprovider.NodeClaimNotFoundError{ProviderID: providerID}
		}
		return fmt.Errorf("terminating instance %s: %w", id, err)
	}
	return nil
}

// IsDrifted reports why the claim's instance no longer matches its EC2NodeClass.
func (c *CloudProvider) IsDrifted(ctx context.Context, claim *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	nc, err := c.nodeClass(ctx, claim.Spec.NodeClassRef)
	if err != nil {
		return "", err
	}
	id, err := ParseProviderID(claim.Status.ProviderID)
	if err != nil {
		return "", nil // not launched yet: nothing to drift
	}
	inst, found, err := c.describe(ctx, id)
	if err != nil || !found {
		return "", err
	}
	labels := map[string]string{}
	if it := c.typeOf(ctx, inst); it != nil {
		labels = it.Requirements.Labels()
	}
	for k, v := range claim.Labels {
		if _, ok := labels[k]; !ok {
			labels[k] = v
		}
	}
	return Drifted(nc, claim, InstanceFacts{ImageID: inst.ImageID, SubnetID: inst.SubnetID,
		SecurityGroups: inst.SecurityGroups, Tags: inst.Tags, Labels: labels}), nil
}

// typeOf is the instance's type as its NodeClass has its nodes; nil when the
// NodeClass or the type is unknown.
func (c *CloudProvider) typeOf(ctx context.Context, inst Instance) *scheduling.InstanceType {
	nc := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: inst.Tags[TagNodeClass]}, nc); err != nil {
		return nil
	}
	if len(nc.Status.Subnets) == 0 {
		nc.Status.Subnets = []awsv1.Subnet{{Zone: inst.Zone}}
	}
	types, err := c.instanceTypes(ctx, nc, cmp.Or(inst.Tenancy, TenancyDefault))
	if err != nil {
		return nil
	}
	for _, it := range types {
		if it.Name == inst.Type {
			return it
		}
	}
	return nil
}

// instanceOf reads an EC2 instance under the ReservedCapacity gate.
func (c *CloudProvider) instanceOf(in ec2types.Instance) Instance {
	inst := InstanceOf(in)
	if !c.opts.ReservedCapacity {
		return inst.withoutReservations()
	}
	return inst
}

// errorCode is the AWS error code of err, or "".
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
