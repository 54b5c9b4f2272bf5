package localcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// A pid file is only a file: whatever it says, pid 1 and this process's own group
// (whose groups reach every process, or the caller) are never taken for a
// component, and a pid counts as ours only with the start time recorded for it.
func TestPidRecordRunning(t *testing.T) {
	sleep := exec.Command("sleep", "60")
	sleep.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sleep.Process.Kill()
		_ = sleep.Wait()
	})
	// The leader of this test's process group may have exited already (under go
	// test ./... it often has): its record is then refused for that alone.
	started := func(pid int) uint64 {
		start, _, err := procStat(pid)
		if err != nil {
			if pid == syscall.Getpgrp() {
				return 1
			}
			t.Fatal(err)
		}
		return start
	}
	self, sleepPid := syscall.Getpgrp(), sleep.Process.Pid
	for _, tc := range []struct {
		name string
		rec  pidRecord
		want bool
	}{
		{"ours", pidRecord{"c", sleepPid, started(sleepPid)}, true},
		{"pid reused", pidRecord{"c", sleepPid, started(sleepPid) + 1}, false},
		{"no start time recorded", pidRecord{"c", sleepPid, 0}, false},
		{"pid 1, right start time", pidRecord{"c", 1, started(1)}, false},
		{"our own group, right start time", pidRecord{"c", self, started(self)}, false},
		{"no such process", pidRecord{"c", 999_999_999, 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.rec.running(); got != tc.want {
				t.Errorf("running() = %v, want %v", got, tc.want)
			}
		})
	}
}

// RecordProcess writes the start time that readPidFile reads back; a line of the
// old two-field format reads with none.
func TestPidFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, PidFile), []byte("old "+strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := RecordProcess(dir, "self", os.Getpid()); err != nil {
		t.Fatal(err)
	}
	recs, err := readPidFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	start, _, _ := procStat(os.Getpid())
	want := []pidRecord{{"old", os.Getpid(), 0}, {"self", os.Getpid(), start}}
	if len(recs) != 2 || recs[0] != want[0] || recs[1] != want[1] {
		t.Errorf("read back %+v, want %+v", recs, want)
	}
}
