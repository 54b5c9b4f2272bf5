package aws

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
	"github.com/nodetailor/tailor/pkg/controllers/nodeclaim/garbagecollection"
)

// Karpenter's hash annotations on the claims it made: its own hash of the
// NodeClass, of a hash version that is not Tailor's.
const (
	karpenterNodeClassHash        = "4108472364713578154"
	karpenterNodeClassHashVersion = "v4"
)

// A cut-over from Karpenter: an instance Karpenter launched for a NodeClaim of an
// EC2NodeClass, and the NodeClaim as Karpenter left it, are adopted. The provider
// finds the instance (Get, List), garbage collection neither terminates it nor
// deletes the claim, no second instance is launched, and the claim is not
// drifted while the EC2NodeClass stays as it was; once the NodeClass changes, it
// is.
func TestAdoptKarpenterClaim(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{Seed: 0xada97})
	nc := e.nodeClass(t, func(nc *awsv1.EC2NodeClass) {
		nc.Annotations = map[string]string{AnnotationNodeClassHash: karpenterNodeClassHash, AnnotationNodeClassHashVersion: karpenterNodeClassHashVersion}
	})
	if !nc.IsReady() {
		t.Fatalf("NodeClass not Ready: %+v", nc.Status.Conditions)
	}
	claim, inst := e.launchAsKarpenter(t, nc, fmt.Sprintf("default-%05d", nodeClassSeq.Add(1)), "m5.large")
	if _, tagged := inst.Tags[TagNodeClassHash]; tagged {
		t.Fatal("Karpenter does not tag its instances with the NodeClass hash")
	}
	fleets := e.fake.Calls("ec2:CreateFleet")
	pid := claim.Status.ProviderID

	// Get and List find the instance, described as the claim it was launched for.
	got, err := e.cloud.Get(t.Context(), pid)
	if err != nil {
		t.Fatalf("Get of Karpenter's instance: %v", err)
	}
	if got.Name != claim.Name || got.Spec.NodeClassRef == nil || got.Spec.NodeClassRef.Name != nc.Name ||
		got.Labels[v1.NodePoolLabelKey] != "default" || got.Labels[v1.LabelInstanceType] != "m5.large" ||
		got.Labels[v1.CapacityTypeLabelKey] != CapacityTypeOnDemand || got.Status.ImageID != inst.ImageID {
		t.Errorf("Get describes %s as %+v", pid, got)
	}
	listed, err := e.cloud.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].Status.ProviderID != pid || listed[0].Name != claim.Name {
		t.Errorf("List: %+v, want Karpenter's instance %s", listed, pid)
	}

	// Garbage collection: the instance is owned by the claim that records it, past
	// the grace period, and the claim's instance is listed.
	manages := func(c *v1.NodeClaim) bool { return cloudprovider.Manages(e.cloud, c) }
	firstSeen := map[string]time.Time{}
	now := e.clock.Now()
	for _, at := range []time.Time{now, now.Add(garbagecollection.Grace), now.Add(10 * garbagecollection.Grace)} {
		if leaks := garbagecollection.Leaks(listed, []v1.NodeClaim{*claim}, manages, firstSeen, at); len(leaks) != 0 {
			t.Errorf("Karpenter's instance is taken for a leak at %s: %+v", at.Sub(now), leaks)
		}
		if gone := garbagecollection.Vanished(listed, []v1.NodeClaim{*claim}, nil, manages, at); len(gone) != 0 {
			t.Errorf("Karpenter's claim is taken for vanished at %s", at.Sub(now))
		}
	}

	// Not drifted: the claim's hash is of Karpenter's version, which cannot be
	// compared, and the instance runs the AMI, subnet and security groups the
	// NodeClass resolves to.
	if r, err := e.cloud.IsDrifted(t.Context(), claim); err != nil || r != "" {
		t.Errorf("Karpenter's claim before the NodeClass is reconciled: drift %q, %v", r, err)
	}
	// Reconciling the NodeClass re-stamps the claim with Tailor's hash of it...
	nc = e.reconcile(t, nc)
	stored := &v1.NodeClaim{}
	if err := kube.Get(t.Context(), client.ObjectKeyFromObject(claim), stored); err != nil {
		t.Fatal(err)
	}
	if stored.Annotations[AnnotationNodeClassHash] != NodeClassHash(nc) || stored.Annotations[AnnotationNodeClassHashVersion] != NodeClassHashVersion {
		t.Errorf("Karpenter's claim not re-stamped with the NodeClass's hash %s (%s): %v", NodeClassHash(nc), NodeClassHashVersion, stored.Annotations)
	}
	if r, err := e.cloud.IsDrifted(t.Context(), stored); err != nil || r != "" {
		t.Errorf("Karpenter's claim of an unchanged NodeClass: drift %q, %v", r, err)
	}
	// ...and nothing was launched for it.
	if n := e.fake.Calls("ec2:CreateFleet"); n != fleets || len(e.fake.Instances()) != 1 {
		t.Errorf("adopting launched: %d fleet requests (had %d), %d instances", n, fleets, len(e.fake.Instances()))
	}
	if i, _ := e.fake.Instance(inst.ID); i.State != "running" && i.State != "pending" {
		t.Errorf("Karpenter's instance is %s", i.State)
	}

	// Once the NodeClass really changes, the claim drifts, as Tailor's own do.
	stamped := stored.DeepCopy()
	current := &awsv1.EC2NodeClass{}
	if err := kube.Get(t.Context(), client.ObjectKeyFromObject(nc), current); err != nil {
		t.Fatal(err)
	}
	current.Spec.Tags["team"] = "search"
	if err := kube.Update(t.Context(), current); err != nil {
		t.Fatal(err)
	}
	e.reconcile(t, current)
	if r, err := e.cloud.IsDrifted(t.Context(), stamped); err != nil || r != DriftNodeClass {
		t.Errorf("Karpenter's claim after a change to its NodeClass's tags: drift %q, %v; want %s", r, err, DriftNodeClass)
	}
}

