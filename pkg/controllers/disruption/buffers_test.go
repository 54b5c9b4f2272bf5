package disruption

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/cloudprovider/fake"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
	"github.com/nodetailor/tailor/pkg/state"
)

// Against the API server: an empty node whose room a CapacityBuffer keeps is not
// deleted; once the buffer asks for no room, it is.
func TestBufferRoomSurvivesConsolidation(t *testing.T) {
	kube, reader := manager(t)
	ctx := t.Context()
	pool := testobj.NodePool("buffered", testobj.ConsolidationPolicy(v1.ConsolidationPolicyWhenEmptyOrUnderutilized),
		testobj.ConsolidateAfter("0s"), testobj.Budgets("100%"))
	tmpl := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "chunk", Namespace: "default"},
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}}
	room := &cb.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "room", Namespace: "default"},
		Spec: cb.CapacityBufferSpec{PodTemplateRef: &cb.LocalObjectRef{Name: "chunk"}, Replicas: func() *int32 { n := int32(2); return &n }()}}
	for _, obj := range []client.Object{pool, tmpl, room} {
		if err := kube.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	node(t, kube, "buffered-a", "buffered", simClass)
	t.Cleanup(func() {
		for _, obj := range []client.Object{room, tmpl, pool, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "buffered-a"}},
			&v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "buffered-a"}}} {
			_ = kube.Delete(context.Background(), obj)
		}
	})
	eventually(t, "the cache holds the claim and the buffer", func() bool {
		nc := &v1.NodeClaim{}
		return kube.Get(ctx, client.ObjectKey{Name: "buffered-a"}, nc) == nil && len(nc.Status.Conditions) > 0 &&
			kube.Get(ctx, client.ObjectKeyFromObject(room), &cb.CapacityBuffer{}) == nil
	})
	types := schedtest.SyntheticTypes(4)
	c := NewController(kube, reader, state.New(kube).WithBuffers(reader), fake.New(types),
		func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		record.NewFakeRecorder(100), clock.RealClock{}, Options{ValidationDelay: 0, ReplacementTimeout: time.Minute}, nil)
	cmd, err := c.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if cmd != nil {
		t.Fatalf("the buffer's room is on the node: want nothing, got %s", cmd)
	}
	// The buffer shrinks to nothing: the node is empty.
	patch := client.MergeFrom(room.DeepCopy())
	*room.Spec.Replicas = 0
	if err := kube.Patch(ctx, room, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cache holds the shrunk buffer", func() bool {
		got := &cb.CapacityBuffer{}
		return kube.Get(ctx, client.ObjectKeyFromObject(room), got) == nil && *got.Spec.Replicas == 0
	})
	cmd, err = c.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Wait()
	if cmd == nil || cmd.Reason != v1.DisruptionReasonEmpty || cmd.Candidates[0].Claim.Name != "buffered-a" {
		t.Fatalf("want the buffer's node deleted as empty, got %v", cmd)
	}
}
