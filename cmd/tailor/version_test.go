package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestVersionUnstamped(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, stderr.String())
	}
	for _, want := range []string{"tailor dev\n", "commit: unknown\n", "built:  unknown\n", "go:     go"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout %q does not contain %q", stdout.String(), want)
		}
	}
	if code := run([]string{"version", "extra"}, &stdout, &stderr); code != 2 {
		t.Errorf("a stray argument: exit code %d, want 2", code)
	}
}

// TestVersionStamped builds the binary as the Makefile does and runs it.
func TestVersionStamped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "tailor")
	ldflags := "-X main.version=v1.2.3 -X main.commit=0123abcd -X main.date=2026-11-25T12:00:00Z"
	if out, err := exec.Command("go", "build", "-ldflags", ldflags, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("tailor version: %v", err)
	}
	for _, want := range []string{"tailor v1.2.3\n", "commit: 0123abcd\n", "built:  2026-11-25T12:00:00Z\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output %q does not contain %q", out, want)
		}
	}
}
