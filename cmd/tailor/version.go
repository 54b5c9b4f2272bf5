package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// Stamped at build time (see the Makefile's build target):
//
//	go build -ldflags "-X main.version=v0.3.0 -X main.commit=$(git rev-parse HEAD) -X main.date=…"
var (
	version = "dev"
	commit  = "unknown"
	date    = "unknown"
)

// BuildInfo is what `tailor version` reports.
type BuildInfo struct {
	Version, Commit, Date, GoVersion, Platform string
}

// Build is this binary's BuildInfo. Unstamped, a binary installed with
// `go install …@v1.2.3` still knows its module version and, built from a checkout
// with VCS stamping, its commit.
func Build() BuildInfo {
	b := BuildInfo{Version: version, Commit: commit, Date: date,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if b.Version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		b.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision" && b.Commit == "unknown":
			b.Commit = s.Value
		case s.Key == "vcs.time" && b.Date == "unknown":
			b.Date = s.Value
		}
	}
	return b
}

// Version is the build's version string.
func Version() string { return Build().Version }

func newVersionCommand(s streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version, commit, build date and Go version",
		Args:  noArgs(""),
		RunE: func(*cobra.Command, []string) error {
			_, err := io.WriteString(s.out, versionText(Build()))
			return failed(err)
		},
	}
}

// versionText is what `tailor version` and `tailor --version` print.
func versionText(b BuildInfo) string {
	return fmt.Sprintf("tailor %s\ncommit: %s\nbuilt:  %s\ngo:     %s %s\n", b.Version, b.Commit, b.Date, b.GoVersion, b.Platform)
}
