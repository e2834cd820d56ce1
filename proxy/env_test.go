package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/store"
)

// The end-to-end fixture: a gateway on a real loopback socket, a real Pebble
// store on disk, and simulator deployments d1 and d2, each serving every
// family.
const (
	keyA = "sk-team-a-0123456789"
	keyB = "sk-team-b-9876543210"
)

type testEnv struct {
	t      testing.TB
	gw     *Gateway
	srv    *fasthttp.Server
	ln     net.Listener
	base   string // http://127.0.0.1:port
	sims   []*sim.Server
	store  *store.Pebble
	cfg    *config.Config
	dir    string
	logBuf *syncBuffer
	now    func() time.Time // the gateway's clock; nil: time.Now
}

// syncBuffer collects log output for tests that scan it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
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

// testConfigYAML is the fixture's config; %[1]s and %[2]s are the two
// simulators' addresses.
const testConfigYAML = `
keys:
  - {id: team-a, key: ` + keyA + `}
  - {id: team-b, sha256: %[3]s}
upstreams:
  - {name: d1-alpha, family: alpha, base_url: "http://%[1]s", api_key: up-alpha}
  - {name: d2-alpha, family: alpha, base_url: "http://%[2]s", api_key: up-alpha}
  - {name: d1-beta, family: beta, base_url: "http://%[1]s/v1", api_key: up-beta}
  - {name: d2-beta, family: beta, base_url: "http://%[2]s/v1", api_key: up-beta}
  - {name: d1-gamma, family: gamma, base_url: "http://%[1]s", api_key: up-gamma}
  - {name: d2-gamma, family: gamma, base_url: "http://%[2]s", api_key: up-gamma}
models:
  - id: chat-model
    upstreams: [d1-alpha, d2-alpha, d1-beta, d2-beta]
    reasoning: {supported_efforts: [low, medium, high, max], default_effort: medium, default_enabled: true}
  - id: plain-model
    upstreams: [d1-beta]
  - id: image-model
    image: true
    upstreams: [d1-beta, d2-beta, d1-gamma, d2-gamma]
  - id: text-gamma
    upstreams: [d1-gamma]
groups:
  - {name: one, upstreams: [d1-alpha, d1-beta, d1-gamma]}
  - {name: two, upstreams: [d2-alpha, d2-beta, d2-gamma]}
timeouts: {connect: 2s, first_byte: 10s, idle: 10s}
health: {failures: 2, cooldown: 300ms}
`

// newEnv starts two simulators and a gateway in front of them. edit, when not
// nil, may change the config YAML before it is parsed.
func newEnv(t testing.TB, edit func(yaml string) string) *testEnv {
	t.Helper()
	return newEnvAt(t, edit, nil)
}

// newEnvAt is newEnv with the gateway's clock now.
func newEnvAt(t testing.TB, edit func(yaml string) string, now func() time.Time) *testEnv {
	t.Helper()
	e := &testEnv{t: t, dir: t.TempDir(), logBuf: &syncBuffer{}, now: now}
	for _, name := range []string{"d1", "d2"} {
		s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: name, AlphaKey: "up-alpha", BetaKey: "up-beta", GammaKey: "up-gamma"})
		if err != nil {
			t.Fatal(err)
		}
		e.sims = append(e.sims, s)
		t.Cleanup(func() { s.Close() })
	}
	yaml := fmt.Sprintf(testConfigYAML, e.sims[0].Addr(), e.sims[1].Addr(), HashKey(keyB))
	if edit != nil {
		yaml = edit(yaml)
	}
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg
	e.start()
	return e
}

func (e *testEnv) start() {
	t := e.t
	log := slog.New(slog.NewJSONHandler(io.MultiWriter(e.logBuf), nil))
	durability, _ := store.ParseDurability(e.cfg.Store.Durability)
	st, err := store.OpenPebble(e.dir, store.PebbleOptions{Logger: store.SlogLogger(log), Durability: durability})
	if err != nil {
		t.Fatal(err)
	}
	e.store = st
	gw, err := New(e.cfg, Options{Store: st, Keys: st, Logger: log, Now: e.now})
	if err != nil {
		t.Fatal(err)
	}
	e.gw = gw
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.ln = ln
	e.base = "http://" + ln.Addr().String()
	e.srv = gw.NewServer()
	go e.srv.Serve(gw.Listener(ln))
	t.Cleanup(e.stop)
}

func (e *testEnv) stop() {
	if e.srv != nil {
		e.srv.Shutdown()
		e.srv = nil
	}
	if e.store != nil {
		e.store.Close()
		e.store = nil
	}
}

// restart stops the gateway and starts a new one on the same store directory.
func (e *testEnv) restart() {
	e.stop()
	e.start()
}

// sim returns the simulator of deployment d1 or d2.
func (e *testEnv) sim(name string) *sim.Server {
	switch name {
	case "d1":
		return e.sims[0]
	case "d2":
		return e.sims[1]
	}
	e.t.Fatalf("no simulator %q", name)
	return nil
}

// received returns every request the simulators saw, in simulator order.
func (e *testEnv) received() []sim.Request {
	var all []sim.Request
	for _, s := range e.sims {
		all = append(all, s.Requests()...)
	}
	return all
}

// resetSims forgets what the simulators recorded.
func (e *testEnv) resetSims() {
	for _, s := range e.sims {
		s.Reset()
	}
}

// do sends one raw request to the gateway and returns status, headers and body.
func (e *testEnv) do(method, path string, headers map[string]string, body string) (int, *fasthttp.ResponseHeader, []byte) {
	e.t.Helper()
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(e.base + path)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if body != "" {
		req.Header.SetContentType("application/json")
		req.SetBodyString(body)
	}
	if err := fasthttp.Do(req, resp); err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	var h fasthttp.ResponseHeader
	resp.Header.CopyTo(&h)
	return resp.StatusCode(), &h, append([]byte(nil), resp.Body()...)
}

func bearer(key string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + key}
}

// listenGateway serves a gateway for cfg and opts on a loopback socket until
// the test ends.
func listenGateway(tb testing.TB, cfg *config.Config, opts Options) (*Gateway, *fasthttp.Server, net.Listener) {
	tb.Helper()
	gw, err := New(cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := gw.NewServer()
	go srv.Serve(gw.Listener(ln))
	tb.Cleanup(func() { srv.Shutdown() })
	return gw, srv, ln
}

// dialGateway connects to e's gateway over TCP. The connection closes with
// the test, and a read or write on it that hangs fails after 30 s: a hung
// test fails, it does not time anything.
func dialGateway(t *testing.T, e *testEnv) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	return conn
}

// rawChat is a chat completion call with body as a client writes it, key's,
// with the header lines extra (each ending in CRLF).
func rawChat(key, extra, body string) string {
	return fmt.Sprintf("POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", key, extra, len(body), body)
}
