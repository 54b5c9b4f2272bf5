// Package kubescheme is the scheme of every kind Tailor reads and writes: the
// Kubernetes built-ins, karpenter.sh/v1, karpenter.k8s.aws/v1, tailor.sh/v1alpha1 and
// autoscaling.x-k8s.io/v1beta1 (CapacityBuffer).
package kubescheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	cbv1beta1 "github.com/nodetailor/tailor/api/autoscaling/v1beta1"
	awsv1 "github.com/nodetailor/tailor/api/aws/v1"
	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
)

// New returns the scheme.
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1.AddToScheme, awsv1.AddToScheme, v1alpha1.AddToScheme, cbv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}
