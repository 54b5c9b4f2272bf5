package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/nodetailor/tailor/internal/localcluster"
)

// `up --dir` on a directory of someone else's files refuses, before starting
// anything, and deletes nothing.
func TestUpRefusesADirectoryThatIsNotASandbox(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	// No binaries or tailor needed: the refusal comes first.
	err := Up(t.Context(), Options{Dir: dir, Tailor: "/nonexistent/tailor"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "is not a sandbox") {
		t.Fatalf("up on a directory with a file: error %v, want one saying it is not a sandbox", err)
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "mine" {
		t.Errorf("the file in the directory did not survive up: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, Marker)); err == nil {
		t.Error("up marked a directory it refused")
	}
}

func TestClaimDir(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, dir string)
		wantErr string
		kept    string // a file that must survive
		gone    string // a file that must be cleared
	}{
		{name: "new", setup: func(t *testing.T, dir string) { _ = os.Remove(dir) }},
		{name: "empty", setup: func(*testing.T, string) {}},
		{name: "someone else's", setup: func(t *testing.T, dir string) { write(t, dir, "data.db", "") },
			wantErr: "is not a sandbox", kept: "data.db"},
		{name: "a stopped sandbox", setup: func(t *testing.T, dir string) {
			write(t, dir, Marker, "")
			write(t, dir, "etcd.log", "")
			write(t, dir, localcluster.PidFile, "etcd 999999999 1\n")
		}, gone: "etcd.log"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "sandbox")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, dir)
			err := claimDir(dir)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if !isSandbox(dir) {
				t.Error("the claimed directory has no marker")
			}
			if tc.kept != "" {
				if _, err := os.Stat(filepath.Join(dir, tc.kept)); err != nil {
					t.Errorf("%s did not survive: %v", tc.kept, err)
				}
			}
			if tc.gone != "" {
				if _, err := os.Stat(filepath.Join(dir, tc.gone)); !os.IsNotExist(err) {
					t.Errorf("%s of the old sandbox was kept", tc.gone)
				}
			}
		})
	}
}

// A pid file may name a pid that another process has been given since the
// sandbox's own process exited: down must not signal it. A process that is ours
// is stopped.
func TestDownSignalsOnlyItsOwnProcesses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		line     func(pid int, start uint64) string
		survives bool
	}{
		{name: "pid reused by another process", survives: true,
			line: func(pid int, start uint64) string { return fmt.Sprintf("kube-apiserver %d %d", pid, start+1) }},
		{name: "pid without a start time", survives: true,
			line: func(pid int, _ uint64) string { return fmt.Sprintf("kube-apiserver %d", pid) }},
		{name: "our own process", survives: false,
			line: func(pid int, start uint64) string { return fmt.Sprintf("kube-apiserver %d %d", pid, start) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A process group leader, as a sandbox component is: signalling the
			// group of its pid reaches it.
			sleep := exec.Command("sleep", "60")
			sleep.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := sleep.Start(); err != nil {
				t.Fatal(err)
			}
			pid := sleep.Process.Pid
			t.Cleanup(func() {
				_ = sleep.Process.Kill()
				_ = sleep.Wait()
			})
			start := startTime(t, pid)

			dir := filepath.Join(t.TempDir(), "sandbox")
			if err := claimDir(dir); err != nil {
				t.Fatal(err)
			}
			write(t, dir, localcluster.PidFile, tc.line(pid, start)+"\n")
			if err := Down(dir, &bytes.Buffer{}); err != nil {
				t.Fatal(err)
			}
			// The test never waits for sleep before this point, so if anything
			// signalled it, it is a zombie now (or gone), not sleeping.
			// D (waiting on the disk, as a process starting on a loaded machine
			// may be) is alive too.
			s := state(pid)
			alive := s == "S" || s == "R" || s == "D"
			if alive != tc.survives {
				t.Errorf("after down, sleep (pid %d) in state %q; want it to survive: %v", pid, s, tc.survives)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("down left %s behind", dir)
			}
		})
	}
}

// down never touches a directory that is not a sandbox, even one with a pid file.
func TestDownRefusesADirectoryThatIsNotASandbox(t *testing.T) {
	dir := t.TempDir()
	// A pid above any pid_max: nothing can be signalled even if the check fails.
	write(t, dir, localcluster.PidFile, "x 999999999 1\n")
	if err := Down(dir, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "is not a sandbox") {
		t.Fatalf("down on a directory without the marker: error %v, want one saying it is not a sandbox", err)
	}
	if _, err := os.Stat(filepath.Join(dir, localcluster.PidFile)); err != nil {
		t.Errorf("down removed a file of a directory that is not a sandbox: %v", err)
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// stat returns the fields of /proc/PID/stat after the command name: [0] is the
// state, [19] the start time.
func stat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	return strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
}

func state(pid int) string {
	if f := stat(pid); len(f) > 0 {
		return f[0]
	}
	return "gone"
}

func startTime(t *testing.T, pid int) uint64 {
	t.Helper()
	f := stat(pid)
	if len(f) < 20 {
		t.Fatalf("cannot read /proc/%d/stat", pid)
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// status on a directory that is not a sandbox's (a mistyped --dir) is an error
// saying so, not "not running"; on one that does not exist, nothing runs.
func TestStatusOfADirectoryThatIsNotASandbox(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "notes.txt", "mine")
	var out bytes.Buffer
	if err := Status(dir, &out); err == nil || !strings.Contains(err.Error(), dir+" is not a sandbox (it has no "+Marker+" file)") {
		t.Errorf("status of a directory without the marker: error %v, output %q", err, out.String())
	}
	file := filepath.Join(dir, "notes.txt")
	if err := Status(file, &out); err == nil || !strings.Contains(err.Error(), "is not a sandbox: it is a file") {
		t.Errorf("status of a file: error %v", err)
	}
	out.Reset()
	if err := Status(filepath.Join(dir, "nothing-here"), &out); err != nil || !strings.Contains(out.String(), "sandbox: not running") {
		t.Errorf("status of no directory: error %v, output %q; want not running", err, out.String())
	}
	write(t, dir, Marker, "")
	out.Reset()
	if err := Status(dir, &out); err != nil || !strings.Contains(out.String(), "sandbox: not running") {
		t.Errorf("status of a sandbox that started nothing: error %v, output %q; want not running", err, out.String())
	}
}
