package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is one running component.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	err     error         // its exit error, set before done closes
}

// startProcess starts bin with args in its own process group, logging to dir/name.log.
// Unless detached, the kernel kills it when the calling process dies (parent-death
// signal); a detached process outlives its caller, in a session of its own.
func startProcess(name, bin string, args []string, dir string, detach bool) (*process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: %w (build it with `make tools`)", name, err)
	}
	logPath := dir + "/" + name + ".log"
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: creating log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process group to terminate, and kills it after grace.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// logTail returns the last n lines of the process's log.
func (p *process) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// logLines returns the last n lines of the process's log that contain s.
func (p *process) logLines(s string, n int) []string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return []string{fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)}
	}
	var out []string
	for line := range bytes.Lines(b) {
		if bytes.Contains(line, []byte(s)) {
			out = append(out, string(bytes.TrimRight(line, "\n")))
		}
	}
	return out[max(0, len(out)-n):]
}

// waitReady polls probe until it succeeds, the process exits, or timeout passes; the
// error then carries the last probe error and the tail of the process's log.
func (p *process) waitReady(ctx context.Context, timeout time.Duration, probe func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if p.exited() {
			return p.failure(fmt.Sprintf("exited before becoming ready (%v)", p.err))
		}
		if last = probe(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return p.failure(fmt.Sprintf("not ready within %s: %v", timeout, last))
		case <-p.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (p *process) failure(what string) error {
	return fmt.Errorf("%s %s\n--- last lines of %s ---\n%s", p.name, what, p.logPath, p.logTail(30))
}

// freePorts returns n distinct free loopback ports. Holding all listeners until every
// port is chosen keeps them distinct.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// PidFile lists, in a detached cluster's directory, one "name pid starttime" line
// per component. The start time (see startTime) tells our process from a later one
// that was given the same pid after ours exited: only ours are ever signalled.
const PidFile = "pids"

// pidRecord is one line of the pid file; start is 0 when the line has none (a
// file written before start times were recorded), and such a pid is never ours.
type pidRecord struct {
	name  string
	pid   int
	start uint64
}

// RecordProcess adds a process to a detached cluster's pid file, with its start
// time, so StopDetached ends it too. Call it right after starting the process.
func RecordProcess(dir, name string, pid int) error {
	start, _, err := procStat(pid)
	if err != nil {
		return fmt.Errorf("%s (pid %d) exited as it started: %w", name, pid, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, PidFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s %d %d\n", name, pid, start)
	return err
}

func readPidFile(dir string) ([]pidRecord, error) {
	data, err := os.ReadFile(filepath.Join(dir, PidFile))
	if err != nil {
		return nil, err
	}
	var out []pidRecord
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		pid, err := strconv.Atoi(f[1])
		if err != nil || pid <= 0 {
			continue
		}
		r := pidRecord{name: f[0], pid: pid}
		if len(f) > 2 {
			r.start, _ = strconv.ParseUint(f[2], 10, 64)
		}
		out = append(out, r)
	}
	return out, nil
}

// running says whether the record's pid still names the process we started, and
// it has not exited (a zombie has). Signalling the group -pid of pid 1, or of this
// process's own group, would reach far more than a component, so neither is ever
// taken for one, whatever the file says.
func (r pidRecord) running() bool {
	if r.pid <= 1 || r.pid == os.Getpid() || r.pid == syscall.Getpgrp() || r.start == 0 {
		return false
	}
	start, state, err := procStat(r.pid)
	return err == nil && start == r.start && state != 'Z'
}

// procStat reads a process's start time, in clock ticks since boot, and its state
// from /proc/PID/stat. A pid is reused only by a process started later, so pid and
// start time together name one process for as long as the machine runs.
func procStat(pid int) (start uint64, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name, field 2, is in parentheses and may itself hold spaces and
	// parentheses: the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	var fields []string
	if i >= 0 {
		fields = strings.Fields(string(b[i+1:]))
	}
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: unexpected format %q", pid, b)
	}
	// fields[0] is field 3 (state), so field 22 (starttime) is fields[19].
	start, err = strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: starttime: %w", pid, err)
	}
	return start, fields[0][0], nil
}

// Processes lists the components a detached cluster's pid file names, and whether
// each still runs.
func Processes(dir string) (map[string]bool, error) {
	recs, err := readPidFile(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, r := range recs {
		out[r.name] = r.running()
	}
	return out, nil
}

// StopDetached ends every process of a detached cluster that is still ours,
// newest first (each in its process group: SIGTERM, then SIGKILL after grace), and
// removes the directory. A pid that now names another process is left alone.
func StopDetached(dir string, grace time.Duration) error {
	recs, err := readPidFile(dir)
	if err != nil {
		return err
	}
	waitGone := func(r pidRecord, d time.Duration) {
		for deadline := time.Now().Add(d); r.running() && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
		}
	}
	for i := len(recs) - 1; i >= 0; i-- {
		r := recs[i]
		if !r.running() {
			continue
		}
		// Each component leads its own process group (its own session when detached).
		_ = syscall.Kill(-r.pid, syscall.SIGTERM)
		waitGone(r, grace)
		if r.running() {
			_ = syscall.Kill(-r.pid, syscall.SIGKILL)
			waitGone(r, 5*time.Second)
		}
	}
	return os.RemoveAll(dir)
}
