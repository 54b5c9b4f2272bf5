package main

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/nodetailor/tailor/api/v1"
	"github.com/nodetailor/tailor/internal/testobj"
	"github.com/nodetailor/tailor/pkg/console"
	"github.com/nodetailor/tailor/pkg/inspect"
)

// Hostile text from the cluster: an event message, and a drifted NodeClaim's
// condition message. Names must be DNS names, so these are the fields a
// hostile user can fill with markup.
const (
	payloadImg    = `<img src=x onerror="window.__pwned=1;document.title='pwned'">`
	payloadScript = `<script>window.__pwned=2;document.title='pwned'</script>`
)

// consoleCluster is inspectCluster plus what the console shows beyond tailor
// cost: a drifted claim whose condition message is markup, and Tailor's events
// (one about the pending pod) whose messages are markup.
func consoleCluster(t *testing.T) {
	t.Helper()
	inspectCluster(t)
	nc := &v1.NodeClaim{}
	if err := kube.Get(t.Context(), client.ObjectKey{Name: "claim-inspect-b"}, nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue,
		Reason: "NodePoolDrifted", Message: "drifted: " + payloadScript, LastTransitionTime: metav1.Now()})
	if err := kube.Status().Update(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, e := range []*corev1.Event{
		{ObjectMeta: metav1.ObjectMeta{Name: "claim-inspect-a.launched", Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "NodeClaim", Name: "claim-inspect-a", APIVersion: "karpenter.sh/v1"},
			Type:           corev1.EventTypeNormal, Reason: "Launched", Message: "launched small.x " + payloadImg,
			Source: corev1.EventSource{Component: console.EventSource}, LastTimestamp: metav1.NewTime(now.Add(-time.Minute)), Count: 1},
		{ObjectMeta: metav1.ObjectMeta{Name: "gpu-job.2", Namespace: "cost-a"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "cost-a", Name: "gpu-job"},
			Type:           corev1.EventTypeWarning, Reason: "FailedScheduling", Message: "No NodePool can provision a node for this pod " + payloadScript,
			Source: corev1.EventSource{Component: console.EventSource}, LastTimestamp: metav1.NewTime(now.Add(time.Second)), Count: 2},
	} {
		createWithStatus(t, e)
	}
}

// startConsole runs tailor console against the test's API server on a free
// loopback port, priced as runInspect prices, until the test ends.
func startConsole(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	f := &consoleFlags{kubeconfig: kubeconfig, instanceTypes: "testdata/inspect/types.json", address: "127.0.0.1:0"}
	go func() {
		done <- runConsole(ctx, f, streams{in: strings.NewReader(""), out: io.Discard, err: io.Discard}, func(url string) { ready <- url })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("tailor console: %v", err)
		}
	})
	select {
	case url := <-ready:
		return url
	case err := <-done:
		t.Fatalf("tailor console: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("tailor console did not start within a minute")
	}
	return ""
}

