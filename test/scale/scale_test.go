// Package scale measures Tailor on the local control plane at size: how fast 1,000
// pending pods become NodeClaims and running pods, and how much memory the
// controller holds at 5,000 pods on 500 nodes. It measures, it does not assert
// timings: run it with TAILOR_SCALE=1 and read the figures it logs.
package scale

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/api/v1alpha1"
	"github.com/nodetailor/tailor/internal/localcluster"
	"github.com/nodetailor/tailor/internal/testenv"
	"github.com/nodetailor/tailor/internal/testobj"
)

func TestScale(t *testing.T) {
	if os.Getenv("TAILOR_SCALE") == "" {
		t.Skip("a measurement, not a check: run with TAILOR_SCALE=1")
	}
	log.SetLogger(logr.Discard())
	tmp := t.TempDir()
	tailor := testenv.BuildTailor(t)
	ctx := t.Context()
	// The controller-manager's default client QPS (20) has the ReplicaSet controller
	// create 20 pods a second, so 1,000 pods would take 50s just to exist;
	// TAILOR_SCALE_QPS=0 keeps the defaults.
	qps := 200
	if v, err := strconv.Atoi(os.Getenv("TAILOR_SCALE_QPS")); err == nil {
		qps = v
	}
	t.Logf("controller-manager and scheduler client QPS: %d (0: their defaults)", qps)
	cluster, direct, stop, err := testenv.Start(localcluster.Options{Scheduler: true, ControllerManager: true, Kwok: true, KubeAPIQPS: qps})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	// The test watches instead of listing: listing thousands of pods twice a second
	// would cost the API server, which the measured controller needs.
	watched, err := cache.New(cluster.Config, cache.Options{Scheme: direct.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = watched.Start(ctx) }()
	kube, err := client.New(cluster.Config, client.Options{Scheme: direct.Scheme(), Cache: &client.CacheOptions{Reader: watched}})
	if err != nil {
		t.Fatal(err)
	}
	// A NodePool of the usual shape: current general-purpose, compute and memory types.
	np := testobj.NodePool("default", testobj.Requirement("karpenter.k8s.aws/instance-category", v1.NodeSelectorOpIn, "c", "m", "r"),
		testobj.Requirement("karpenter.k8s.aws/instance-generation", v1.NodeSelectorOpGt, "5"))
	// Real clusters run DaemonSets on every node (kube-proxy, a log agent).
	objs := []client.Object{&v1alpha1.SimNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, np}
	for _, ds := range testenv.SystemDaemonSets() {
		objs = append(objs, ds)
	}
	for _, o := range objs {
		if err := kube.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// TAILOR_SCALE_LOG keeps the controller's log at that path.
	logPath := filepath.Join(tmp, "tailor.log")
	if p := os.Getenv("TAILOR_SCALE_LOG"); p != "" {
		logPath = p
	}
	logFile, _ := os.Create(logPath)
	// TAILOR_SCALE_PPROF=127.0.0.1:6060 serves the controller's pprof there.
	// TAILOR_SCALE_ARGS adds controller flags, space-separated.
	args := append([]string{"controller", "--kubeconfig", cluster.Kubeconfig, "--leader-elect=false",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--pprof-bind-address", os.Getenv("TAILOR_SCALE_PPROF")},
		strings.Fields(os.Getenv("TAILOR_SCALE_ARGS"))...)
	ctrl := exec.Command(tailor, args...)
	ctrl.Stdout, ctrl.Stderr = logFile, logFile
	// TAILOR_SCALE_GOGC sets the controller's GOGC alone (the control plane keeps its own).
	if v := os.Getenv("TAILOR_SCALE_GOGC"); v != "" {
		ctrl.Env = append(os.Environ(), "GOGC="+v)
	}
	ctrl.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := ctrl.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ctrl.Process.Signal(syscall.SIGTERM); _ = ctrl.Wait() }()

	// 1,000 pods of mixed sizes at once.
	sizes := []struct{ cpu, mem string }{{"100m", "128Mi"}, {"250m", "512Mi"}, {"500m", "1Gi"}, {"1", "2Gi"}, {"1500m", "3Gi"}}
	for i, s := range sizes {
		if err := kube.Create(ctx, testobj.Deployment(fmt.Sprintf("mix-%d", i), 200, s.cpu, s.mem)); err != nil {
			t.Fatal(err)
		}
	}
	created := time.Now()
	pids := append(cluster.Pids(), ctrl.Process.Pid, os.Getpid())
	cpuBefore := cpuSeconds(pids)
	read := func() counters {
		c := scrape(t, cluster.Config.Host, cluster.Config.BearerToken, apiSeries)
		maps.Copy(c, scrape(t, cluster.SchedulerURL, cluster.Config.BearerToken, schedulerSeries))
		return c
	}
	metricsBefore := read()
	// TAILOR_SCALE_APIPROF=path saves a 25s processor profile of the API server
	// from here, for `go tool pprof`.
	if path := os.Getenv("TAILOR_SCALE_APIPROF"); path != "" {
		go saveProfile(t, cluster.Config.Host, cluster.Config.BearerToken, path, 25*time.Second)
	}
	firstClaim := waitFor(t, 2*time.Minute, func(ctx context.Context) bool {
		claims := &v1.NodeClaimList{}
		return kube.List(ctx, claims) == nil && len(claims.Items) > 0
	})
	allRunning := waitFor(t, 5*time.Minute, func(ctx context.Context) bool { return progress(t, ctx, kube) >= 1000 })
	claims := &v1.NodeClaimList{}
	_ = kube.List(ctx, claims)
	t.Logf("1000 pods: first NodeClaim %.1fs after the pods were created (batch window: idle 1s, max 10s); all running after %.1fs on %d nodes",
		firstClaim.Sub(created).Seconds(), allRunning.Sub(created).Seconds(), len(claims.Items))
	t.Logf("the ReplicaSet controller created the last pod %.1fs after the Deployments", lastPodCreated(ctx, kube).Sub(created).Seconds())
	t.Logf("controller resident memory at 1,000 pods: %d MiB", rssMiB(ctrl.Process.Pid))
	timeline(t, ctx, kube, created)
	cpuGrown := cpuSeconds(pids)
	logCPU(t, cpuBefore, cpuGrown)
	metricsGrown := read()
	logRequests(t, metricsBefore, metricsGrown)
	logEvents(t, ctx, direct)
	// TAILOR_SCALE_FIRST=1 stops after the first 1,000 pods (a quicker comparison).
	if os.Getenv("TAILOR_SCALE_FIRST") != "" {
		return
	}

	// Grow to 5,000 pods on about 500 nodes, the shape the target names: 4,000 pods of
	// 600m on 8-vCPU types (13 to a node) beside the first 180 or so.
	np2 := testobj.NodePool("small", testobj.Weight(10), testobj.TemplateLabels("pool", "small"),
		testobj.Requirement("karpenter.k8s.aws/instance-cpu", v1.NodeSelectorOpIn, "8"))
	if err := kube.Create(ctx, np2); err != nil {
		t.Fatal(err)
	}
	big := testobj.Deployment("big", 4000, "600m", "1Gi", testobj.Template(testobj.NodeSelector("pool", "small")))
	if err := kube.Create(ctx, big); err != nil {
		t.Fatal(err)
	}
	peak := 0
	grown := waitFor(t, 15*time.Minute, func(ctx context.Context) bool {
		peak = max(peak, rssMiB(ctrl.Process.Pid))
		return progress(t, ctx, kube) >= 5000
	})
	_ = kube.List(ctx, claims)
	t.Logf("5000 pods running on %d nodes after %.0fs; controller resident memory %d MiB (peak while growing: %d MiB)",
		len(claims.Items), grown.Sub(allRunning).Seconds(), rssMiB(ctrl.Process.Pid), peak)
	// One reading depends on where the collector is in its cycle: read for 30s more
	// while the controller keeps working (disruption passes every 10s).
	var readings []int
	for range 30 {
		time.Sleep(time.Second)
		readings = append(readings, rssMiB(ctrl.Process.Pid))
	}
	slices.Sort(readings)
	t.Logf("controller resident memory at 5,000 pods over the next 30s: min %d, median %d, max %d MiB (%s)",
		readings[0], readings[len(readings)/2], readings[len(readings)-1], rssSplit(ctrl.Process.Pid))
	t.Logf("the ReplicaSet controller created the last pod %.0fs after the 4,000 more were asked for", lastPodCreated(ctx, kube).Sub(allRunning).Seconds())
	timeline(t, ctx, kube, allRunning)
	logCPU(t, cpuGrown, cpuSeconds(pids))
	logRequests(t, metricsGrown, read())
}

var lastReport time.Time

// progress is running, logging the state every 15s.
func progress(t *testing.T, ctx context.Context, kube client.Client) int {
	n := running(ctx, kube)
	if time.Since(lastReport) > 15*time.Second {
		lastReport = time.Now()
		claims := &v1.NodeClaimList{}
		nodes := &corev1.NodeList{}
		_ = kube.List(ctx, claims)
		_ = kube.List(ctx, nodes)
		t.Logf("%s: %d pods running, %d NodeClaims, %d nodes", time.Now().Format("15:04:05"), n, len(claims.Items), len(nodes.Items))
		logStragglers(t, ctx, kube)
	}
	return n
}

// logStragglers logs the pods not running yet when only a few are left: what they
// wait for is what the phase's tail is made of.
func logStragglers(t *testing.T, ctx context.Context, kube client.Client) {
	pods := &corev1.PodList{}
	if kube.List(ctx, pods, client.InNamespace("default")) != nil {
		return
	}
	var left []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			left = append(left, p)
		}
	}
	if len(left) == 0 || len(left) > 10 {
		return
	}
	for _, p := range left {
		why := ""
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled {
				why = fmt.Sprintf("%s %s since %s: %s", c.Status, c.Reason, c.LastTransitionTime.Format("15:04:05"), c.Message)
			}
		}
		t.Logf("  not running: %s (created %s, node %q, nominated %q, deleting %v) scheduled=%s", p.Name, p.CreationTimestamp.Format("15:04:05"),
			p.Spec.NodeName, p.Status.NominatedNodeName, p.DeletionTimestamp != nil, why)
	}
}

