package nodepool

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
)

// A NodePool of a NodeClass kind the cluster serves but this provider does not
// (Karpenter's EC2NodeClass while the sim provider runs) is another controller's:
// nothing is written to it, neither the hash annotations nor status, so the two
// controllers never take turns rewriting it (Karpenter stamps its own hash
// version, and provisions only from NodePools it holds Ready).
func TestOtherProvidersNodePoolIsLeftAlone(t *testing.T) {
	isolate(t)
	ctx := t.Context()
	c := NewController(kube, true, &v1alpha1.SimNodeClass{})
	np := createPool(t, "karpenters", func(np *v1.NodePool) {
		np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
		np.Spec.Replicas = ptr(int64(2))
		np.Annotations = map[string]string{v1.NodePoolHashAnnotationKey: "6043937311012962385", v1.NodePoolHashVersionAnnotationKey: "v3"}
	})
	// What Karpenter wrote.
	np.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready",
		ObservedGeneration: np.Generation, LastTransitionTime: metav1.Now()}}
	if err := kube.Status().Update(ctx, np); err != nil {
		t.Fatal(err)
	}
	before := np.ResourceVersion
	got := reconcileAndGet(t, c, np.Name)
	if got.ResourceVersion != before {
		t.Errorf("another controller's NodePool was written: annotations %v, conditions %+v", got.Annotations, got.Status.Conditions)
	}
}

// A NodePool of a NodeClass kind nothing in the cluster serves (no such resource)
// is not Ready, and says the provider does not support its kind.
func TestUnsupportedNodeClassKindIsNotReady(t *testing.T) {
	isolate(t)
	c := NewController(kube, false, &v1alpha1.SimNodeClass{})
	createPool(t, "azure", func(np *v1.NodePool) {
		np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.azure.com", Kind: "AKSNodeClass", Name: "default"}
	})
	np := reconcileAndGet(t, c, "azure")
	ready := meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeReady)
	if ready == nil || ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, "AKSNodeClass (karpenter.azure.com)") ||
		!strings.Contains(ready.Message, "not supported") {
		t.Errorf("Ready %+v; want False, saying kind AKSNodeClass (karpenter.azure.com) is not supported", ready)
	}
	class := meta.FindStatusCondition(np.Status.Conditions, v1.ConditionTypeNodeClassReady)
	if class == nil || class.Status != metav1.ConditionFalse || class.Reason != "NodeClassNotSupported" {
		t.Errorf("NodeClassReady %+v; want False, NodeClassNotSupported", class)
	}
}
