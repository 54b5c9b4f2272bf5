package aws

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/cloudprovider/allocatable"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim/garbagecollection"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// These tests drive the provider through the real SDK clients against the
// project's fake AWS, with EC2NodeClasses in a real API server.

type testEnv struct {
	fake        *fakeaws.Server
	clients     Clients
	opts        Options
	clock       *clocktesting.FakeClock
	prices      *PriceBook
	unavailable *cloudprovider.UnavailableOfferings
	cloud       *CloudProvider
}

// startFake starts a fake AWS for the test and the SDK configuration to reach it,
// with the SDK's standard retryer backing off briefly enough for tests.
func startFake(t *testing.T, fo fakeaws.Options) (*fakeaws.Server, aws.Config) {
	t.Helper()
	fake, err := fakeaws.New(fo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fake.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Close() })
	cfg := fake.AWSConfig()
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = 20 * time.Millisecond })
	}
	return fake, cfg
}

func newTestEnv(t *testing.T, fo fakeaws.Options) *testEnv {
	t.Helper()
	if fo.TerminationDelay == 0 {
		fo.TerminationDelay = 50 * time.Millisecond
	}
	fake, cfg := startFake(t, fo)
	var err error
	e := &testEnv{fake: fake, clients: NewClients(cfg), clock: clocktesting.NewFakeClock(time.Now()),
		opts: Options{ClusterName: fake.Cluster().Name, Region: fake.Region(), VMMemoryOverheadPercent: allocatable.DefaultVMMemoryOverheadPercent}}
	e.prices, err = NewPriceBook(e.opts.Region, e.clients.Pricing, e.clients.EC2, e.clock, 12*time.Hour, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	e.unavailable = cloudprovider.NewUnavailableOfferings(e.clock, 3*time.Minute)
	e.cloud = e.restart()
	return e
}

// restart is a new provider process against the same cloud: nothing remembered.
func (e *testEnv) restart() *CloudProvider {
	return New(kube, e.clients, e.opts, e.clock, e.prices, e.unavailable)
}

var nodeClassSeq atomic.Int32

// nodeClass creates a resolved EC2NodeClass selecting the fake's discovery-tagged
// subnets and security groups, the latest AL2023 AMIs and the node role.
func (e *testEnv) nodeClass(t *testing.T, edit func(*awsv1.EC2NodeClass)) *awsv1.EC2NodeClass {
	t.Helper()
	cluster := e.opts.ClusterName
	nc := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("nc-%d", nodeClassSeq.Add(1))},
		Spec: awsv1.EC2NodeClassSpec{
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
			Role:                       "KarpenterNodeRole-" + cluster,
			Tags:                       map[string]string{"team": "payments"},
		},
	}
	if edit != nil {
		edit(nc)
	}
	if err := kube.Create(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), nc) })
	return e.reconcile(t, nc)
}

// reconcile runs the NodeClass controller once and returns the NodeClass as stored.
func (e *testEnv) reconcile(t *testing.T, nc *awsv1.EC2NodeClass) *awsv1.EC2NodeClass {
	t.Helper()
	ctrl := NewNodeClassController(kube, e.cloud)
	if _, err := ctrl.Reconcile(t.Context(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(nc)}); err != nil {
		t.Fatal(err)
	}
	out := &awsv1.EC2NodeClass{}
	if err := kube.Get(t.Context(), client.ObjectKeyFromObject(nc), out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *testEnv) claim(nc *awsv1.EC2NodeClass, name string, reqs ...v1.NodeSelectorRequirementWithMinValues) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{v1.NodePoolLabelKey: "default"}},
		Spec: v1.NodeClaimSpec{Requirements: reqs,
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nc.Name}},
	}
}