func costOf(t *testing.T, by string) inspect.CostReport {
	t.Helper()
	var rep inspect.CostReport
	if err := json.Unmarshal([]byte(runInspect(t, "cost", "--by", by, "-o", "json")), &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// The console's model, read as the page reads it: each node priced as tailor
// cost prices it, the cost by namespace adding up to the total, the pending pod's
// reasons per NodePool, Tailor's events; served read-only, to loopback names only.
func TestConsoleModel(t *testing.T) {
	consoleCluster(t)
	url := startConsole(t)
	resp, err := http.Get(url + "api/model")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("GET /api/model: %s %v", resp.Status, resp.Header)
	}
	var m console.Model
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	cost := costOf(t, inspect.ByNamespace)
	if len(m.Nodes) != len(cost.Nodes) {
		t.Fatalf("nodes %+v, tailor cost has %+v", m.Nodes, cost.Nodes)
	}
	for _, want := range cost.Nodes {
		if i := slices.IndexFunc(m.Nodes, func(n console.Node) bool { return n.Node == want.Node }); i < 0 || m.Nodes[i].NodeLine != want {
			t.Errorf("node %s: %+v, tailor cost says %+v", want.Node, m.Nodes, want)
		}
	}
	states := map[string]string{}
	for _, n := range m.Nodes {
		states[n.Node] = n.State
	}
	if states["inspect-a"] != console.StateInitialized || states["inspect-b"] != console.StateDrifted || states["inspect-c"] != console.StateUnmanaged {
		t.Errorf("states %v", states)
	}
	if a := m.Nodes[slices.IndexFunc(m.Nodes, func(n console.Node) bool { return n.Node == "inspect-a" })]; a.CPURequested != 0.6 || a.CPUAllocatable != 2 || a.MemRequested != 1.125 {
		t.Errorf("inspect-a room: %+v", a)
	}
	if m.Totals.Totals != cost.Total || m.Totals.SpotNodes != 1 || !near(m.Totals.SpotShare, round4(0.175/0.39)) {
		t.Errorf("totals %+v, tailor cost says %+v", m.Totals, cost.Total)
	}
	sum := m.Cost.Idle.PerHour
	for _, l := range m.Cost.ByNamespace {
		sum += l.PerHour
	}
	if !near(sum, m.Totals.PerHour) || !slices.Equal(m.Cost.ByNamespace, cost.Lines) || m.Cost.Idle != cost.Idle {
		t.Errorf("by namespace %+v + idle %+v = $%.6f, total $%.6f; tailor cost says %+v", m.Cost.ByNamespace, m.Cost.Idle, sum, m.Totals.PerHour, cost.Lines)
	}
	if byPool := costOf(t, inspect.ByNodePool); !slices.Equal(m.Cost.ByNodePool, byPool.Lines) {
		t.Errorf("by NodePool %+v, tailor cost says %+v", m.Cost.ByNodePool, byPool.Lines)
	}
	if len(m.Pending) != 1 || m.Pending[0].Name != "gpu-job" || m.Pending[0].Plan != "no NodePool can launch a node for it" ||
		m.Pending[0].LastEvent == nil || !strings.Contains(m.Pending[0].LastEvent.Message, payloadScript) {
		t.Fatalf("pending %+v", m.Pending)
	}
	reasons := map[string]string{}
	for _, r := range m.Pending[0].Reasons {
		reasons[r.NodePool] = r.Reason
	}
	if !strings.Contains(reasons["gpu"], "nvidia.com/gpu=true:NoSchedule not tolerated") || !strings.Contains(reasons["general"], "accelerator") {
		t.Errorf("reasons %v", reasons)
	}
	if len(m.Decisions) != 3 || m.Decisions[0].Reason != "FailedScheduling" || m.Decisions[0].Category != "scheduling" ||
		m.Decisions[1].Reason != "FailedScheduling" || m.Decisions[2].Reason != "Launched" || m.Decisions[2].Category != "launch" ||
		m.Decisions[2].Kind != "NodeClaim" || m.Decisions[2].Name != "claim-inspect-a" {
		t.Errorf("decisions %+v", m.Decisions)
	}

	// Read-only, and only to the names of the address it listens on.
	post, err := http.Post(url+"api/model", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s", post.Status)
	}
	req, _ := http.NewRequest(http.MethodGet, url+"api/model", nil)
	req.Host = "rebound.example.com"
	other, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	other.Body.Close()
	if other.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("Host rebound.example.com: %s", other.Status)
	}
}

func round4(x float64) float64 { return math.Round(x*1e6) / 1e6 }

// chromium is Debian's, which hack/tools.sh installs (make tools, make test).
const chromium = "/usr/bin/chromium"

