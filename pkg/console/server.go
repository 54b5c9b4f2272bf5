package console

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodetailor/tailor/pkg/inspect"
	"github.com/nodetailor/tailor/pkg/scheduling"
)

//go:embed assets
var assets embed.FS

// Settle is how long the console waits after a change for more before it
// recomputes the page (a scale-up changes hundreds of pods at once); Refresh is
// how often it recomputes when nothing changed (ages, usage).
const (
	Settle  = 500 * time.Millisecond
	Refresh = 30 * time.Second
)

// Reader reads the cluster as inspect.Read does; Source reads it from informers.
type Reader interface {
	Read(ctx context.Context, opts inspect.Options) (*inspect.Cluster, []*corev1.Event, error)
	Changed() <-chan struct{}
	Notes() []string
}

// Console computes the page's model whenever the cluster changes and serves it.
type Console struct {
	reader  Reader
	catalog []*scheduling.InstanceType

	mu      sync.Mutex
	model   []byte // the latest model as JSON
	version int
	err     error
	wake    chan struct{} // closed and replaced on each new model
}

// New returns a console reading through reader; catalog, when set, prices every
// node (tailor's --instance-types).
func New(reader Reader, catalog []*scheduling.InstanceType) *Console {
	return &Console{reader: reader, catalog: catalog, wake: make(chan struct{})}
}

// Run recomputes the model on every change (after Settle) and every Refresh,
// until ctx ends. The first model is computed before it returns from its first
// pass, so callers may wait for Ready.
func (c *Console) Run(ctx context.Context) {
	tick := time.NewTicker(Refresh)
	defer tick.Stop()
	for {
		c.Refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-c.reader.Changed():
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(Settle):
		}
	}
}

// Refresh recomputes the model now.
func (c *Console) Refresh(ctx context.Context) {
	cl, events, err := c.reader.Read(ctx, inspect.Options{Catalog: c.catalog, Now: time.Now()})
	var body []byte
	if err == nil {
		cl.Notes = append(cl.Notes, c.reader.Notes()...)
		var m *Model
		if m, err = Build(cl, events, scheduling.Options{}); err == nil {
			body, err = json.Marshal(m)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.err = err
		return
	}
	c.model, c.err = body, nil
	c.version++
	close(c.wake)
	c.wake = make(chan struct{})
}

// latest is the newest model, its version, and a channel closed when a newer one
// is computed.
func (c *Console) latest() ([]byte, int, error, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.model, c.version, c.err, c.wake
}

// Handler serves the page, its assets, the model as JSON (/api/model) and as
// Server-Sent Events (/api/stream). Only GET and HEAD are served; the Host header
// must name the address listened on when that is a loopback one, so that a web
// page elsewhere cannot reach the console through a DNS name it points at
// 127.0.0.1 (DNS rebinding).
func (c *Console) Handler(listen net.Addr) http.Handler {
	static, _ := fs.Sub(assets, "assets")
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(static))
	mux.HandleFunc("GET /api/model", c.serveModel)
	mux.HandleFunc("GET /api/stream", c.serveStream)
	hosts := allowedHosts(listen)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if hosts != nil && !hosts[strings.ToLower(r.Host)] {
			http.Error(w, "the console answers only to the address it listens on", http.StatusMisdirectedRequest)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "the console is read-only", http.StatusMethodNotAllowed)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// allowedHosts are the Host headers a loopback listener answers to; nil (any)
// for another address, which the user asked for.
func allowedHosts(addr net.Addr) map[string]bool {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() {
		return nil
	}
	port := fmt.Sprint(tcp.Port)
	return map[string]bool{
		net.JoinHostPort(tcp.IP.String(), port): true, "localhost:" + port: true,
		"127.0.0.1:" + port: true, "[::1]:" + port: true,
	}
}

func (c *Console) serveModel(w http.ResponseWriter, _ *http.Request) {
	body, _, err, _ := c.latest()
	if body == nil {
		msg := "the console is still reading the cluster"
		if err != nil {
			msg = err.Error()
		}
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// serveStream sends the model as a Server-Sent Event now and on every change.
func (c *Console) serveStream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	sent := 0
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		body, version, err, wake := c.latest()
		if body != nil && version != sent {
			// JSON has no raw newlines, so the model is one data line.
			if _, err := fmt.Fprintf(w, "event: model\ndata: %s\n\n", body); err != nil {
				return
			}
			sent = version
		} else if err != nil && body == nil {
			msg, _ := json.Marshal(err.Error())
			if _, err := fmt.Fprintf(w, "event: failure\ndata: %s\n\n", msg); err != nil {
				return
			}
		}
		flusher.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-wake:
		case <-keepalive.C:
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
		}
	}
}
