package static

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// A static NodePool of a NodeClass kind this provider does not launch from
// (Karpenter's EC2NodeClass while the sim provider runs) is another controller's,
// Ready or not: no claim is made for it, none of its claims is deleted, and no
// event is recorded on it.
func TestOtherProvidersStaticNodePoolIsLeftAlone(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	c := NewController(kube, cloud, rec)
	ec2 := func(np *v1.NodePool) {
		np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	}
	staticPool(t, "karpenter-short", 2, nil, ec2)
	reconcilePool(t, c, "karpenter-short")
	if claims, _ := claimsOf(t, "karpenter-short"); len(claims) != 0 {
		t.Errorf("replicas 2 of another provider's NodePool: %d NodeClaims made, want none", len(claims))
	}

	// Karpenter's claims, more than the replicas.
	staticPool(t, "karpenter-over", 1, nil, ec2)
	for i := range 3 {
		nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("karpenter-over-%d", i), Labels: map[string]string{v1.NodePoolLabelKey: "karpenter-over"}},
			Spec: v1.NodeClaimSpec{NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
				Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType, Operator: v1.NodeSelectorOpIn, Values: []string{"m5.large"}}}}}
		if err := kube.Create(t.Context(), nc); err != nil {
			t.Fatal(err)
		}
	}
	reconcilePool(t, c, "karpenter-over")
	if staying, deleting := claimsOf(t, "karpenter-over"); len(staying) != 3 || len(deleting) != 0 {
		t.Errorf("replicas 1 with 3 of another provider's claims: %d staying, %v deleting; want all 3 left alone", len(staying), deleting)
	}
	if got := events(rec); len(got) != 0 {
		t.Errorf("events on another provider's NodePools: %v", got)
	}
}
