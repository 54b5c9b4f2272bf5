package interruption

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

// Only a spot interruption warning marks the claim's offering short of capacity;
// a scheduled change, a stop or a termination of a spot instance does not (it
// would keep a healthy spot offering out of plans for minutes).
func TestShortOfCapacity(t *testing.T) {
	claim := func(capacityType string) *v1.NodeClaim {
		return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.CapacityTypeLabelKey: capacityType}}}
	}
	for _, tc := range []struct {
		kind, capacityType string
		want               bool
	}{
		{cloudprovider.KindSpotInterruption, v1.CapacityTypeSpot, true},
		{cloudprovider.KindSpotInterruption, v1.CapacityTypeOnDemand, false},
		{"ScheduledChange", v1.CapacityTypeSpot, false},
		{"InstanceStopped", v1.CapacityTypeSpot, false},
		{"InstanceTerminated", v1.CapacityTypeSpot, false},
		{"ScheduledChange", v1.CapacityTypeOnDemand, false},
	} {
		if got := shortOfCapacity(cloudprovider.Interruption{Kind: tc.kind}, claim(tc.capacityType)); got != tc.want {
			t.Errorf("%s on %s: short of capacity %v, want %v", tc.kind, tc.capacityType, got, tc.want)
		}
	}
}

// Notices are recorded under the event reasons Karpenter's AWS provider uses.
func TestNoticeEventReasons(t *testing.T) {
	for kind, want := range map[string]string{
		cloudprovider.KindSpotInterruption: "Warning SpotInterrupted",
		"RebalanceRecommendation":          "Normal SpotRebalanceRecommendation",
		"ScheduledChange":                  "Warning InstanceUnhealthy",
		"InstanceStopped":                  "Warning InstanceStopping",
		"InstanceTerminated":               "Warning InstanceTerminating",
		"CapacityBlockExpiring":            "Warning CapacityBlockExpiring",
	} {
		e := noticeEvent(cloudprovider.Interruption{Kind: kind, RecordOnly: kind == "RebalanceRecommendation"})
		if got := e.eventtype + " " + e.reason; got != want {
			t.Errorf("%s: event %q, want %q", kind, got, want)
		}
	}
}
