package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		out, err string
	}{
		{args: []string{"version"}, code: 0, out: "tailor "},
		{args: []string{"help"}, code: 0, out: "Usage:\n  tailor [flags]\n  tailor [command]"},
		{args: nil, code: 2, err: "Usage:\n  tailor [flags]\n  tailor [command]"},
		{args: []string{"frobnicate"}, code: 2, err: `unknown command "frobnicate" for "tailor"`},
		{args: []string{"sandbox"}, code: 2, err: "Usage:\n  tailor sandbox"},
		{args: []string{"sandbox", "frobnicate"}, code: 2, err: `unknown command "frobnicate" for "tailor sandbox"`},
		{args: []string{"completion"}, code: 2, err: "Usage:\n  tailor completion"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != tc.code {
				t.Errorf("exit code %d, want %d", code, tc.code)
			}
			if !strings.Contains(stdout.String(), tc.out) {
				t.Errorf("stdout %q does not contain %q", stdout.String(), tc.out)
			}
			if !strings.Contains(stderr.String(), tc.err) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), tc.err)
			}
		})
	}
}
