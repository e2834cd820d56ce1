package upstream

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
)

// probedUpstream answers GET /v1/models 200, or 503 while failing; it
// counts the probes and checks their credentials.
type probedUpstream struct {
	failing       atomic.Bool
	probes, wrong atomic.Int64
	addr          string
}

func newProbedUpstream(t *testing.T) *probedUpstream {
	t.Helper()
	u := &probedUpstream{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = ln.Addr().String()
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		u.probes.Add(1)
		if string(ctx.Path()) != "/v1/models" || !ctx.IsGet() || string(ctx.Request.Header.Peek("Authorization")) != "Bearer sk-probe" {
			u.wrong.Add(1)
			ctx.SetStatusCode(404)
			return
		}
		if u.failing.Load() {
			ctx.SetStatusCode(503)
			return
		}
		ctx.SetBodyString(`{"data":[]}`)
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return u
}

func newProbedDeployment(t *testing.T, u *probedUpstream, log *syncBuffer) *Deployment {
	t.Helper()
	hc := config.HealthCheck{Path: "/models", Interval: config.Duration(50 * time.Millisecond), Timeout: config.Duration(40 * time.Millisecond), Failures: 2}
	d := New(config.Upstream{Name: "beta-probed", Family: "beta", BaseURL: "http://" + u.addr + "/v1", APIKey: "sk-probe", MaxConns: 1, HealthCheck: hc},
		config.Timeouts{}, config.Health{Failures: 3, Cooldown: config.Duration(time.Hour)}, config.Limits{})
	d.SetLogger(slog.New(slog.NewTextHandler(log, nil)))
	t.Cleanup(d.StopProbes)
	return d
}

// syncBuffer is a bytes.Buffer safe for the prober's goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls cond every 5ms for up to 10s: generous, for a loaded machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("not within 10s: %s", what)
}

// TestProbeExcludesAndRestores: probes that fail twice in a row exclude the
// deployment before any call fails on it; once the upstream recovers, a probe
// ends the exclusion, an hour of cooldown notwithstanding; the log lines say
// so, and the probes stop with StopProbes.
func TestProbeExcludesAndRestores(t *testing.T) {
	u := newProbedUpstream(t)
	var log syncBuffer
	d := newProbedDeployment(t, u, &log)
	d.StartProbes()
	d.StartProbes() // a second start is a no-op
	waitFor(t, "a first probe", func() bool { p := d.LastProbe(); return p != nil && p.OK })
	if d.Excluded(time.Now().UnixNano()) {
		t.Fatal("excluded while its probes succeed")
	}

	u.failing.Store(true)
	waitFor(t, "exclusion after failed probes", func() bool { return d.Excluded(time.Now().UnixNano()) })
	if ok, failed, _ := d.Probes(); failed < 2 || ok < 1 {
		t.Fatalf("probes: %d ok, %d failed", ok, failed)
	}
	if p := d.LastProbe(); p.OK || p.Cause != "upstream answered 503" {
		t.Fatalf("last probe %+v", p)
	}

	u.failing.Store(false)
	waitFor(t, "back in service after a probe succeeded", func() bool { return !d.Excluded(time.Now().UnixNano()) })
	d.StopProbes()
	d.StopProbes() // a second stop is a no-op
	after := u.probes.Load()
	if u.wrong.Load() != 0 {
		t.Fatalf("%d probes without the deployment's path, method or credentials", u.wrong.Load())
	}
	text := log.String()
	for _, want := range []string{"deployment excluded after failed health probes", "probes_failed=2", "cause=\"upstream answered 503\"", "deployment back in service: its health probe succeeded"} {
		if !strings.Contains(text, want) {
			t.Errorf("the log does not say %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "sk-probe") {
		t.Fatalf("the log shows the key:\n%s", text)
	}
	time.Sleep(150 * time.Millisecond) // three intervals: no probe may come
	if n := u.probes.Load(); n != after {
		t.Fatalf("%d probes after StopProbes", n-after)
	}
}

// TestProbeKeepsRateLimit: a probe that succeeds does not end an exclusion
// for a rate limit, whose end the provider set.
func TestProbeKeepsRateLimit(t *testing.T) {
	u := newProbedUpstream(t)
	var log syncBuffer
	d := newProbedDeployment(t, u, &log)
	d.ExcludeFor(time.Hour)
	d.probeOnce(d.probe)
	if p := d.LastProbe(); p == nil || !p.OK {
		t.Fatalf("probe: %+v", p)
	}
	if !d.Excluded(time.Now().UnixNano()) {
		t.Fatal("a probe ended a rate limit's exclusion")
	}
	// An exclusion after failures in a row ends with the next probe.
	d2 := newProbedDeployment(t, u, &log)
	for range 3 {
		d2.Failed(StatusError(500))
	}
	if !d2.Excluded(time.Now().UnixNano()) {
		t.Fatal("not excluded after 3 failures")
	}
	d2.probeOnce(d2.probe)
	if d2.Excluded(time.Now().UnixNano()) {
		t.Fatal("a probe that succeeded left the deployment excluded")
	}
}