// Re-stamping touches only claims of the NodeClass whose hash is of another
// version: Tailor's own claims (no annotation: the hash is their instance's tag),
// claims already of Tailor's version, other NodeClasses' and claims being deleted
// are left.
func TestNeedsRestamp(t *testing.T) {
	claim := func(edit func(*v1.NodeClaim)) *v1.NodeClaim {
		c := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: map[string]string{
			AnnotationNodeClassHash: karpenterNodeClassHash, AnnotationNodeClassHashVersion: karpenterNodeClassHashVersion}},
			Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}}}
		if edit != nil {
			edit(c)
		}
		return c
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name  string
		claim *v1.NodeClaim
		want  bool
	}{
		{"Karpenter's", claim(nil), true},
		{"Tailor's own", claim(func(c *v1.NodeClaim) { c.Annotations = nil }), false},
		{"of Tailor's version", claim(func(c *v1.NodeClaim) { c.Annotations[AnnotationNodeClassHashVersion] = NodeClassHashVersion }), false},
		{"another NodeClass's", claim(func(c *v1.NodeClaim) { c.Spec.NodeClassRef.Name = "other" }), false},
		{"another kind's", claim(func(c *v1.NodeClaim) { c.Spec.NodeClassRef.Group = "tailor.sh" }), false},
		{"being deleted", claim(func(c *v1.NodeClaim) { c.DeletionTimestamp = &now }), false},
	} {
		if got := NeedsRestamp(tc.claim, "default"); got != tc.want {
			t.Errorf("%s: NeedsRestamp %v, want %v", tc.name, got, tc.want)
		}
	}
}

