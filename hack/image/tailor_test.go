package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// ldflagsEnv carries the Makefile's LDFLAGS into TestTailorBinaryIsStatic (`make
// image-test` sets it), so the binary tested is linked as `make image` links it.
const ldflagsEnv = "TAILOR_IMAGE_LDFLAGS"

// testLDFlags stand in for the Makefile's when the test runs on its own: the same
// flags, with stamps of the test's.
const testLDFlags = "-s -w -X main.version=v0.0.0-image-test -X main.commit=0123456789abcdef0123456789abcdef01234567 -X main.date=2026-01-02T03:04:05Z"

var stampFlag = regexp.MustCompile(`-X[ =]main\.(version|commit|date)=(\S+)`)

// TestTailorBinaryIsStatic builds cmd/tailor as the Makefile's image target does for
// each platform (CGO_ENABLED=0, -trimpath, its -ldflags) and checks that what goes
// into the image is static: the image has no dynamic loader or libc. On a machine
// that can run one of them, the binary also reports the stamped version.
func TestTailorBinaryIsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/tailor for two platforms, a minute or two each")
	}
	ldflags := os.Getenv(ldflagsEnv)
	if ldflags == "" {
		ldflags = testLDFlags
	}
	stamps := map[string]string{}
	for _, m := range stampFlag.FindAllStringSubmatch(ldflags, -1) {
		stamps[m[1]] = m[2]
	}
	if len(stamps) != 3 {
		t.Fatalf("the ldflags %q do not stamp version, commit and date (-X main.version=…)", ldflags)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	bins := t.TempDir()
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			bin := filepath.Join(bins, "tailor-linux-"+arch)
			cmd := exec.Command("go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, "./cmd/tailor")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("building cmd/tailor for linux/%s: %v\n%s", arch, err, out)
			}
			data, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckStatic(data, arch); err != nil {
				t.Errorf("tailor for linux/%s: %v", arch, err)
			}
			if runtime.GOOS != "linux" || runtime.GOARCH != arch {
				return
			}
			out, err := exec.Command(bin, "version").Output()
			if err != nil {
				t.Fatalf("tailor version: %v", err)
			}
			lines := strings.Split(string(out), "\n")
			if lines[0] != "tailor "+stamps["version"] ||
				!strings.Contains(string(out), "commit: "+stamps["commit"]+"\n") ||
				!strings.Contains(string(out), "built:  "+stamps["date"]+"\n") ||
				!strings.Contains(string(out), "linux/"+arch) {
				t.Errorf("tailor version printed\n%s\nwant version %s, commit %s, built %s, linux/%s",
					out, stamps["version"], stamps["commit"], stamps["date"], arch)
			}
		})
	}
}