func TestNodeClassStatus(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	if !nc.IsReady() {
		t.Fatalf("not Ready: %+v", nc.Status.Conditions)
	}
	if len(nc.Status.Subnets) != 3 || len(nc.Status.SecurityGroups) != 1 || nc.Status.InstanceProfile == "" {
		t.Errorf("status: %+v", nc.Status)
	}
	// Standard and NVIDIA images for both architectures.
	if len(nc.Status.AMIs) != 4 {
		t.Errorf("AMIs: %+v", nc.Status.AMIs)
	}
	if nc.Annotations[AnnotationNodeClassHash] != NodeClassHash(nc) {
		t.Errorf("hash annotation %q", nc.Annotations[AnnotationNodeClassHash])
	}

	missing := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
		nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"no-such": "tag"}}}
	})
	ready := meta.FindStatusCondition(missing.Status.Conditions, awsv1.ConditionTypeReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != "SecurityGroupsNotFound" {
		t.Fatalf("Ready must name the missing security groups: %+v", ready)
	}
	pool := &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: missing.Name}}}}}
	if _, err := e.cloud.InstanceTypes(t.Context(), pool); !cloudprovider.IsNodeClassNotReady(err) {
		t.Errorf("instance types of a NodeClass that is not Ready: want NodeClassNotReadyError, got %v", err)
	}
}

func TestInstanceTypesFromEC2(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	pool := &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nc.Name}}}}}
	types, err := e.cloud.InstanceTypes(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	var m5 *scheduling.InstanceType
	for _, it := range types {
		if it.Name == "m5.large" {
			m5 = it
		}
	}
	if m5 == nil {
		t.Fatalf("no m5.large among %d types", len(types))
	}
	labels := m5.Requirements.Labels()
	for k, want := range map[string]string{LabelInstanceFamily: "m5", LabelInstanceCPU: "2", LabelInstanceMemory: "8192",
		LabelInstanceCategory: "m", LabelInstanceGeneration: "5", v1.LabelArch: "amd64", LabelInstanceHypervisor: "nitro"} {
		if labels[k] != want {
			t.Errorf("m5.large %s = %q, want %q", k, labels[k], want)
		}
	}
	// An EKS node: m5.large has 29 pods and 7577Mi of memory before reservations.
	if pods := m5.Capacity[corev1.ResourcePods]; pods.Value() != 29 {
		t.Errorf("m5.large pods %d", pods.Value())
	}
	if len(m5.Offerings) != 6 {
		t.Errorf("m5.large offerings (spot and on-demand in 3 zones): %+v", m5.Offerings)
	}
	// EC2 describes Nitro's shared 28 attachments; the node attaches 26 volumes.
	if n := m5.VolumeLimits[EBSCSIDriver]; n != 26 {
		t.Errorf("m5.large attaches %d EBS volumes, want 26", n)
	}
}

