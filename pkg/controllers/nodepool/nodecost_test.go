package nodepool

import (
	"strings"
	"testing"

	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/internal/testobj"
)

// A per-node cost the pool's annotation gives is validated with the template:
// one that cannot be read fails ValidationSucceeded, naming the annotation.
func TestValidatePerNodeCost(t *testing.T) {
	for value, want := range map[string]string{
		"0.02": "", "0": "", "9999.5": "",
		"0,02": "is not a per-hour cost", "": "is not a per-hour cost", "1e2": "is not a per-hour cost", "10000": "is not a per-hour cost",
	} {
		np := testobj.NodePool("default")
		np.Annotations = map[string]string{v1alpha1.PerNodeCostAnnotationKey: value}
		valid, why := Validate(np)
		if want == "" {
			if !valid {
				t.Errorf("%q: refused: %s", value, why)
			}
			continue
		}
		if valid || !strings.Contains(why, `metadata.annotations[tailor.sh/per-node-cost]`) || !strings.Contains(why, want) {
			t.Errorf("%q: valid %v, %q; want refused: %s", value, valid, why, want)
		}
	}
}