func running(ctx context.Context, kube client.Client) int {
	pods := &corev1.PodList{}
	if kube.List(ctx, pods, client.InNamespace("default")) != nil {
		return 0
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, timeout time.Duration, cond func(context.Context) bool) time.Time {
	t.Helper()
	// Reads come from the test's informers: look twice a second.
	if err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		return cond(ctx), nil
	}); err != nil {
		t.Fatalf("not within %s", timeout)
	}
	return time.Now()
}

// lastPodCreated is the creation time of the newest pod (to the second).
func lastPodCreated(ctx context.Context, kube client.Client) time.Time {
	pods := &corev1.PodList{}
	var last time.Time
	if kube.List(ctx, pods, client.InNamespace("default")) == nil {
		for _, p := range pods.Items {
			if p.CreationTimestamp.After(last) {
				last = p.CreationTimestamp.Time
			}
		}
	}
	return last
}

// timeline logs when the steps from pending pod to running pod happened, in seconds
// after since (to the second, as the API server stamps them): the median, the 90th
// percentile and the last of the NodeClaims created, launched, registered and
// initialized, the Nodes created, ready and registered, and the pods created,
// scheduled and ready; and, for the steps that pace the phase, how many had
// happened by each second.
func timeline(t *testing.T, ctx context.Context, kube client.Client, since time.Time) {
	claims := &v1.NodeClaimList{}
	nodes := &corev1.NodeList{}
	pods := &corev1.PodList{}
	if kube.List(ctx, claims) != nil || kube.List(ctx, nodes) != nil || kube.List(ctx, pods, client.InNamespace("default")) != nil {
		return
	}
	steps := map[string][]time.Time{}
	from := since.Truncate(time.Second)
	// object records an object made in this phase: its creation and the conditions
	// that turned true, as "<kind> <condition>".
	object := func(kind string, created metav1.Time, conditions map[string]metav1.Time) {
		if created.Time.Before(from) {
			return
		}
		steps[kind+" created"] = append(steps[kind+" created"], created.Time)
		for c, at := range conditions {
			steps[kind+" "+strings.ToLower(c)] = append(steps[kind+" "+strings.ToLower(c)], at.Time)
		}
	}
	for _, nc := range claims.Items {
		conditions := map[string]metav1.Time{}
		for _, c := range nc.Status.Conditions {
			if c.Status == metav1.ConditionTrue {
				conditions[c.Type] = c.LastTransitionTime
			}
		}
		object("claim", nc.CreationTimestamp, conditions)
	}
	for _, n := range nodes.Items {
		conditions := map[string]metav1.Time{}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				conditions[string(c.Type)] = c.LastTransitionTime
			}
		}
		// When Tailor last wrote the Node: its registration (the Node's own
		// record; the claim records it after its launch writes).
		for _, m := range n.ManagedFields {
			if m.Manager == "tailor" && m.Operation == metav1.ManagedFieldsOperationUpdate && m.Subresource == "" && m.Time != nil {
				conditions["registered"] = *m.Time
			}
		}
		object("node", n.CreationTimestamp, conditions)
	}
	for _, p := range pods.Items {
		conditions := map[string]metav1.Time{}
		for _, c := range p.Status.Conditions {
			if c.Status == corev1.ConditionTrue && (c.Type == corev1.PodScheduled || c.Type == corev1.PodReady) {
				conditions[string(c.Type)] = c.LastTransitionTime
			}
		}
		object("pod", p.CreationTimestamp, conditions)
	}
	for _, step := range []string{"pod created", "claim created", "claim launched", "node created", "node ready", "node registered", "claim registered", "claim initialized", "pod podscheduled", "pod ready"} {
		times := steps[step]
		if len(times) == 0 {
			continue
		}
		slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
		at := func(q float64) float64 { return times[int(q*float64(len(times)-1))].Sub(since).Seconds() }
		t.Logf("  %-18s %5d  first %5.1fs  median %5.1fs  p90 %5.1fs  last %5.1fs", step, len(times), at(0), at(0.5), at(0.9), at(1))
	}
	// How many had happened by each second, for the steps that pace the phase.
	for _, step := range []string{"claim created", "node created", "node registered", "pod podscheduled"} {
		times := steps[step]
		var counts []string
		for s := 6; s <= 44; s += 2 {
			n := 0
			for _, at := range times {
				if at.Sub(since) < time.Duration(s)*time.Second {
					n++
				}
			}
			counts = append(counts, strconv.Itoa(n))
		}
		t.Logf("  by 6,8..44s: %-16s %s", step, strings.Join(counts, " "))
	}
}