// launchAsKarpenter launches an instance of the type for a claim of nc as
// Karpenter does (through EC2, with the NodeClass's resolved AMI, subnet and
// security groups), and creates the claim as Karpenter leaves a launched,
// registered and initialized one.
func (e *testEnv) launchAsKarpenter(t *testing.T, nc *awsv1.EC2NodeClass, name, instanceType string) (*v1.NodeClaim, fakeaws.Instance) {
	t.Helper()
	types, err := e.cloud.InstanceTypes(t.Context(), e.pool(nc))
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{}
	var capacity corev1.ResourceList
	for _, it := range types {
		if it.Name == instanceType {
			labels, capacity = it.Requirements.Labels(), it.Capacity
		}
	}
	ami, ok := AMIFor(nc.Status.AMIs, labels)
	if !ok {
		t.Fatalf("no AMI of %s for %s", nc.Name, instanceType)
	}
	var groups []string
	for _, g := range nc.Status.SecurityGroups {
		groups = append(groups, g.ID)
	}
	subnet := nc.Status.Subnets[0]
	inst, err := e.fake.LaunchAsKarpenter(t.Context(), fakeaws.KarpenterLaunch{
		Cluster: e.opts.ClusterName, NodeClaim: name, NodePool: "default", NodeClass: nc.Name, NodeClassTags: nc.Spec.Tags,
		InstanceType: instanceType, SubnetID: subnet.ID, ImageID: ami.ID, SecurityGroupIDs: groups,
		InstanceProfile: "KarpenterNodeInstanceProfile-" + e.opts.ClusterName, Registered: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	claim := karpenterClaim(name, nc.Name, inst, labels, capacity)
	status := claim.Status
	if err := kube.Create(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Karpenter's finalizer would hold the claim for good.
		_ = kube.Patch(context.Background(), claim, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
		_ = kube.Delete(context.Background(), claim)
	})
	claim.Status = status
	if err := kube.Status().Update(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	return claim, inst
}

// karpenterClaim is a NodeClaim of the EC2NodeClass as Karpenter (v1) leaves one
// whose instance launched and whose Node registered and initialized: its
// finalizer, NodePool and NodeClass labels and those of the instance, its hash
// annotations (its own hash versions) and the instance recorded in its status.
func karpenterClaim(name, nodeClass string, inst fakeaws.Instance, typeLabels map[string]string, capacity corev1.ResourceList) *v1.NodeClaim {
	labels := map[string]string{
		v1.NodePoolLabelKey: "default", TagNodeClass: nodeClass,
		v1.LabelInstanceType: inst.Type, v1.LabelZone: inst.Zone, v1.LabelRegion: regionOf(inst.Zone),
		v1.CapacityTypeLabelKey: CapacityTypeOnDemand, v1.NodeRegisteredLabelKey: "true", v1.NodeInitializedLabelKey: "true",
	}
	for k, v := range typeLabels {
		labels[k] = v
	}
	since := metav1.NewTime(inst.LaunchTime.Add(-time.Hour).Truncate(time.Second))
	condition := func(kind string) metav1.Condition {
		return metav1.Condition{Type: kind, Status: metav1.ConditionTrue, Reason: kind, LastTransitionTime: since}
	}
	allocatable := capacity.DeepCopy()
	allocatable[corev1.ResourceMemory] = resource.MustParse("7Gi")
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: labels, Finalizers: []string{v1.TerminationFinalizer},
			Annotations: map[string]string{
				AnnotationNodeClassHash: karpenterNodeClassHash, AnnotationNodeClassHashVersion: karpenterNodeClassHashVersion,
				v1.NodePoolHashAnnotationKey: "6177288441473567428", v1.NodePoolHashVersionAnnotationKey: "v3",
				awsv1.Group + "/tagged": "true",
			},
		},
		Spec: v1.NodeClaimSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nodeClass},
			Requirements: []v1.NodeSelectorRequirementWithMinValues{
				req(v1.NodePoolLabelKey, "default"), req(v1.LabelInstanceType, inst.Type), req(v1.CapacityTypeLabelKey, CapacityTypeOnDemand),
			},
		},
		Status: v1.NodeClaimStatus{
			ProviderID: inst.ProviderID(), ImageID: inst.ImageID, NodeName: inst.PrivateDNSName,
			Capacity: capacity, Allocatable: allocatable,
			Conditions: []metav1.Condition{condition(v1.ConditionTypeLaunched), condition(v1.ConditionTypeRegistered),
				condition(v1.ConditionTypeInitialized), condition(v1.ConditionTypeReady)},
		},
	}
}
