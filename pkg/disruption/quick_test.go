package disruption

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Quantities past int64 saturate: 1e16 cpu is a huge node, never an empty one.
func TestRoomOfSaturates(t *testing.T) {
	huge := roomOf(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1e16"),
		corev1.ResourceMemory: resource.MustParse("1e100"), corev1.ResourcePods: resource.MustParse("110")})
	if huge.cpu != scheduling.MaxQuantity || huge.mem != scheduling.MaxQuantity || huge.pods != 110 {
		t.Fatalf("roomOf = %+v, want cpu and memory at MaxQuantity, 110 pods", huge)
	}
	small := room{cpu: 2000, mem: 1 << 30, pods: 1}
	if !small.fits(huge) || huge.fits(small) {
		t.Fatalf("fits: %+v in %+v", small, huge)
	}
	if sum := huge.plus(huge); sum.cpu != scheduling.MaxQuantity || sum.mem != scheduling.MaxQuantity {
		t.Fatalf("plus = %+v, want saturated", sum)
	}
}
