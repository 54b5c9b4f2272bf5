// Package sandbox tests `tailor sandbox` and the demo as a person runs them: the
// real binary, background processes, and nothing left behind.
package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodetailor/tailor/internal/testenv"
)

func TestSandboxDemo(t *testing.T) {
	tailor := testenv.BuildTailor(t)
	dir := filepath.Join(t.TempDir(), "sandbox")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(tailor, append(args, "--dir", dir)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("tailor %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	t.Cleanup(func() { _ = exec.Command(tailor, "sandbox", "down", "--dir", dir).Run() })

	// --dir naming someone else's directory: refused, nothing deleted.
	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(tailor, "sandbox", "up", "--dir", foreign).CombinedOutput(); err == nil || !strings.Contains(string(out), "is not a sandbox") {
		t.Errorf("sandbox up --dir on a directory with a file: %v, want a non-zero exit saying it is not a sandbox:\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(foreign, "notes.txt")); err != nil {
		t.Errorf("sandbox up deleted a file it was not given: %v", err)
	}

	up := run("sandbox", "up")
	if !strings.Contains(up, "export KUBECONFIG="+filepath.Join(dir, "kubeconfig")) {
		t.Errorf("sandbox up does not print the kubeconfig:\n%s", up)
	}
	status := run("sandbox", "status")
	for _, c := range []string{"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok", "tailor-controller"} {
		if !strings.Contains(status, c) || strings.Contains(status, c+" stopped") {
			t.Errorf("status does not show %s running:\n%s", c, status)
		}
	}
	start := time.Now()
	demo := run("sandbox", "demo")
	t.Logf("demo took %s:\n%s", time.Since(start).Round(time.Second), demo)
	for _, want := range []string{"all 10 pods running", "SUMMARY", "price at peak: $", "all nodes removed after", "price back to $0.0000/hour"} {
		if !strings.Contains(demo, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	run("sandbox", "down")
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("sandbox directory %s left behind", dir)
	}
	if left := processesUsing(dir); len(left) > 0 {
		t.Errorf("processes left after sandbox down:\n%s", strings.Join(left, "\n"))
	}
}

func processesUsing(dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var found []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), dir) {
			continue
		}
		if stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); strings.Contains(string(stat), ") Z ") {
			continue
		}
		found = append(found, e.Name()+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return found
}
