package metrics

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestDurationBucketsAscendAndAreFresh(t *testing.T) {
	b := DurationBuckets()
	if !slices.IsSorted(b) || b[0] != 0.005 || b[len(b)-1] != 600 || len(b) != 45 {
		t.Errorf("buckets %v", b)
	}
	b[0] = 42
	if DurationBuckets()[0] != 0.005 {
		t.Error("a caller's change leaked into the next call")
	}
}

func TestResourceTypeAndValue(t *testing.T) {
	for _, tc := range []struct {
		name corev1.ResourceName
		q    string
		want string
		v    float64
	}{
		{corev1.ResourceCPU, "1500m", "cpu", 1.5},
		{corev1.ResourceMemory, "1Gi", "memory", 1 << 30},
		{corev1.ResourceEphemeralStorage, "1k", "ephemeral_storage", 1000},
		{"nvidia.com/gpu", "2", "nvidia.com/gpu", 2},
	} {
		if got := ResourceType(tc.name); got != tc.want {
			t.Errorf("ResourceType(%s) = %s, want %s", tc.name, got, tc.want)
		}
		if got := Value(tc.name, resource.MustParse(tc.q)); got != tc.v {
			t.Errorf("Value(%s, %s) = %v, want %v", tc.name, tc.q, got, tc.v)
		}
	}
}
