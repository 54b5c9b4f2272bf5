package aws

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/fakeaws"
)

// What a launch makes is tagged as Karpenter tags it: the fleet request, the
// instance and its volumes with the claim's tags, the network interface with the
// NodeClass's and Tailor's (the template is shared, so not the claim's name); and
// once the node registers, the instance is named after it (Name) and the claim
// annotated karpenter.k8s.aws/tagged.
func TestLaunchTagsAndName(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{Seed: 0x25602})
	nc := e.nodeClass(t, nil)
	launched, err := e.cloud.Create(t.Context(), e.claim(nc, "tagged", req(v1.LabelInstanceType, "m5.large")))
	if err != nil {
		t.Fatal(err)
	}
	inst := e.instanceOf(t, launched)
	fleet := e.fake.FleetTags(inst.Tags["aws:ec2:fleet-id"])
	eni := inst.NetworkInterfaceTags
	for _, k := range []string{"team", ClusterTag(e.opts.ClusterName), TagNodePool, TagNodeClass, TagEKSCluster} {
		if fleet[k] == "" || fleet[k] != inst.Tags[k] {
			t.Errorf("fleet tag %s = %q, instance's %q", k, fleet[k], inst.Tags[k])
		}
		if eni[k] == "" || eni[k] != inst.Tags[k] {
			t.Errorf("network interface tag %s = %q, instance's %q", k, eni[k], inst.Tags[k])
		}
	}
	if fleet[TagNodeClaim] != "tagged" {
		t.Errorf("fleet's nodeclaim tag %q", fleet[TagNodeClaim])
	}
	if _, ok := eni[TagNodeClaim]; ok {
		t.Error("the shared template tags network interfaces with one claim's name")
	}

	claim := e.claim(nc, "tagged", req(v1.LabelInstanceType, "m5.large"))
	claim.UID = ""
	if err := kube.Create(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), claim) })
	tagger := NewTaggingController(kube, e.clients.EC2, e.opts.ClusterName)
	key := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(claim)}
	if _, err := tagger.Reconcile(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.instanceOf(t, launched).Tags[TagName]; ok {
		t.Fatal("named before its node registered")
	}
	claim.Status.ProviderID, claim.Status.NodeName = launched.Status.ProviderID, inst.PrivateDNSName
	if err := kube.Status().Update(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	if _, err := tagger.Reconcile(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if name := e.instanceOf(t, launched).Tags[TagName]; name != inst.PrivateDNSName {
		t.Errorf("Name tag %q, want the node name %q", name, inst.PrivateDNSName)
	}
	if err := kube.Get(t.Context(), key.NamespacedName, claim); err != nil {
		t.Fatal(err)
	}
	if claim.Annotations[AnnotationInstanceTagged] != "true" {
		t.Errorf("claim annotations %v, want %s", claim.Annotations, AnnotationInstanceTagged)
	}
}