func TestLaunch(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	claim := e.claim(nc, "launch", req(v1.LabelInstanceType, "m5.large", "m5.xlarge"), req(v1.CapacityTypeLabelKey, "on-demand"))
	got, err := e.cloud.Create(t.Context(), claim)
	if err != nil {
		t.Fatal(err)
	}
	id, err := ParseProviderID(got.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	inst, ok := e.fake.Instance(id)
	if !ok {
		t.Fatalf("no instance %s", id)
	}
	if got.Status.ProviderID != inst.ProviderID() || got.Labels[v1.LabelInstanceType] != inst.Type || got.Labels[v1.CapacityTypeLabelKey] != "on-demand" {
		t.Errorf("claim %+v does not describe instance %+v", got, inst)
	}
	if got.Status.ImageID != inst.ImageID || got.Status.Allocatable.Memory().IsZero() {
		t.Errorf("image %s (instance %s), allocatable %v", got.Status.ImageID, inst.ImageID, got.Status.Allocatable)
	}
	for k, want := range map[string]string{TagNodeClaim: "launch", TagNodePool: "default", TagNodeClass: nc.Name,
		"kubernetes.io/cluster/" + e.opts.ClusterName: "owned", TagEKSCluster: e.opts.ClusterName, "team": "payments"} {
		if inst.Tags[k] != want {
			t.Errorf("tag %s = %q, want %q", k, inst.Tags[k], want)
		}
	}
	// One launch template per max pods: m5.large has 29, m5.xlarge 58.
	templates := e.fake.LaunchTemplates()
	if len(templates) != 2 {
		t.Fatalf("launch templates: %d, want 2", len(templates))
	}
	for _, lt := range templates {
		if ud := launchTemplateUserData(t, lt); !strings.Contains(ud, "kind: NodeConfig") || !strings.Contains(ud, "maxPods: ") {
			t.Errorf("user data is not a nodeadm NodeConfig:\n%s", ud)
		}
	}

	// Get and List see it.
	if g, err := e.cloud.Get(t.Context(), got.Status.ProviderID); err != nil || g.Name != "launch" {
		t.Errorf("get: %v, %v", g, err)
	}
	list, err := e.cloud.List(t.Context())
	if err != nil || len(list) != 1 || list[0].Name != "launch" || list[0].Spec.NodeClassRef.Name != nc.Name {
		t.Errorf("list: %v, %v", list, err)
	}

	// A second launch of the claim, by a provider that remembers nothing, gets the
	// same instance: the claim's UID is the fleet's client token.
	again, err := e.restart().Create(t.Context(), claim)
	if err != nil {
		t.Fatal(err)
	}
	if again.Status.ProviderID != got.Status.ProviderID || len(e.fake.Instances()) != 1 {
		t.Errorf("relaunch made %s (first %s); %d instances", again.Status.ProviderID, got.Status.ProviderID, len(e.fake.Instances()))
	}
}

func TestInsufficientCapacity(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	// No m5.large spot anywhere: the fleet falls back to m5.xlarge, and the m5.large
	// offerings are remembered as unavailable.
	e.fake.SetInsufficientCapacity(fakeaws.Offering{InstanceType: "m5.large", CapacityType: "spot"}, true)
	claim := e.claim(nc, "ice", req(v1.LabelInstanceType, "m5.large", "m5.xlarge"), req(v1.CapacityTypeLabelKey, "spot"))
	got, err := e.cloud.Create(t.Context(), claim)
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels[v1.LabelInstanceType] != "m5.xlarge" {
		t.Errorf("launched %s, want m5.xlarge", got.Labels[v1.LabelInstanceType])
	}
	pool := &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nc.Name}}}}}
	types, err := e.cloud.InstanceTypes(t.Context(), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		if it.Name != "m5.large" {
			continue
		}
		for _, o := range it.Offerings {
			if o.CapacityType == "spot" && o.Available {
				t.Errorf("m5.large spot in %s still offered after ICE", o.Zone)
			}
			if o.CapacityType == "on-demand" && !o.Available {
				t.Errorf("m5.large on-demand in %s must stay available", o.Zone)
			}
		}
	}

	// With no capacity at all for the claim, nothing launches.
	e.fake.SetInsufficientCapacity(fakeaws.Offering{InstanceType: "c5.large"}, true)
	_, err = e.cloud.Create(t.Context(), e.claim(nc, "ice-all", req(v1.LabelInstanceType, "c5.large"), req(v1.CapacityTypeLabelKey, "on-demand")))
	if !cloudprovider.IsInsufficientCapacity(err) {
		t.Fatalf("want InsufficientCapacityError, got %v", err)
	}
	// The next attempt does not even ask EC2.
	before := e.fake.Calls("ec2:CreateFleet")
	_, err = e.cloud.Create(t.Context(), e.claim(nc, "ice-again", req(v1.LabelInstanceType, "c5.large"), req(v1.CapacityTypeLabelKey, "on-demand")))
	if !cloudprovider.IsInsufficientCapacity(err) || e.fake.Calls("ec2:CreateFleet") != before {
		t.Errorf("a claim with only unavailable offerings: %v, %d fleet calls", err, e.fake.Calls("ec2:CreateFleet")-before)
	}
}

