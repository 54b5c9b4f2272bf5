package faults

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

func TestPick(t *testing.T) {
	for _, tc := range []struct {
		rate, draw, kind float64
		want             Fault
		ok               bool
	}{
		{rate: 0, draw: 0, kind: 0},
		{rate: 0.2, draw: 0.2, kind: 0},
		{rate: 0.2, draw: 0.5, kind: 0.9},
		{rate: 0.2, draw: 0.1, kind: 0, want: InternalError, ok: true},
		{rate: 0.2, draw: 0.1, kind: 0.5, want: Unavailable, ok: true},
		{rate: 0.2, draw: 0.1, kind: 0.99, want: Timeout, ok: true},
		{rate: 1, draw: 0.999, kind: 1, want: Timeout, ok: true},
	} {
		got, ok := Pick(tc.rate, tc.draw, tc.kind)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Pick(%v, %v, %v) = %q, %v; want %q, %v", tc.rate, tc.draw, tc.kind, got, ok, tc.want, tc.ok)
		}
	}
}

func TestResource(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/namespaces/default/pods/web-1/eviction":               "pods/eviction",
		"/api/v1/namespaces/default/pods":                              "pods",
		"/api/v1/namespaces/default":                                   "namespaces",
		"/api/v1/nodes/n1":                                             "nodes",
		"/apis/karpenter.sh/v1/nodeclaims/a/status":                    "nodeclaims/status",
		"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x": "leases",
		"/apis/tailor.sh/v1alpha1/siminstances":                        "siminstances",
		"/healthz":                                                     "other",
	} {
		if got := Resource(path); got != want {
			t.Errorf("Resource(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	if in, err := FromEnv(env(nil)); in != nil || err != nil {
		t.Errorf("without %s: got %v, %v; want no injector", EnvWriteRate, in, err)
	}
	in, err := FromEnv(env(map[string]string{EnvWriteRate: "0.15", EnvSeed: "7", EnvTimeout: "250ms"}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := in.Config(), (Config{WriteRate: 0.15, Seed: 7, TimeoutDelay: 250 * time.Millisecond}); got != want {
		t.Errorf("config %+v, want %+v", got, want)
	}
	for _, bad := range []map[string]string{
		{EnvWriteRate: "lots"}, {EnvWriteRate: "1.5"}, {EnvWriteRate: "0.1", EnvSeed: "-1"},
		{EnvWriteRate: "0.1", EnvTimeout: "soon"}, {EnvWriteRate: "0.1", EnvTimeout: "-1s"},
	} {
		if _, err := FromEnv(env(bad)); err == nil || !strings.Contains(err.Error(), "TAILOR_FAULT_") {
			t.Errorf("%v: got error %v, want one naming the variable", bad, err)
		}
	}
}

// fakeAPI answers ConfigMap reads and creates as an API server would, counting
// the creates that reached it.
func fakeAPI(t *testing.T, creates *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "default"}}
		switch r.Method {
		case http.MethodPost:
			creates.Add(1)
			if err := json.NewDecoder(r.Body).Decode(cm); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
		case http.MethodGet:
			w.Header().Set("Content-Type", "application/json")
		default:
			http.Error(w, "unexpected", http.StatusMethodNotAllowed)
			return
		}
		_ = json.NewEncoder(w).Encode(cm)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// With every write failing, a real client-go client sees 500s and 503s as the
// API server's errors, and timeouts as net errors; only the timed-out writes
// reached the server, and client-go retried none of them. Reads pass.
func TestClientSeesFaults(t *testing.T) {
	var creates atomic.Int64
	srv := fakeAPI(t, &creates)
	in, err := New(Config{WriteRate: 1, Seed: 3, TimeoutDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000}
	in.WrapConfig(cfg)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[Fault]int{}
	const writes = 60
	for range writes {
		_, err := cs.CoreV1().ConfigMaps("default").Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
		var netErr net.Error
		switch {
		case apierrors.IsInternalError(err):
			seen[InternalError]++
		case apierrors.IsServiceUnavailable(err):
			seen[Unavailable]++
		case errors.As(err, &netErr) && netErr.Timeout():
			seen[Timeout]++
		default:
			t.Fatalf("write answered %v, want an injected fault", err)
		}
	}
	for _, f := range Faults {
		if seen[f] == 0 {
			t.Errorf("no %s fault in %d writes: %v", f, writes, seen)
		}
		if got := testutil.ToFloat64(in.injected.WithLabelValues(http.MethodPost, "configmaps", string(f))); int(got) != seen[f] {
			t.Errorf("counted %v %s faults, the client saw %d", got, f, seen[f])
		}
	}
	if got := creates.Load(); got != int64(seen[Timeout]) {
		t.Errorf("%d creates reached the server, want only the %d timed out ones", got, seen[Timeout])
	}
	if _, err := cs.CoreV1().ConfigMaps("default").Get(t.Context(), "c", metav1.GetOptions{}); err != nil {
		t.Errorf("a read failed: %v", err)
	}
}

// A seeded injector fails about the rate asked for, the same writes every run.
func TestRate(t *testing.T) {
	count := func() int {
		var creates atomic.Int64
		srv := fakeAPI(t, &creates)
		in, err := New(Config{WriteRate: 0.15, Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		client := &http.Client{Transport: in.Wrap(http.DefaultTransport)}
		failed := 0
		for range 1000 {
			resp, err := client.Post(srv.URL+"/api/v1/namespaces/default/configmaps", "application/json", strings.NewReader(`{"metadata":{"name":"c"}}`))
			if err != nil {
				failed++
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode >= 500 {
				failed++
			}
		}
		return failed
	}
	first := count()
	if first < 120 || first > 180 {
		t.Errorf("%d of 1000 writes failed at rate 0.15, want about 150", first)
	}
	if again := count(); again != first {
		t.Errorf("same seed, %d then %d failures", first, again)
	}
}

// A timed-out write gives up when its request's context ends.
func TestTimeoutHonoursContext(t *testing.T) {
	reached := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case reached <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(srv.Close)
	// Seed 3 at rate 1: the first write that reaches the server is a timeout.
	in, err := New(Config{WriteRate: 1, Seed: 3, TimeoutDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	client := &http.Client{Transport: in.Wrap(http.DefaultTransport)}
	done := make(chan error, 1)
	go func() {
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, srv.URL+"/api/v1/nodes/n1", nil)
			resp, err := client.Do(req)
			if err != nil {
				done <- err
				return
			}
			_ = resp.Body.Close()
		}
	}()
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("no write reached the server")
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the write succeeded, want it to fail")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the timed-out write did not end with its context")
	}
}
