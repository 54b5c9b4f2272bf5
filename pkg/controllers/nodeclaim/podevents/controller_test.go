package podevents

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/nodetailor/tailor/api/v1"
)

// A new node's first pods are covered by its initialization until Dedupe has
// passed; an older stamp is the stamp.
func TestLastStamp(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	initialized := now.Add(-2 * time.Second)
	stamped := now.Add(-time.Minute)
	withInit := func(nc v1.NodeClaim) v1.NodeClaim {
		nc.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(initialized)}}
		return nc
	}
	tests := []struct {
		name string
		nc   v1.NodeClaim
		want time.Time
	}{
		{"not initialized yet: wait", v1.NodeClaim{}, now},
		{"initialized, never stamped", withInit(v1.NodeClaim{}), initialized},
		{"stamped", withInit(v1.NodeClaim{Status: v1.NodeClaimStatus{LastPodEventTime: metav1.NewTime(stamped)}}), stamped},
	}
	for _, tt := range tests {
		if got := lastStamp(&tt.nc, now); !got.Equal(tt.want) {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
