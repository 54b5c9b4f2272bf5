package operator

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	awscloud "github.com/nodetailor/tailor/pkg/cloudprovider/aws"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim/garbagecollection"
)

// A cut-over from Karpenter with the whole controller: an instance Karpenter
// launched, its NodeClaim and Node as Karpenter left them, and their NodePool and
// EC2NodeClass exist when Tailor starts. For longer than garbage collection's
// grace period, nothing is launched, the instance is not terminated, the claim
// and its Node stay, and the claim is not drifted; Tailor does take the claim
// over (it re-stamps the NodeClass hash and weighs it for consolidation, which a
// budget of zero nodes keeps from acting).
func TestAWSAdoptsKarpenterClaims(t *testing.T) {
	// Run registers its metrics with controller-runtime's global registry and its
	// controller names in a global set: like TestAWSSpotInterruption, this Run
	// gets a registry of its own and skips the name check, leaving both to
	// TestAWSProviderLaunchesAndTerminates whichever runs first.
	prev := metrics.Registry
	metrics.Registry = prometheus.NewRegistry()
	t.Cleanup(func() { metrics.Registry = prev })
	fake := startFakeAWS(t, fakeaws.Options{Seed: 0xada98})
	cluster := fake.Cluster().Name
	kube := env.kube
	inv := fake.InventorySnapshot()

	// What the EC2NodeClass selects: the discovery-tagged subnets and security
	// group, and one AL2023 image by ID (an alias would depend on the API server's
	// Kubernetes version).
	image, ok := fake.SSMParameter("/aws/service/eks/optimized-ami/" + fake.Cluster().Version + "/amazon-linux-2023/x86_64/standard/recommended/image_id")
	if !ok {
		t.Fatal("the fake publishes no AL2023 image")
	}
	var subnet string
	var groups []string
	for _, s := range inv.Subnets {
		if s.Tags["karpenter.sh/discovery"] == cluster && subnet == "" {
			subnet = s.ID
		}
	}
	for _, g := range inv.SecurityGroups {
		if g.Tags["karpenter.sh/discovery"] == cluster {
			groups = append(groups, g.ID)
		}
	}
	const name = "aws-adopt"
	family := awsv1.AMIFamilyAL2023
	nc := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			awscloud.AnnotationNodeClassHash: "4108472364713578154", awscloud.AnnotationNodeClassHashVersion: "v4"}},
		Spec: awsv1.EC2NodeClassSpec{
			AMIFamily:                  &family,
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{ID: image}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
			Role:                       "KarpenterNodeRole-" + cluster,
			Tags:                       map[string]string{"team": "payments"},
		},
	}
	pool := &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			v1.NodePoolHashAnnotationKey: "6177288441473567428", v1.NodePoolHashVersionAnnotationKey: "v3"}},
		Spec: v1.NodePoolSpec{
			Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
				NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nc.Name},
				Requirements: []v1.NodeSelectorRequirementWithMinValues{
					{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"m5.large"}},
					{Key: v1.CapacityTypeLabelKey, Operator: v1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeOnDemand}},
				},
			}},
			// The node is empty: consolidation may weigh it, not remove it.
			Disruption: v1.Disruption{Budgets: []v1.Budget{{Nodes: "0"}}},
		},
	}
	for _, o := range []client.Object{nc, pool} {
		if err := kube.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Delete(context.Background(), o) })
	}

	claimName := pool.Name + "-k7x2p"
	inst, err := fake.LaunchAsKarpenter(t.Context(), fakeaws.KarpenterLaunch{
		Cluster: cluster, NodeClaim: claimName, NodePool: pool.Name, NodeClass: nc.Name, NodeClassTags: nc.Spec.Tags,
		InstanceType: "m5.large", SubnetID: subnet, ImageID: image, SecurityGroupIDs: groups,
		InstanceProfile: "KarpenterNodeInstanceProfile-" + cluster, Registered: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	claim, node := karpenterObjects(claimName, pool.Name, nc.Name, inst)
	createKarpenterObjects(t, claim, node)

	start := time.Now()
	runAWSController(t, fake, func(o *Options) {
		o.GCInterval = time.Second
		o.skipNameValidation = true
	})

	// Tailor takes the claim over: the NodeClass's hash of Tailor's version
	// replaces Karpenter's on the claim, and the disruption loop weighs it.
	eventually(t, awsWait, func() (bool, string) {
		got := &v1.NodeClaim{}
		if err := kube.Get(t.Context(), client.ObjectKeyFromObject(claim), got); err != nil {
			return false, err.Error()
		}
		restamped := got.Annotations[awscloud.AnnotationNodeClassHashVersion] == awscloud.NodeClassHashVersion
		weighed := meta.IsStatusConditionTrue(got.Status.Conditions, v1.ConditionTypeConsolidatable)
		return restamped && weighed, fmt.Sprintf("claim annotations %v; consolidatable %v; NodeClass %s",
			got.Annotations, weighed, nodeClassReady(t, nc.Name))
	})

	// For garbage collection's grace period and a few of its passes more, nothing
	// changes in the cloud or to the claim.
	for time.Since(start) < garbagecollection.Grace+5*time.Second {
		if n := fake.Calls("ec2:CreateFleet"); n != 1 {
			t.Fatalf("%d fleet requests: Tailor launched for an adopted claim", n-1)
		}
		if i, _ := fake.Instance(inst.ID); i.State != "running" && i.State != "pending" {
			t.Fatalf("Karpenter's instance is %s", i.State)
		}
		got := &v1.NodeClaim{}
		if err := kube.Get(t.Context(), client.ObjectKeyFromObject(claim), got); err != nil || got.DeletionTimestamp != nil {
			t.Fatalf("Karpenter's claim: %v, deleting %v", err, got.DeletionTimestamp)
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, v1.ConditionTypeDrifted); c != nil {
			t.Fatalf("Karpenter's claim of an unchanged NodeClass drifted: %s %s", c.Reason, c.Message)
		}
		if err := kube.Get(t.Context(), client.ObjectKeyFromObject(node), &corev1.Node{}); err != nil {
			t.Fatalf("Karpenter's Node: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := len(fake.Instances()); n != 1 {
		t.Errorf("%d instances, want Karpenter's one", n)
	}
	if fake.Calls("ec2:DescribeInstances") == 0 {
		t.Error("garbage collection never listed the instances, so the test proves nothing")
	}
}

// karpenterObjects are the NodeClaim and Node of inst as Karpenter (v1) leaves a
// launched, registered and initialized one: its finalizer on both, the NodePool,
// NodeClass and instance labels, its own hash annotations, the instance recorded
// in the claim's status and the Node Ready.
func karpenterObjects(name, pool, nodeClass string, inst fakeaws.Instance) (*v1.NodeClaim, *corev1.Node) {
	labels := map[string]string{
		v1.NodePoolLabelKey: pool, awsv1.Group + "/ec2nodeclass": nodeClass,
		v1.LabelInstanceType: inst.Type, v1.LabelZone: inst.Zone, v1.LabelRegion: strings.TrimRight(inst.Zone, "abcdefghijklmnopqrstuvwxyz"),
		v1.CapacityTypeLabelKey: v1.CapacityTypeOnDemand, v1.LabelArch: "amd64", v1.LabelOS: "linux",
		awsv1.Group + "/instance-family": "m5", awsv1.Group + "/instance-size": "large",
		v1.NodeRegisteredLabelKey: "true", v1.NodeInitializedLabelKey: "true",
	}
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("7577Mi"),
		corev1.ResourcePods: resource.MustParse("29"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")}
	allocatable := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("6884Mi"),
		corev1.ResourcePods: resource.MustParse("29"), corev1.ResourceEphemeralStorage: resource.MustParse("17Gi")}
	since := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	condition := func(kind string) metav1.Condition {
		return metav1.Condition{Type: kind, Status: metav1.ConditionTrue, Reason: kind, LastTransitionTime: since}
	}
	claim := &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Finalizers: []string{v1.TerminationFinalizer},
			Annotations: map[string]string{
				awscloud.AnnotationNodeClassHash: "4108472364713578154", awscloud.AnnotationNodeClassHashVersion: "v4",
				v1.NodePoolHashAnnotationKey: "6177288441473567428", v1.NodePoolHashVersionAnnotationKey: "v3",
				awsv1.Group + "/tagged": "true",
			}},
		Spec: v1.NodeClaimSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nodeClass},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{
				{Key: v1.NodePoolLabelKey, Operator: v1.NodeSelectorOpIn, Values: []string{pool}},
				{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{inst.Type}},
				{Key: v1.CapacityTypeLabelKey, Operator: v1.NodeSelectorOpIn, Values: []string{v1.CapacityTypeOnDemand}},
			},
		},
		Status: v1.NodeClaimStatus{
			ProviderID: inst.ProviderID(), ImageID: inst.ImageID, NodeName: inst.PrivateDNSName,
			Capacity: capacity, Allocatable: allocatable,
			Conditions: []metav1.Condition{condition(v1.ConditionTypeLaunched), condition(v1.ConditionTypeRegistered),
				condition(v1.ConditionTypeInitialized), condition(v1.ConditionTypeReady)},
		},
	}
	nodeLabels := map[string]string{v1.LabelHostname: inst.PrivateDNSName}
	for k, v := range labels {
		nodeLabels[k] = v
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: inst.PrivateDNSName, Labels: nodeLabels, Finalizers: []string{v1.TerminationFinalizer}},
		Spec:       corev1.NodeSpec{ProviderID: inst.ProviderID()},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: allocatable, Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: since}}},
	}
	return claim, node
}

// createKarpenterObjects creates the claim and Node with their status, and
// removes them (finalizers first) when the test ends.
func createKarpenterObjects(t *testing.T, claim *v1.NodeClaim, node *corev1.Node) {
	t.Helper()
	for _, o := range []client.Object{claim, node} {
		var status any
		switch o := o.(type) {
		case *v1.NodeClaim:
			status = o.Status
		case *corev1.Node:
			status = o.Status
		}
		if err := env.kube.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.kube.Patch(context.Background(), o, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
			_ = env.kube.Delete(context.Background(), o)
		})
		switch o := o.(type) {
		case *v1.NodeClaim:
			o.Status = status.(v1.NodeClaimStatus)
		case *corev1.Node:
			o.Status = status.(corev1.NodeStatus)
		}
		if err := env.kube.Status().Update(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
}