// The page in a real headless Chromium: a pending pod shows its reason, a node
// its tailor cost price, the cost by namespace adds up to the total, and markup
// in cluster text is shown as text, with no script run. A screenshot is kept in
// $TAILOR_TEST_ARTIFACTS (else the test's temporary directory).
func TestConsoleInBrowser(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s is missing (%v): hack/tools.sh chromium installs it (apt-get install -y chromium, as root); make test runs it first", chromium, err)
	}
	consoleCluster(t)
	url := startConsole(t)
	cost := costOf(t, inspect.ByNamespace)

	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1400, 1100))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ctx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(ctx)
	defer cancelTab()

	type page struct {
		Title, Status string
		Prices        map[string]string
		PriceValues   map[string]float64
		Total         string
		TotalValue    float64
		Namespaces    map[string]float64
		PendingPlan   string
		PendingWhy    []string
		PendingEvent  string
		DriftReason   string
		Messages      []string
		Images        int
		Scripts       int
		Pwned         any
	}
	const read = `(() => {
		const out = {Title: document.title, Status: document.getElementById("status").textContent, Prices: {}, PriceValues: {}, Namespaces: {}};
		for (const row of document.querySelectorAll("#node-rows tr[data-node]")) {
			const cell = row.querySelector("td.price");
			out.Prices[row.dataset.node] = cell.textContent;
			if (cell.dataset.value) out.PriceValues[row.dataset.node] = Number(cell.dataset.value);
		}
		const total = document.getElementById("total-hour");
		out.Total = total.textContent; out.TotalValue = Number(total.dataset.value);
		for (const row of document.querySelectorAll("#cost-namespace tbody tr[data-name]")) {
			out.Namespaces[row.dataset.name] = Number(row.querySelector("td.per-hour").dataset.value);
		}
		const card = document.querySelector('#pending-list [data-pod="cost-a/gpu-job"]');
		out.PendingPlan = card ? card.querySelector(".plan").textContent : "";
		out.PendingWhy = card ? [...card.querySelectorAll("li.reason")].map((li) => li.textContent) : [];
		out.PendingEvent = card && card.querySelector(".event .message") ? card.querySelector(".event .message").textContent : "";
		const drift = document.querySelector('#node-rows tr[data-node="inspect-b"] .state-cell .reason');
		out.DriftReason = drift ? drift.textContent : "";
		out.Messages = [...document.querySelectorAll("#decision-rows td.message")].map((td) => td.textContent);
		out.Images = document.querySelectorAll("img").length;
		out.Scripts = document.scripts.length;
		out.Pwned = window.__pwned === undefined ? null : window.__pwned;
		return out;
	})()`
	start := time.Now()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`body[data-ready="true"]`)),
		// onerror handlers fire after the image fails to load: give them the time.
		chromedp.Sleep(300*time.Millisecond),
	); err != nil {
		t.Fatalf("driving %s: %v", chromium, err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[page](read))
	if err != nil {
		t.Fatalf("reading the page: %v", err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	t.Logf("page loaded and read in %v", time.Since(start).Round(time.Millisecond))
	// A change in the cluster reaches the open page (a watch, then a pushed event).
	start = time.Now()
	createWithStatus(t, testobj.Pod("late-job", "100m", "128Mi", testobj.Namespace("cost-a"), testobj.NodeSelector("accelerator", "nvidia"), testobj.Unschedulable()))
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`#pending-list [data-pod="cost-a/late-job"]`))); err != nil {
		t.Fatalf("a new pending pod did not appear on the open page: %v", err)
	}
	t.Logf("a new pending pod appeared on the open page %v after it was created", time.Since(start).Round(time.Millisecond))
	dir := os.Getenv("TAILOR_TEST_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "console.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)

	if !strings.HasPrefix(got.Status, "live") {
		t.Errorf("status %q", got.Status)
	}
	for _, n := range cost.Nodes {
		if want := "$" + formatPrice(n.PerHour); got.Prices[n.Node] != want || got.PriceValues[n.Node] != n.PerHour {
			t.Errorf("node %s shows %q (%v), tailor cost says %s", n.Node, got.Prices[n.Node], got.PriceValues[n.Node], want)
		}
	}
	if got.Total != "$"+formatPrice(cost.Total.PerHour) || got.TotalValue != cost.Total.PerHour {
		t.Errorf("total %q (%v), tailor cost says %v", got.Total, got.TotalValue, cost.Total.PerHour)
	}
	sum := 0.0
	for _, v := range got.Namespaces {
		sum += v
	}
	if _, ok := got.Namespaces[inspect.IdleLine]; !ok || len(got.Namespaces) != 3 || !near(sum, got.TotalValue) {
		t.Errorf("cost by namespace %v adds up to $%.6f, the total is $%.6f", got.Namespaces, sum, got.TotalValue)
	}
	if got.PendingPlan != "no NodePool can launch a node for it" || !slices.ContainsFunc(got.PendingWhy, func(s string) bool {
		return strings.Contains(s, "NodePool gpu: taint nvidia.com/gpu=true:NoSchedule not tolerated") && strings.Contains(s, "to fit: ")
	}) {
		t.Errorf("pending pod: %q %q", got.PendingPlan, got.PendingWhy)
	}
	// Markup from the cluster is text on the page, and nothing of it ran.
	if !strings.Contains(got.PendingEvent, payloadScript) || got.DriftReason != "drifted: "+payloadScript ||
		!slices.ContainsFunc(got.Messages, func(s string) bool { return strings.Contains(s, payloadImg) }) {
		t.Errorf("markup not shown as text: event %q, drift %q, messages %q", got.PendingEvent, got.DriftReason, got.Messages)
	}
	if got.Images != 0 || got.Scripts != 1 || got.Pwned != nil || got.Title != "Tailor console" {
		t.Errorf("markup from the cluster became elements or ran: %d img, %d scripts, window.__pwned %v, title %q", got.Images, got.Scripts, got.Pwned, got.Title)
	}
}

func formatPrice(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }
