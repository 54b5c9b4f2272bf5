package scale

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// counters maps "name{label=value,...}" (only the labels a reading asks for) to
// the summed value of a component's counters and histogram sums and counts.
type counters map[string]float64

// scrape reads a component's /metrics and sums the named series by the given
// labels; an unreachable component gives an empty reading, logged once.
func scrape(t *testing.T, url, token string, series map[string][]string) counters {
	t.Helper()
	resp, err := get(url+"/metrics", token, 10*time.Second)
	if err != nil {
		t.Logf("metrics of %s: %v", url, err)
		return counters{}
	}
	defer resp.Body.Close()
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Logf("metrics of %s: %v", url, err)
		return counters{}
	}
	out := counters{}
	for name, labels := range series {
		for _, m := range families[name].GetMetric() {
			var key []string
			for _, want := range labels {
				for _, l := range m.GetLabel() {
					if l.GetName() == want {
						key = append(key, l.GetName()+"="+l.GetValue())
					}
				}
			}
			k := name + "{" + strings.Join(key, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[k] += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[k+"_sum"] += m.GetHistogram().GetSampleSum()
				out[k+"_count"] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// get reads a component's endpoint as the cluster admin.
func get(url, token string, timeout time.Duration) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the local control plane's own certificate
	return client.Do(req)
}

// saveProfile saves a processor profile of the component at url to path.
func saveProfile(t *testing.T, url, token, path string, d time.Duration) {
	resp, err := get(fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", url, int(d.Seconds())), token, d+30*time.Second)
	if err != nil {
		t.Logf("profile of %s: %v", url, err)
		return
	}
	defer resp.Body.Close()
	f, err := os.Create(path)
	if err != nil {
		t.Logf("profile of %s: %v", url, err)
		return
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		t.Logf("profile of %s: %v", url, err)
	}
}

// apiSeries are the API server's requests by kind, and the time they took.
var apiSeries = map[string][]string{
	"apiserver_request_total":            {"verb", "resource", "subresource"},
	"apiserver_request_duration_seconds": {"verb", "resource", "subresource"},
}

// schedulerSeries are the kube-scheduler's attempts by result.
var schedulerSeries = map[string][]string{"scheduler_schedule_attempts_total": {"result"}}

// logRequests logs the API requests made between two readings, the most frequent
// first, with the seconds they took in all (watches left out: they last).
func logRequests(t *testing.T, before, after counters) {
	t.Helper()
	type kind struct {
		key     string
		n, secs float64
	}
	var kinds []kind
	total := 0.0
	for k, v := range after {
		if !strings.HasPrefix(k, "apiserver_request_total{") || strings.Contains(k, "verb=WATCH") {
			continue
		}
		n := v - before[k]
		if n == 0 {
			continue
		}
		labels := strings.TrimSuffix(strings.TrimPrefix(k, "apiserver_request_total{"), "}")
		d := "apiserver_request_duration_seconds{" + labels + "}_sum"
		kinds = append(kinds, kind{labels, n, after[d] - before[d]})
		total += n
	}
	slices.SortFunc(kinds, func(a, b kind) int { return cmp.Compare(b.n, a.n) })
	t.Logf("  API requests: %.0f", total)
	for _, k := range kinds[:min(len(kinds), 14)] {
		t.Logf("    %6.0f  %6.1fs  %s", k.n, k.secs, k.key)
	}
	var attempts []string
	for k, v := range after {
		if r, ok := strings.CutPrefix(k, "scheduler_schedule_attempts_total{result="); ok {
			attempts = append(attempts, fmt.Sprintf("%s %.0f", strings.TrimSuffix(r, "}"), v-before[k]))
		}
	}
	slices.Sort(attempts)
	t.Logf("  kube-scheduler attempts: %s", strings.Join(attempts, ", "))
}

// logEvents logs the Events recorded so far by component and reason, the most
// frequent first: each is an API request, and at this scale there are thousands.
func logEvents(t *testing.T, ctx context.Context, kube client.Client) {
	t.Helper()
	events := &corev1.EventList{}
	if err := kube.List(ctx, events); err != nil {
		t.Logf("events: %v", err)
		return
	}
	counts := map[string]int{}
	for _, e := range events.Items {
		source := e.Source.Component
		if source == "" {
			source = e.ReportingController
		}
		counts[source+" "+e.Reason]++
	}
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(counts[b], counts[a]) })
	var out []string
	for _, k := range keys[:min(len(keys), 8)] {
		out = append(out, fmt.Sprintf("%s %d", k, counts[k]))
	}
	t.Logf("  events: %d objects; %s", len(events.Items), strings.Join(out, ", "))
}
