package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/bench/sim"
)

// resetUpstream is a deployment d3 of every family: the simulator's answers,
// served on a loopback socket, with a count of the requests it read. Once
// resetting is set, a request that comes on a connection that carried one
// before is read, counted, and answered by resetting the connection: the
// worst a provider's idle close can do, since the request reached it.
type resetUpstream struct {
	sim       *sim.Server
	ln        net.Listener
	requests  atomic.Int64
	resetting atomic.Bool
	// warm, while not nil, holds each request until warm.n have come, so
	// that each of them has a connection of its own.
	warm atomic.Pointer[barrier]
}

type barrier struct {
	n       int
	mu      sync.Mutex
	arrived int
	all     chan struct{}
}

func (b *barrier) arrive() {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-time.After(30 * time.Second): // the test's Conns check then says why
	}
}

func newResetUpstream(t *testing.T) *resetUpstream {
	t.Helper()
	u := &resetUpstream{sim: sim.New(sim.Options{Name: "d3", AlphaKey: "up-alpha", BetaKey: "up-beta", GammaKey: "up-gamma"})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.ln = &connsListener{Listener: ln}
	srv := &fasthttp.Server{Handler: u.handle, Logger: quietLog{}, NoDefaultServerHeader: true, NoDefaultContentType: true,
		MaxRequestBodySize: 64 << 20}
	go srv.Serve(u.ln)
	t.Cleanup(func() { srv.Shutdown() })
	return u
}

type quietLog struct{}

func (quietLog) Printf(string, ...any) {}

func (u *resetUpstream) handle(ctx *fasthttp.RequestCtx) {
	u.requests.Add(1)
	if u.resetting.Load() && ctx.ConnRequestNum() > 1 {
		if tc, ok := ctx.Conn().(*net.TCPConn); ok {
			tc.SetLinger(0) // a reset, not a FIN
		}
		ctx.Conn().Close()
		return
	}
	if b := u.warm.Load(); b != nil {
		b.arrive()
	}
	u.sim.Handler(ctx)
}

// staleEnv is the fixture with deployments d3-alpha, d3-beta and d3-gamma
// on u, serving stale-model and stale-image; edit, when not nil, edits the
// config further.
func staleEnv(t *testing.T, u *resetUpstream, edit func(string) string) *testEnv {
	t.Helper()
	addr := u.ln.Addr().String()
	return newEnv(t, func(y string) string {
		y = strings.Replace(y, "upstreams:\n", "upstreams:\n"+
			"  - {name: d3-alpha, family: alpha, base_url: \"http://"+addr+"\", api_key: up-alpha}\n"+
			"  - {name: d3-beta, family: beta, base_url: \"http://"+addr+"/v1\", api_key: up-beta}\n"+
			"  - {name: d3-gamma, family: gamma, base_url: \"http://"+addr+"\", api_key: up-gamma}\n", 1)
		y = strings.Replace(y, "models:\n", "models:\n"+
			"  - {id: stale-model, upstreams: [d3-alpha, d3-beta]}\n"+
			"  - {id: stale-image, image: true, upstreams: [d3-beta, d3-gamma]}\n", 1)
		// idle connections are kept long enough that none is dropped first
		y = strings.Replace(y, "idle: 10s}", "idle: 10s, idle_conn: 10m}", 1)
		if edit != nil {
			y = edit(y)
		}
		return y
	})
}

// staleCall is one call of an endpoint, to be made on a warm pool.
type staleCall struct {
	method, path string
	headers      map[string]string
	body         string
}

const staleMessages = `{"model":"stale-model","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`

var (
	staleChat     = staleCall{"POST", "/v1/router/beta/v1/chat/completions", bearer(keyA), `{"model":"stale-model","messages":[{"role":"user","content":"hi"}]}`}
	staleCreate   = staleCall{"POST", "/v1/router/beta/v1/responses", bearer(keyA), `{"model":"stale-model","input":"hi"}`}
	staleMessage  = staleCall{"POST", "/v1/router/alpha/v1/messages", bearer(keyA), staleMessages}
	staleGenerate = staleCall{"POST", "/v1/router/gamma/v1beta/models/stale-image:generateContent",
		map[string]string{"x-gamma-api-key": keyA}, gammaImageBody}
)

// warmPool makes n calls w at once, each held by the upstream until all have
// come, so that the deployment keeps n idle connections; it returns the
// bodies.
func (u *resetUpstream) warmPool(t *testing.T, e *testEnv, dep string, n int, w staleCall) []string {
	t.Helper()
	u.warm.Store(&barrier{n: n, all: make(chan struct{})})
	defer u.warm.Store(nil)
	bodies := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			status, _, body := e.do(w.method, w.path, w.headers, w.body)
			if status != 200 {
				t.Errorf("warm call %d: %d %s", i, status, body)
			}
			bodies[i] = string(body)
		})
	}
	wg.Wait()
	if got := e.gw.state.Load().deps[dep].Conns(); got != n {
		t.Fatalf("%s keeps %d connections after the warm calls, want %d", dep, got, n)
	}
	return bodies
}

