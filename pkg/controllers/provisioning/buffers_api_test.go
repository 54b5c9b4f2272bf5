package provisioning

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cb "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/scheduling"
	"github.com/nodetailor/tailor/pkg/scheduling/schedtest"
	"github.com/nodetailor/tailor/pkg/state"
)

// Against the API server: a CapacityBuffer of three pods of one cpu, with no pod
// pending, has the provisioner create a NodeClaim with room for the three, and
// its status says so (kubectl get capacitybuffers). The next pass finds the
// room on that claim and creates nothing more. A buffer Tailor cannot honour is
// refused in its status.
func TestBufferLaunchesItsRoom(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	readyNodePool(t, "buffered", nil)
	tmpl := &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: "chunk", Namespace: "default"},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "burst"}},
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"tier": "buffered"}, Containers: []corev1.Container{{Name: "app", Image: "app",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}}
	room := &cb.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "room", Namespace: "default"},
		Spec: cb.CapacityBufferSpec{PodTemplateRef: &cb.LocalObjectRef{Name: "chunk"}, Replicas: ptr[int32](3)}}
	refused := &cb.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "rollout", Namespace: "default"},
		Spec: cb.CapacityBufferSpec{ScalableRef: &cb.ScalableRef{APIGroup: "argoproj.io", Kind: "Rollout", Name: "web"}, Replicas: ptr[int32](1)}}
	for _, obj := range []client.Object{tmpl, room, refused} {
		if err := kube.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, obj := range []client.Object{tmpl, room, refused} {
			_ = kube.Delete(context.Background(), obj)
		}
	})
	if room.Spec.ProvisioningStrategy == nil || *room.Spec.ProvisioningStrategy != cb.ActiveCapacityStrategy {
		t.Errorf("the API server defaulted the strategy to %v, want %s", room.Spec.ProvisioningStrategy, cb.ActiveCapacityStrategy)
	}
	types := schedtest.SyntheticTypes(8)
	p := NewProvisioner(kube, state.New(kube).WithBuffers(kube), func(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) { return types, nil },
		record.NewFakeRecorder(100), clocktesting.NewFakeClock(time.Now()), Options{})
	if err := p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	claims := poolClaims(t, "buffered")
	if len(claims) != 1 {
		t.Fatalf("%d claims, want one for the buffer's room", len(claims))
	}
	if cpu := claims[0].Spec.Resources.Requests[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("3")) < 0 {
		t.Errorf("the claim requests %s cpu, want room for three pods of one cpu", cpu.String())
	}
	if after, ok := p.recheckAfter(); !ok || after > BufferRecheck {
		t.Errorf("recheck after %v (%v), want within %v while buffers exist", after, ok, BufferRecheck)
	}
	got := &cb.CapacityBuffer{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(room), got); err != nil {
		t.Fatal(err)
	}
	prov := meta.FindStatusCondition(got.Status.Conditions, cb.ConditionProvisioning)
	if prov == nil || prov.Status != metav1.ConditionTrue || prov.Reason != BufferReasonProvisioned ||
		got.Status.Replicas == nil || *got.Status.Replicas != 3 || got.Status.PodTemplateRef == nil || got.Status.PodTemplateRef.Name != "chunk" {
		t.Errorf("status %+v, want 3 replicas of chunk, Provisioning True (%s)", got.Status, BufferReasonProvisioned)
	}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(refused), got); err != nil {
		t.Fatal(err)
	}
	if ready := meta.FindStatusCondition(got.Status.Conditions, cb.ConditionReadyForProvisioning); ready == nil ||
		ready.Status != metav1.ConditionFalse || ready.Reason != state.BufferUnsupportedScalableRef || ready.Message == "" {
		t.Errorf("refused buffer's status %+v, want ReadyForProvisioning False (%s) with a message", got.Status, state.BufferUnsupportedScalableRef)
	}
	// Planned again, the placeholders find their room on the claim launching.
	if err := p.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(poolClaims(t, "buffered")); n != 1 {
		t.Errorf("%d claims after a second pass, want still one", n)
	}
}