func TestThrottlingIsRetried(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	e.fake.ThrottleNext("ec2:CreateFleet", 2)
	e.fake.ThrottleNext("ec2:DescribeInstances", 2)
	got, err := e.cloud.Create(t.Context(), e.claim(nc, "throttled", req(v1.LabelInstanceType, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	if n := e.fake.Calls("ec2:CreateFleet"); n != 3 {
		t.Errorf("CreateFleet called %d times, want 3 (two throttled)", n)
	}
	if _, err := e.cloud.Get(t.Context(), got.Status.ProviderID); err != nil {
		t.Errorf("get through throttling: %v", err)
	}
	if len(e.fake.Instances()) != 1 {
		t.Errorf("%d instances, want 1", len(e.fake.Instances()))
	}
}

func TestEventualConsistency(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	e.fake.SetConsistencyDelay(time.Hour)
	claim := e.claim(nc, "unseen", req(v1.LabelInstanceType, "m5.large"))
	got, err := e.cloud.Create(t.Context(), claim)
	if err != nil {
		t.Fatal(err)
	}
	// EC2 does not show the instance yet; the provider still knows it launched it.
	if g, err := e.cloud.Get(t.Context(), got.Status.ProviderID); err != nil || g.Status.ProviderID != got.Status.ProviderID {
		t.Errorf("get of an instance EC2 does not show yet: %v, %v", g, err)
	}
	list, err := e.cloud.List(t.Context())
	if err != nil || len(list) != 1 || list[0].Name != "unseen" {
		t.Errorf("list must include the instance launched moments ago: %v, %v", list, err)
	}
	if err := e.cloud.Delete(t.Context(), got); err == nil || cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("delete of an instance EC2 does not show yet must be retried, got %v", err)
	}
	// A provider that restarted retries the launch: the client token returns the
	// same instance rather than a second.
	again, err := e.restart().Create(t.Context(), claim)
	if err != nil {
		t.Fatal(err)
	}
	if again.Status.ProviderID != got.Status.ProviderID || len(e.fake.Instances()) != 1 {
		t.Errorf("second launch: %s, first %s; %d instances", again.Status.ProviderID, got.Status.ProviderID, len(e.fake.Instances()))
	}
	// Once the visibility window has passed, an instance EC2 never shows is gone.
	e.clock.Step(10 * time.Minute)
	if _, err := e.cloud.Get(t.Context(), got.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("after the visibility window: want NodeClaimNotFoundError, got %v", err)
	}
}

func TestDeleteConfirmsTermination(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	got, err := e.cloud.Create(t.Context(), e.claim(nc, "doomed", req(v1.LabelInstanceType, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cloud.Delete(t.Context(), got); err != nil {
		t.Fatalf("first delete starts termination: %v", err)
	}
	id, _ := ParseProviderID(got.Status.ProviderID)
	// Poll until EC2 says terminated (the fake's termination delay).
	for i := 0; ; i++ {
		err := e.cloud.Delete(t.Context(), got)
		if cloudprovider.IsNodeClaimNotFound(err) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if i > 200 {
			inst, _ := e.fake.Instance(id)
			t.Fatalf("instance never terminated: %+v", inst)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := e.cloud.Get(t.Context(), got.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("get of a terminated instance: %v", err)
	}
	if list, err := e.cloud.List(t.Context()); err != nil || len(list) != 0 {
		t.Errorf("list after termination: %v, %v", list, err)
	}
}

func TestDrift(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	got, err := e.cloud.Create(t.Context(), e.claim(nc, "drifty", req(v1.LabelInstanceType, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	drift := func() cloudprovider.DriftReason {
		t.Helper()
		reason, err := e.cloud.IsDrifted(t.Context(), got)
		if err != nil {
			t.Fatal(err)
		}
		return reason
	}
	if r := drift(); r != "" {
		t.Fatalf("a fresh instance drifted: %s", r)
	}
	update := func(edit func(*awsv1.EC2NodeClass)) {
		t.Helper()
		stored := &awsv1.EC2NodeClass{}
		if err := kube.Get(t.Context(), client.ObjectKeyFromObject(nc), stored); err != nil {
			t.Fatal(err)
		}
		edit(stored)
		if err := kube.Update(t.Context(), stored); err != nil {
			t.Fatal(err)
		}
		nc = e.reconcile(t, stored)
	}

	// An older AMI release selected: AMI drift.
	update(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@v20250715"}}
	})
	if r := drift(); r != DriftAMI {
		t.Errorf("after an AMI change: %q", r)
	}
	update(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}
	})
	if r := drift(); r != "" {
		t.Fatalf("back to the launch AMI: %q", r)
	}

	// The VPC's default group added: security group drift.
	update(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.SecurityGroupSelectorTerms = append(nc.Spec.SecurityGroupSelectorTerms, awsv1.SecurityGroupSelectorTerm{Name: "default"})
	})
	if r := drift(); r != DriftSecurityGroup {
		t.Errorf("after a security group change: %q", r)
	}
	update(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.SecurityGroupSelectorTerms = nc.Spec.SecurityGroupSelectorTerms[:1]
	})

	// Only the public subnets selected: subnet drift.
	update(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"kubernetes.io/role/elb": "1"}}}
	})
	if r := drift(); r != DriftSubnet {
		t.Errorf("after a subnet change: %q", r)
	}
	update(func(nc *awsv1.EC2NodeClass) {
		nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": e.opts.ClusterName}}}
	})

	// A static setting changed: NodeClass (hash) drift.
	update(func(nc *awsv1.EC2NodeClass) { nc.Spec.Tags["team"] = "search" })
	if r := drift(); r != DriftNodeClass {
		t.Errorf("after a tag change: %q", r)
	}
}

// launchTemplateUserData is a template's user data (the fake decodes it).
func launchTemplateUserData(t *testing.T, lt fakeaws.LaunchTemplate) string {
	t.Helper()
	return lt.UserData
}

func TestPriceRefresh(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	zone := e.opts.Region + "a"
	before := e.prices.Prices()
	if before.OnDemand["m5.large"] <= 0 {
		t.Fatal("the embedded prices must serve before the first refresh")
	}
	e.fake.SetOnDemandPrice("m5.large", 0.5)
	e.fake.SetSpotPrice("m5.large", zone, 0.25)
	if err := e.prices.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	after := e.prices.Prices()
	if after.OnDemand["m5.large"] != 0.5 || after.Spot["m5.large"][zone] != 0.25 {
		t.Errorf("refreshed m5.large: on-demand %v, spot %v", after.OnDemand["m5.large"], after.Spot["m5.large"][zone])
	}
	if e.prices.Generation() == 0 {
		t.Error("a refresh must change the generation, so instance types are rebuilt")
	}

	// A failing Pricing API keeps the prices read before.
	e.fake.ThrottleNext("pricing:GetProducts", 100)
	if err := e.prices.Refresh(t.Context()); err == nil {
		t.Error("a refresh against a throttled API must say so")
	}
	if got := e.prices.Prices().OnDemand["m5.large"]; got != 0.5 {
		t.Errorf("on-demand after a failed refresh: %v, want 0.5", got)
	}
}

// Windows nodes are priced with their licence: from the embedded prices (the
// Linux ones plus the licence per vCPU) until the APIs answer, then from the
// Pricing API's Windows products and the Windows spot price history; a Windows
// NodeClass's instance types carry those prices, a Linux one's the Linux prices.
func TestWindowsPrices(t *testing.T) {
	t.Parallel()
	// The examples' account has the EKS Windows images.
	e := newTestEnv(t, fakeaws.Options{Inventory: fakeaws.KarpenterExamples("windows-prices", "1.34", "123456789012")})
	zone := e.opts.Region + "a"
	linux, windows := e.prices.PricesFor(OSLinux), e.prices.PricesFor(OSWindows)
	if got, want := windows.OnDemand["m5.large"], linux.OnDemand["m5.large"]+2*WindowsLicensePerVCPUHour; math.Abs(got-want) > 1e-9 {
		t.Errorf("embedded Windows m5.large: $%v, want $%v", got, want)
	}
	e.fake.SetOnDemandPrice("m5.large", 0.096)
	e.fake.SetSpotPrice("m5.large", zone, 0.04)
	if err := e.prices.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	linux, windows = e.prices.PricesFor(OSLinux), e.prices.PricesFor(OSWindows)
	// The fake's Windows products are its Linux ones plus $0.046 per vCPU-hour.
	for what, got := range map[string][2]float64{
		"Linux on-demand":   {linux.OnDemand["m5.large"], 0.096},
		"Windows on-demand": {windows.OnDemand["m5.large"], 0.188},
		"Linux spot":        {linux.Spot["m5.large"][zone], 0.04},
		"Windows spot":      {windows.Spot["m5.large"][zone], 0.132},
	} {
		if math.Abs(got[0]-got[1]) > 1e-6 {
			t.Errorf("%s m5.large: $%v, want $%v", what, got[0], got[1])
		}
	}
	priceOf := func(family string) float64 {
		nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
			nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: strings.ToLower(family) + "@latest"}}
		})
		types, err := e.cloud.InstanceTypes(t.Context(), e.pool(nc))
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range types {
			if it.Name == "m5.large" {
				for _, o := range it.Offerings {
					if o.CapacityType == CapacityTypeOnDemand {
						return o.Price
					}
				}
			}
		}
		t.Fatalf("%s: no on-demand m5.large", family)
		return 0
	}
	if got := priceOf(awsv1.AMIFamilyWindows2022); math.Abs(got-0.188) > 1e-6 {
		t.Errorf("Windows2022 NodeClass m5.large: $%v, want $0.188", got)
	}
	if got := priceOf(awsv1.AMIFamilyAL2023); math.Abs(got-0.096) > 1e-6 {
		t.Errorf("AL2023 NodeClass m5.large: $%v, want $0.096", got)
	}
}