// cpuSeconds reads the processor time each process has used so far, by name: the
// API server on the two cores is what every component waits for, so what it did
// in a phase varies less between runs than the phase's wall time.
func cpuSeconds(pids []int) map[string]float64 {
	out := map[string]float64{}
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The name is in parentheses and may hold spaces; fields follow it.
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		user, _ := strconv.ParseFloat(f[11], 64)
		system, _ := strconv.ParseFloat(f[12], 64)
		out[s[open+1:end]] += (user + system) / 100 // clock ticks, 100 a second on Linux
	}
	return out
}

func logCPU(t *testing.T, before, after map[string]float64) {
	var names []string
	for name := range after {
		names = append(names, name)
	}
	slices.Sort(names)
	var parts []string
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f", name, after[name]-before[name]))
	}
	t.Logf("  processor seconds: %s", strings.Join(parts, ", "))
}

// rssSplit says how much of the resident memory is the process's own (anonymous)
// and how much is its mapped binary (file).
func rssSplit(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return ""
	}
	var parts []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && (f[0] == "RssAnon:" || f[0] == "RssFile:") {
			kb, _ := strconv.Atoi(f[1])
			parts = append(parts, fmt.Sprintf("%s %d MiB", strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(f[0], "Rss"), ":")), kb/1024))
		}
	}
	return strings.Join(parts, ", ")
}

func rssMiB(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.Atoi(strings.Fields(line)[1])
			return kb / 1024
		}
	}
	return -1
}
