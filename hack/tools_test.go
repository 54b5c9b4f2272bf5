package hack_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hack/tools.sh builds only the tools it is asked for: `make demo` asks for the
// control plane (what the sandbox runs), not controller-gen, and an unknown name
// is refused. Run after `make tools` (as `make test` does), so nothing is built
// here: every binary is up to date and the script only says so.
func TestToolsBuildsOnlyWhatItIsAskedFor(t *testing.T) {
	for _, name := range []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok"} {
		if _, err := os.Stat(filepath.Join("..", "bin", "."+name+".pin")); err != nil {
			t.Skipf("bin/%s is not built (run make tools): this test must not start a build", name)
		}
	}
	out, err := exec.Command("bash", "tools.sh", "control-plane").CombinedOutput()
	if err != nil {
		t.Fatalf("tools.sh control-plane: %v\n%s", err, out)
	}
	for _, name := range []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok"} {
		if !strings.Contains(string(out), "tools: "+name+" is up to date") {
			t.Errorf("tools.sh control-plane did not look at %s:\n%s", name, out)
		}
	}
	if strings.Contains(string(out), "controller-gen") {
		t.Errorf("tools.sh control-plane looked at controller-gen, which the sandbox does not run:\n%s", out)
	}

	out, err = exec.Command("bash", "tools.sh", "no-such-tool").CombinedOutput()
	if code := exitCode(err); code != 2 || !strings.Contains(string(out), "unknown tool no-such-tool") {
		t.Errorf("tools.sh no-such-tool: exit %d, %q; want 2 and the name refused", code, out)
	}

	// make demo asks for the control plane only.
	out, err = exec.Command("make", "-C", "..", "-n", "demo").CombinedOutput()
	if err != nil {
		t.Fatalf("make -n demo: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "hack/tools.sh control-plane") || strings.Contains(string(out), "controller-gen") {
		t.Errorf("make demo should build the control plane and not controller-gen:\n%s", out)
	}
}

func exitCode(err error) int {
	if e, ok := err.(*exec.ExitError); ok {
		return e.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
