package main

import (
	"io"
	"testing"

	"github.com/nodetailor/tailor/pkg/operator"
)

// The controller's karpenter_build_info carries the version and commit stamped
// into the binary, as `tailor version` prints them.
func TestControllerReportsTheStampedBuild(t *testing.T) {
	stamped, stampedCommit := version, commit
	version, commit = "v1.2.3", "0123abcd"
	t.Cleanup(func() {
		version, commit = stamped, stampedCommit
		operator.SetBuild("", "")
	})
	t.Setenv("GOGC", "100") // keeps runController from tuning this process's GC
	// An unknown log level stops runController before it looks for a cluster.
	if err := runController(operator.Options{LogLevel: "loud"}, io.Discard); err == nil {
		t.Fatal("runController accepted log level loud")
	}
	if v, c := operator.BuildStamp(); v != "v1.2.3" || c != "0123abcd" {
		t.Errorf("karpenter_build_info version %q, commit %q; want v1.2.3, 0123abcd", v, c)
	}
}
