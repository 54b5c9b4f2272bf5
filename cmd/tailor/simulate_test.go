package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodetailor/tailor/pkg/simulate"
)

// The input bounds are flags with the defaults Load documents; nonsense values are
// refused before anything is read.
func TestParseSimulateLimits(t *testing.T) {
	opts, err := parseSimulate([]string{"-f", "x.yaml"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.limits != (simulate.Limits{MaxBytes: simulate.DefaultMaxBytes, MaxPods: simulate.DefaultMaxPods}) {
		t.Errorf("default limits %+v", opts.limits)
	}
	opts, err = parseSimulate([]string{"-f", "x.yaml", "--max-input-size", "1Gi", "--max-pods", "500"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if opts.limits != (simulate.Limits{MaxBytes: 1 << 30, MaxPods: 500}) {
		t.Errorf("parsed limits %+v", opts.limits)
	}
	for _, bad := range [][]string{{"--max-input-size", "lots"}, {"--max-input-size", "0"}, {"--max-input-size", "-1Mi"}, {"--max-pods", "0"}, {"--max-pods", "-3"}} {
		if _, err := parseSimulate(append([]string{"-f", "x.yaml"}, bad...), io.Discard); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// A bound met while loading fails the command with the loader's message.
func TestSimulatePodBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "web.yaml")
	manifest := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 20, template: {spec: {containers: [{name: c, image: x}]}}}\n"
	if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"simulate", "-f", path, "--max-pods", "10"}, &stdout, &stderr); code != 1 {
		t.Errorf("exit code %d, want 1; stderr %q", code, stderr.String())
	}
	if want := "Deployment web: spec.replicas 20 would make the input hold more than 10 pods"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q does not say %q", stderr.String(), want)
	}
}