// staleCase is an endpoint's call on a pool whose every connection the
// upstream resets, and what must happen.
type staleCase struct {
	name string
	dep  string    // the deployment called
	warm staleCall // a call to dep that warms its pool
	// call is made once the pool is warm; created is the id of a response
	// that a warm call created, when there is one.
	call     func(created string) staleCall
	requests int64 // the requests that reach the upstream
	status   int
}

func fixed(c staleCall) func(string) staleCall { return func(string) staleCall { return c } }

// Every endpoint, its pool warm with idle connections that the upstream
// resets once a request reached it: a call that may be done twice is sent
// again once, on a new connection, and succeeds; a Responses create,
// compact or delete reached the provider once and is not sent again.
// Before, each call went on to the next pooled connection, each reset in
// turn: the upstream saw one request a connection.
func TestStaleConnectionResendByEndpoint(t *testing.T) {
	const warm = 4
	ownedID := func(created string) string {
		var v struct{ ID string }
		if err := json.Unmarshal([]byte(created), &v); err != nil || v.ID == "" {
			t.Fatalf("no response id in %q", created)
		}
		return v.ID
	}
	owned := func(method, suffix string) func(string) staleCall {
		return func(created string) staleCall {
			return staleCall{method, "/v1/router/beta/v1/responses/" + ownedID(created) + suffix, bearer(keyA), ""}
		}
	}
	cases := []staleCase{
		{"messages", "d3-alpha", staleMessage, fixed(staleMessage), 2, 200},
		{"chat", "d3-beta", staleChat, fixed(staleChat), 2, 200},
		{"images", "d3-beta", staleChat, fixed(staleCall{"POST", imagesPath, bearer(keyA), `{"model":"stale-image","prompt":"a cat"}`}), 2, 200},
		{"input_tokens", "d3-beta", staleChat, fixed(staleCall{"POST", "/v1/router/beta/v1/responses/input_tokens", bearer(keyA),
			`{"model":"stale-model","input":"hi"}`}), 2, 200},
		{"generateContent", "d3-gamma", staleGenerate, fixed(staleGenerate), 2, 200},
		{"responses get", "d3-beta", staleCreate, owned("GET", ""), 2, 200},
		{"responses input_items", "d3-beta", staleCreate, owned("GET", "/input_items"), 2, 200},
		{"responses create", "d3-beta", staleChat, fixed(staleCreate), 1, 502},
		{"responses continuation", "d3-beta", staleCreate, func(created string) staleCall {
			return staleCall{"POST", "/v1/router/beta/v1/responses", bearer(keyA),
				`{"model":"stale-model","previous_response_id":"` + ownedID(created) + `","input":"again"}`}
		}, 1, 502},
		{"responses compact", "d3-beta", staleChat, fixed(staleCall{"POST", "/v1/router/beta/v1/responses/compact", bearer(keyA),
			`{"model":"stale-model","input":"hi"}`}), 1, 502},
		{"responses delete", "d3-beta", staleCreate, owned("DELETE", ""), 1, 502},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := newResetUpstream(t)
			e := staleEnv(t, u, nil)
			bodies := u.warmPool(t, e, tc.dep, warm, tc.warm)
			call := tc.call(bodies[0])
			u.resetting.Store(true)
			u.requests.Store(0)
			status, _, body := e.do(call.method, call.path, call.headers, call.body)
			if got := u.requests.Load(); got != tc.requests {
				t.Errorf("the upstream saw %d requests, want %d", got, tc.requests)
			}
			if status != tc.status {
				t.Fatalf("status %d, want %d: %s", status, tc.status, body)
			}
			if tc.status == 502 && strings.HasPrefix(call.path, "/v1/router/beta/") {
				assertBetaError(t, status, body, 502)
			}
			dep := e.gw.state.Load().deps[tc.dep]
			if got, want := dep.Stats.StaleRetries(), uint64(tc.requests-1); got != want {
				t.Errorf("stale_connection retries %d, want %d", got, want)
			}
			// A failed call has let go of the deployment before its answer; a
			// relayed stream may still be closing.
			if got := dep.InFlight(); tc.status != 200 && got != 0 {
				t.Errorf("%d calls still in flight", got)
			}
			// The resend found no pooled connection to go on: the idle ones,
			// as old as the stale one, were closed for a new one.
			if got := dep.Conns(); tc.requests == 2 && got != 1 {
				t.Errorf("%d connections after the resend, want the one dialled for it", got)
			}
		})
	}
}

