package operator

import (
	"runtime/debug"
	"testing"
)

// Sim nodes report the control plane's version as their kubelet's; a control
// plane built without a version stamp (the local one reports v0.0.0-master) is
// taken for the release of Tailor's client libraries, which a built binary
// records (a test binary does not, so only the choice is tested here).
func TestKubeletVersion(t *testing.T) {
	deps := []*debug.Module{{Path: "k8s.io/api", Version: "v0.33.1"}, {Path: "k8s.io/client-go", Version: "v0.34.4"}}
	for _, tc := range []struct {
		server string
		deps   []*debug.Module
		want   string
	}{
		{"v1.33.2", deps, "v1.33.2"},
		{"v1.34.4-eks-3025e55", deps, "v1.34.4-eks-3025e55"},
		{"v0.0.0-master+$Format:%H$", deps, "v1.34.4"},
		{"", deps, "v1.34.4"},
		{"", nil, ""},
	} {
		if got := chooseKubeletVersion(tc.server, tc.deps); got != tc.want {
			t.Errorf("server %q: %q, want %q", tc.server, got, tc.want)
		}
	}
}