func TestBottlerocketLaunch(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	user := "[settings.host-containers.admin]\nenabled = true\n"
	nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
		nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "bottlerocket@latest"}}
		nc.Spec.UserData = &user
	})
	if !nc.IsReady() {
		t.Fatalf("not Ready: %+v", nc.Status.Conditions)
	}
	if _, err := e.cloud.Create(t.Context(), e.claim(nc, "br", req(v1.LabelInstanceType, "m5.large"))); err != nil {
		t.Fatal(err)
	}
	templates := e.fake.LaunchTemplates()
	if len(templates) != 1 {
		t.Fatalf("%d launch templates", len(templates))
	}
	ud := launchTemplateUserData(t, templates[0])
	cluster := e.fake.Cluster()
	for _, want := range []string{`cluster-name = "` + cluster.Name + `"`, `api-server = "` + cluster.Endpoint + `"`, "max-pods = 29", "[settings.host-containers.admin]"} {
		if !strings.Contains(ud, want) {
			t.Errorf("user data lacks %s:\n%s", want, ud)
		}
	}
}

// An instance EC2 does not show yet (eventual consistency) is neither collected
// as a leak nor makes its claim look vanished to garbage collection.
func TestGarbageCollectionWaitsForConsistency(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	e.fake.SetConsistencyDelay(time.Hour)
	claim := e.claim(nc, fmt.Sprintf("gc-%d", nodeClassSeq.Add(1)), req(v1.LabelInstanceType, "m5.large"))
	claim.UID = ""
	if err := kube.Create(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), claim) })
	launched, err := e.cloud.Create(t.Context(), claim)
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.ProviderID = launched.Status.ProviderID
	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue,
		Reason: "Launched", LastTransitionTime: metav1.NewTime(e.clock.Now())})
	if err := kube.Status().Update(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	gc := garbagecollection.NewController(kube, e.cloud, record.NewFakeRecorder(10), e.clock, time.Minute)
	for range 3 {
		e.clock.Step(time.Minute) // past the collector's grace, within the provider's visibility window
		if err := gc.Collect(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := kube.Get(t.Context(), client.ObjectKeyFromObject(claim), &v1.NodeClaim{}); err != nil {
		t.Errorf("the claim of an instance EC2 does not show yet was collected: %v", err)
	}
	id, _ := ParseProviderID(launched.Status.ProviderID)
	if inst, _ := e.fake.Instance(id); inst.State == "shutting-down" || inst.State == "terminated" {
		t.Errorf("the instance was terminated: %s", inst.State)
	}
}

// Spot prices are read every spot interval, on-demand prices every on-demand one.
func TestPriceBookSchedule(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.prices.Start(ctx) }()
	calls := func() (int, int) {
		return e.fake.Calls("pricing:GetProducts"), e.fake.Calls("ec2:DescribeSpotPriceHistory")
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for i := 0; !cond(); i++ {
			if i > 1000 {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor("the first refresh", func() bool { od, spot := calls(); return od > 0 && spot > 0 && e.clock.HasWaiters() })
	od, spot := calls()
	e.clock.Step(5 * time.Minute)
	waitFor("the spot refresh", func() bool { _, s := calls(); return s > spot && e.clock.HasWaiters() })
	if o, _ := calls(); o != od {
		t.Errorf("on-demand prices read again after 5 minutes: %d calls, had %d", o, od)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A relaunch with other options than the first (an offering ran out meanwhile)
// clashes with the first under the client token; the first launch stands.
func TestRelaunchWithOtherOptions(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	claim := e.claim(nc, "relaunch", req(v1.LabelInstanceType, "m5.large"), req(v1.CapacityTypeLabelKey, "on-demand"))
	first, err := e.cloud.Create(t.Context(), claim)
	if err != nil {
		t.Fatal(err)
	}
	zone := first.Labels[v1.LabelZone]
	other := e.opts.Region + "b"
	if zone == other {
		other = e.opts.Region + "c"
	}
	e.unavailable.Mark(cloudprovider.UnavailableOffering{InstanceType: "m5.large", Zone: other, CapacityType: "on-demand"})
	again, err := e.restart().Create(t.Context(), claim)
	if err != nil {
		t.Fatal(err)
	}
	if again.Status.ProviderID != first.Status.ProviderID || len(e.fake.Instances()) != 1 {
		t.Errorf("relaunch: %s, first %s; %d instances", again.Status.ProviderID, first.Status.ProviderID, len(e.fake.Instances()))
	}
	// The first instance was found by its nodeclaim tag.
	if e.fake.Calls("ec2:DescribeInstances") == 0 {
		t.Error("the relaunch did not clash with the first launch, so the test proves nothing")
	}
}

func TestCapacityReservationsInStatus(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{Inventory: func(inv *fakeaws.Inventory) {
		inv.CapacityReservations = append(inv.CapacityReservations, fakeaws.CapacityReservation{
			ID: "cr-0123456789abcdef0", InstanceType: "m5.large", Zone: "us-east-1a", Total: 2, Available: 2,
			MatchCriteria: "targeted", Type: "default", Tags: map[string]string{"team": "payments"}})
	}})
	nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
		nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "payments"}}}
	})
	if !nc.IsReady() {
		t.Fatalf("not Ready: %+v", nc.Status.Conditions)
	}
	if len(nc.Status.CapacityReservations) != 1 {
		t.Fatalf("capacity reservations: %+v", nc.Status.CapacityReservations)
	}
	cr := nc.Status.CapacityReservations[0]
	if cr.ID != "cr-0123456789abcdef0" || cr.InstanceType != "m5.large" || cr.AvailabilityZone != "us-east-1a" ||
		cr.InstanceMatchCriteria != "targeted" || cr.OwnerID != e.fake.AccountID() {
		t.Errorf("capacity reservation %+v", cr)
	}
}

