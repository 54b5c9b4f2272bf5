package state

import (
	"errors"
	"strings"
	"testing"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

// Each NodePool's per-node cost reaches the engine: the cloud's (volumes,
// addresses) plus the pool's own annotation; an annotation that cannot be read
// keeps the pool from launching, saying why.
func TestBuildNodeCost(t *testing.T) {
	cloud := func(np *v1.NodePool) (scheduling.NodeCost, error) {
		if np.Name == "broken" {
			return scheduling.NodeCost{}, errors.New("no NodeClass")
		}
		return scheduling.NodeCost{Volumes: 0.002, Addresses: 0.005}, nil
	}
	annotated := func(name, cost string) *v1.NodePool {
		np := testobj.NodePool(name)
		if cost != "" {
			np.Annotations = map[string]string{v1alpha1.PerNodeCostAnnotationKey: cost}
		}
		return np
	}
	cases := []struct {
		name        string
		pool        *v1.NodePool
		cloud       func(*v1.NodePool) (scheduling.NodeCost, error)
		want        scheduling.NodeCost
		unavailable string
	}{
		{"none", annotated("plain", ""), nil, scheduling.NodeCost{}, ""},
		{"cloud only", annotated("plain", ""), cloud, scheduling.NodeCost{Volumes: 0.002, Addresses: 0.005}, ""},
		{"annotation only", annotated("licensed", "0.02"), nil, scheduling.NodeCost{PerNode: 0.02}, ""},
		{"both", annotated("licensed", "1.5"), cloud, scheduling.NodeCost{Volumes: 0.002, Addresses: 0.005, PerNode: 1.5}, ""},
		{"not a number", annotated("typo", "$0.02"), cloud, scheduling.NodeCost{}, `annotation tailor.sh/per-node-cost: "$0.02" is not a per-hour cost`},
		{"negative", annotated("typo", "-1"), nil, scheduling.NodeCost{}, "is not a per-hour cost"},
		{"exponent", annotated("typo", "1e3"), nil, scheduling.NodeCost{}, "is not a per-hour cost"},
		{"five digits", annotated("typo", "12000"), nil, scheduling.NodeCost{}, "is not a per-hour cost"},
		{"cloud fails", annotated("broken", ""), cloud, scheduling.NodeCost{}, "its per-node costs cannot be read: no NodeClass"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := Build(&Objects{NodePools: []*v1.NodePool{tc.pool}}, func(*v1.NodePool) ([]*scheduling.InstanceType, error) { return nil, nil },
				BuildOptions{Offline: true, NodeCost: tc.cloud})
			got := snap.Input.NodePools[0]
			if got.NodeCost != tc.want {
				t.Errorf("node cost %+v, want %+v", got.NodeCost, tc.want)
			}
			if tc.unavailable == "" && got.Unavailable != "" || !strings.Contains(got.Unavailable, tc.unavailable) {
				t.Errorf("unavailable %q, want %q", got.Unavailable, tc.unavailable)
			}
		})
	}
}
