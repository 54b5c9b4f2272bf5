package aws

import (
	"strings"
	"testing"

	"github.com/nodetailor/tailor/internal/fakeaws"
	"github.com/nodetailor/tailor/pkg/cloudprovider"
)

// The provider reads what an instance printed while it booted from EC2's
// GetConsoleOutput, for a claim whose node never registers.
func TestBootLog(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, fakeaws.Options{})
	nc := e.nodeClass(t, nil)
	launched, err := e.cloud.Create(t.Context(), e.claim(nc, "silent"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := ParseProviderID(launched.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	e.fake.SetConsoleOutput(id, "cloud-init: running modules\nnodeadm: Could not find NodeConfig within UserData\n")
	read := cloudprovider.BootLogs(e.cloud)
	if read == nil {
		t.Fatal("the AWS provider reads no boot log")
	}
	out, err := read(t.Context(), launched.Status.ProviderID)
	if err != nil || !strings.Contains(out, "Could not find NodeConfig") {
		t.Errorf("boot log %q, %v", out, err)
	}
	if _, err := read(t.Context(), "aws:///us-east-1a/i-0000000000000000f"); err == nil {
		t.Errorf("an unknown instance's boot log read without an error")
	}
}