// The resend is a retry like any other: retry.attempts of 1 turns it off,
// and a spent retry budget refuses it.
func TestStaleConnectionResendBounds(t *testing.T) {
	f := func(t *testing.T, edit func(string) string, spend int, refused uint64) {
		t.Helper()
		u := newResetUpstream(t)
		e := staleEnv(t, u, edit)
		u.warmPool(t, e, "d3-beta", 2, staleChat)
		dep := e.gw.state.Load().deps["d3-beta"]
		for range spend {
			dep.Budget.Spend(time.Now().Unix())
		}
		u.resetting.Store(true)
		u.requests.Store(0)
		status, _, body := e.do(staleChat.method, staleChat.path, staleChat.headers, staleChat.body)
		assertBetaError(t, status, body, 502)
		if got := u.requests.Load(); got != 1 {
			t.Fatalf("the upstream saw %d requests, want 1", got)
		}
		if got := dep.Stats.StaleRetries(); got != 0 {
			t.Fatalf("%d stale_connection retries, want 0", got)
		}
		if got := dep.Stats.BudgetExhausted(); got != refused {
			t.Fatalf("%d retries refused by the budget, want %d", got, refused)
		}
	}
	t.Run("attempts", func(t *testing.T) { f(t, noFailover, 0, 0) })
	// The budget's floor is budget_min_per_second over its 10 s window: 10
	// retries; far more are spent, so that a second passing does not free one.
	t.Run("budget", func(t *testing.T) {
		f(t, func(y string) string { return y + "retry: {budget_percent: 1, budget_min_per_second: 1}\n" }, 1000, 1)
	})
}

// An upstream that accepts the connection and never reads holds the call for
// timeouts.write at most: the client gets 504 in its family's shape, the
// connection is closed, the deployment has nothing in flight, and shutdown
// is not held. The body is larger than the sockets' buffers, so the write
// stops.
func TestUpstreamThatNeverReads(t *testing.T) {
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := sink.Accept()
			if err != nil {
				return
			}
			accepted <- c // held, never read
		}
	}()
	e := newEnv(t, func(y string) string {
		y = strings.Replace(y, "upstreams:\n", "upstreams:\n"+
			"  - {name: sink-beta, family: beta, base_url: \"http://"+sink.Addr().String()+"/v1\", api_key: up-beta}\n", 1)
		y = strings.Replace(y, "models:\n", "models:\n  - {id: sink-model, upstreams: [sink-beta]}\n", 1)
		return strings.Replace(y, "idle: 10s}", "idle: 10s, write: 1s}", 1)
	})
	t.Cleanup(func() { // before the gateway stops: a call still held ends
		sink.Close()
		for len(accepted) > 0 {
			(<-accepted).Close()
		}
	})
	body := `{"model":"sink-model","messages":[{"role":"user","content":"` + strings.Repeat("a", 24<<20) + `"}]}`
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod("POST")
	req.SetRequestURI(e.base + "/v1/router/beta/v1/chat/completions")
	req.Header.Set("Authorization", "Bearer "+keyA)
	req.Header.SetContentType("application/json")
	req.SetBodyString(body)
	// Bounded, so that a call held for ever fails the test rather than hangs it.
	if err := fasthttp.DoTimeout(req, resp, time.Minute); err != nil {
		t.Fatalf("the call did not end: %v", err)
	}
	assertBetaError(t, resp.StatusCode(), resp.Body(), 504)
	if !strings.Contains(string(resp.Body()), "did not answer in time") {
		t.Fatalf("not the upstream timeout: %s", resp.Body())
	}
	dep := e.gw.state.Load().deps["sink-beta"]
	if got := dep.InFlight(); got != 0 {
		t.Fatalf("%d calls in flight after the answer", got)
	}
	if got := dep.Conns(); got != 0 {
		t.Fatalf("%d connections kept after the timeout", got)
	}
	// The upstream's end sees the connection closed once it reads what the
	// gateway had written.
	c := <-accepted
	c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.Copy(io.Discard, c); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the upstream's connection was not closed: %v", err)
	}
	srv := e.srv
	e.srv = nil
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.ShutdownWithContext(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}