// Claims of one batch launch together and need the same new launch template: the
// ones that lose the race to create it use the winner's instead of failing.
func TestConcurrentLaunchesShareTemplate(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	// Every launch looks the template up before any creates it.
	e.fake.SetLatency("ec2:DescribeLaunchTemplates", 200*time.Millisecond)
	const n = 4
	errs := make(chan error, n)
	for i := range n {
		go func() {
			_, err := e.cloud.Create(t.Context(), e.claim(nc, fmt.Sprintf("batch-%d", i), req(v1.LabelInstanceType, "m5.large"), req(v1.CapacityTypeLabelKey, "on-demand")))
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := len(e.fake.Instances()); got != n {
		t.Errorf("%d instances, want %d", got, n)
	}
	if got := len(e.fake.LaunchTemplates()); got != 1 {
		t.Errorf("%d launch templates, want 1", got)
	}
}

// EC2's catalog is read once for every caller, and a caller that gives up does not
// end the read: under load, callers each restarting it at their own deadline would
// never finish one. Here every caller gives up after 200ms, while a read takes
// over a second: the read still completes, and callers then get the catalog.
func TestCatalogReadOutlivesItsCallers(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	e.fake.SetLatency("ec2:DescribeInstanceTypes", 100*time.Millisecond)
	impatient := func() ([]*scheduling.InstanceType, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		return e.cloud.InstanceTypes(ctx, e.pool(nc))
	}
	if _, err := impatient(); err == nil {
		t.Fatal("the catalog cannot be read within 200ms at 100ms a page")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		types, err := impatient()
		if err == nil && len(types) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("callers that give up after 200ms never got the catalog: %v", err)
		}
	}
	pages := e.fake.Calls("ec2:DescribeInstanceTypes")
	if _, err := e.cloud.InstanceTypes(t.Context(), e.pool(nc)); err != nil {
		t.Fatal(err)
	}
	if again := e.fake.Calls("ec2:DescribeInstanceTypes"); again != pages {
		t.Errorf("a cached catalog was read again: %d pages, then %d", pages, again)
	}
}

// Given the endpoint and CA, the provider still asks EKS for the service CIDR,
// which every AL2023 NodeConfig needs (nodeadm refuses one without it).
func TestClusterServiceCIDRWithEndpointGiven(t *testing.T) {
	e := newTestEnv(t, fakeaws.Options{})
	e.opts.ClusterEndpoint, e.opts.ClusterCABundle = "https://given.example", "Q0E="
	info, err := e.restart().clusterInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Endpoint != "https://given.example" || info.CABundle != "Q0E=" {
		t.Errorf("endpoint %q, CA %q: want the given ones", info.Endpoint, info.CABundle)
	}
	if info.ServiceCIDR == "" || info.ServiceCIDRError != nil {
		t.Errorf("service CIDR %q (%v), want EKS's", info.ServiceCIDR, info.ServiceCIDRError)
	}
}

// An amiSelectorTerms ssmParameter selects the one image the parameter names. A
// public image newer than it is in the account (what an unfiltered
// DescribeImages would pick), and a missing parameter leaves the NodeClass not
// Ready rather than picking anything.
func TestAMIFromSSMParameter(t *testing.T) {
	t.Parallel()
	var chosen string
	e := newTestEnv(t, fakeaws.Options{Inventory: func(inv *fakeaws.Inventory) {
		chosen = inv.Images[0].ID
		newest := inv.Images[0]
		newest.ID, newest.Name, newest.OwnerID, newest.OwnerAlias = "ami-0aaaabbbbccccdddd", "someone-elses-image", "999999999999", ""
		newest.CreationDate = time.Now()
		inv.Images = append(inv.Images, newest)
		inv.SSMParameters["/platform/node-image"] = chosen
	}})
	nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
		nc.Spec.AMIFamily, nc.Spec.AMISelectorTerms = aws.String(awsv1.AMIFamilyAL2023), []awsv1.AMISelectorTerm{{SSMParameter: "/platform/node-image"}}
	})
	if !nc.IsReady() {
		t.Fatalf("not Ready: %+v", nc.Status.Conditions)
	}
	if len(nc.Status.AMIs) != 1 || nc.Status.AMIs[0].ID != chosen {
		t.Errorf("AMIs %+v, want only %s, the parameter's", nc.Status.AMIs, chosen)
	}

	missing := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
		nc.Spec.AMIFamily, nc.Spec.AMISelectorTerms = aws.String(awsv1.AMIFamilyAL2023), []awsv1.AMISelectorTerm{{SSMParameter: "/platform/no-such-parameter"}}
	})
	if missing.IsReady() || len(missing.Status.AMIs) != 0 {
		t.Errorf("a missing parameter: Ready %v, AMIs %+v", missing.IsReady(), missing.Status.AMIs)
	}
}
