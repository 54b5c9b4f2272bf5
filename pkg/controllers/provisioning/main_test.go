package provisioning

import (
	"context"
	"os"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testenv"
)

// kube reaches the API server the package's tests share.
var kube client.Client

func TestMain(m *testing.M) { os.Exit(testenv.RunWithAPIServer(m, &kube)) }

// poolClaims lists the NodeClaims of a NodePool.
func poolClaims(t *testing.T, pool string) []v1.NodeClaim {
	t.Helper()
	claims := &v1.NodeClaimList{}
	if err := kube.List(t.Context(), claims, client.MatchingLabels{v1.NodePoolLabelKey: pool}); err != nil {
		t.Fatal(err)
	}
	return claims.Items
}

// isolate removes what a test created in the API server when it ends: a snapshot
// reads every pod, claim and NodePool.
func isolate(t *testing.T) {
	t.Cleanup(func() {
		ctx := context.Background()
		// The provisioner's claims carry the termination finalizer.
		claims := &v1.NodeClaimList{}
		if err := kube.List(ctx, claims); err != nil {
			t.Error(err)
		}
		for i := range claims.Items {
			nc := &claims.Items[i]
			patch := client.MergeFrom(nc.DeepCopy())
			nc.Finalizers = nil
			if err := kube.Patch(ctx, nc, patch); err != nil {
				t.Error(err)
			}
		}
		for _, kind := range []client.Object{&v1.NodeClaim{}, &v1.NodePool{}} {
			if err := kube.DeleteAllOf(ctx, kind); err != nil {
				t.Error(err)
			}
		}
		if err := kube.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("default"), client.GracePeriodSeconds(0)); err != nil {
			t.Error(err)
		}
	})
}

// readyNodePool creates a NodePool whose template labels nodes tier=name, and marks
// it Ready for its generation, as the NodePool controller would.
func readyNodePool(t *testing.T, name string, edit func(*v1.NodePool)) *v1.NodePool {
	t.Helper()
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Labels = map[string]string{"tier": name}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "tailor.sh", Kind: "SimNodeClass", Name: "default"}
	if edit != nil {
		edit(np)
	}
	if err := kube.Create(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	np.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready",
		ObservedGeneration: np.Generation, LastTransitionTime: metav1.Now()}}
	if err := kube.Status().Update(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	return np
}

// pendingPod creates a pod of cpu for nodes labelled tier, marked unschedulable as
// the kube-scheduler would.
func pendingPod(t *testing.T, name, cpu, tier string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"tier": tier}, Containers: []corev1.Container{{Name: "app", Image: "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}
	if err := kube.Create(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}
	if err := kube.Status().Update(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	return p
}
