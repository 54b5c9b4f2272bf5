package kubescheme_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	"github.com/nodetailor/tailor/internal/kubescheme"
)

func TestKinds(t *testing.T) {
	s, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "", Version: "v1", Kind: "Pod"},
		{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"},
		{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaim"},
		{Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClass"},
		{Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClassList"},
		{Group: "tailor.sh", Version: "v1alpha1", Kind: "SimNodeClass"},
	} {
		if !s.Recognizes(gvk) {
			t.Errorf("the scheme does not know %s", gvk)
		}
	}
	gvks, _, err := s.ObjectKinds(&awsv1.EC2NodeClass{})
	if err != nil || len(gvks) != 1 || gvks[0] != awsv1.SchemeGroupVersion.WithKind("EC2NodeClass") {
		t.Errorf("ObjectKinds(EC2NodeClass) = %v, %v", gvks, err)
	}
}
