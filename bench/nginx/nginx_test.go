package nginx

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/bench/load"
)

func TestConfigRender(t *testing.T) {
	c := Config{Listen: "127.0.0.1:8081", Upstream: "127.0.0.1:9000", Dir: "/tmp/x", WorkerProcesses: 1, KeepAlive: 256, WorkerConnections: 4096, RlimitNofile: 8192}
	text := string(c.Render())
	for _, want := range []string{
		"daemon off;", "worker_processes 1;", "pid /tmp/x/nginx.pid;", "error_log /tmp/x/error.log warn;",
		"access_log off;", "worker_connections 4096;", "worker_rlimit_nofile 8192;",
		"server 127.0.0.1:9000;", "keepalive 256;", "proxy_http_version 1.1;",
		`proxy_set_header Connection "";`, "proxy_buffering off;", "proxy_request_buffering off;",
		"listen 127.0.0.1:8081", "proxy_temp_path /tmp/x/temp/proxy;", "client_body_temp_path /tmp/x/temp/client_body;",
	} {
		if !strings.Contains(text, want) {
			t.Fatalf("config lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "{") != strings.Count(text, "}") {
		t.Fatalf("unbalanced braces:\n%s", text)
	}
	c.WorkerProcesses = 0
	if !strings.Contains(string(c.Render()), "worker_processes auto;") {
		t.Fatal("WorkerProcesses 0 did not render auto")
	}
	if strings.Contains(text, "sessions") {
		t.Fatalf("a session server without sessions:\n%s", text)
	}
}

// TestConfigRenderSessions shows the session-affinity server: its own
// upstream block hashed by x-session-id, its own listen, the same proxy
// settings, and everything before it the text of a config without it.
func TestConfigRenderSessions(t *testing.T) {
	c := Config{Listen: "127.0.0.1:8081", Upstream: "127.0.0.1:9000", Dir: "/tmp/x", WorkerProcesses: 1, KeepAlive: 256, WorkerConnections: 4096, RlimitNofile: 8192}
	plain := c.Render()
	c.SessionsListen, c.Sessions = "127.0.0.1:8082", []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	text := string(c.Render())
	head := plain[:len(plain)-len("}\n")]
	if !strings.HasPrefix(text, string(head)) {
		t.Fatalf("the config with sessions does not start with the one without:\n%s", text)
	}
	sessions := text[len(head):]
	for _, want := range []string{
		"upstream sessions {\n        hash $http_x_session_id consistent;\n        server 127.0.0.1:9001;\n        server 127.0.0.1:9002;\n        keepalive 256;",
		"listen 127.0.0.1:8082 backlog=4096;", "proxy_pass http://sessions;", "proxy_http_version 1.1;",
		`proxy_set_header Connection "";`, "proxy_buffering off;", "proxy_request_buffering off;", "proxy_read_timeout 1h;",
	} {
		if !strings.Contains(sessions, want) {
			t.Fatalf("session server lacks %q:\n%s", want, sessions)
		}
	}
	if strings.Count(text, "{") != strings.Count(text, "}") || !strings.HasSuffix(text, "    }\n}\n") {
		t.Fatalf("unbalanced braces:\n%s", text)
	}
}

// TestConfigRenderGolden pins the text of a config without sessions: the
// reference proxy of every scenario but affinity, whose figures stay
// comparable across runs only while this text does not change.
func TestConfigRenderGolden(t *testing.T) {
	c := Config{Listen: "127.0.0.1:8081", Upstream: "127.0.0.1:9000", Dir: "/tmp/x", WorkerProcesses: 2, KeepAlive: 256, WorkerConnections: 4096, RlimitNofile: 8192}
	file := filepath.Join("testdata", "main.conf")
	if *update {
		if err := os.WriteFile(file, c.Render(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Render(); !bytes.Equal(got, want) {
		t.Fatalf("config differs from %s:\n%s", file, got)
	}
}

var update = flag.Bool("update", false, "rewrite testdata/main.conf")

func TestVersionCompare(t *testing.T) {
	f := func(v [3]int, want bool) {
		t.Helper()
		if atLeast(v, 1, 19, 5) != want {
			t.Fatalf("atLeast(%v, 1.19.5) != %v", v, want)
		}
	}
	f([3]int{1, 22, 1}, true)
	f([3]int{1, 19, 5}, true)
	f([3]int{1, 19, 4}, false)
	f([3]int{1, 18, 9}, false)
	f([3]int{2, 0, 0}, true)
	if got := string(lastLines([]byte("a\nb\nc\nd\n"), 2)); got != "c\nd" {
		t.Fatalf("lastLines = %q", got)
	}
}

func TestStartRefusesNonLoopbackUpstream(t *testing.T) {
	_, err := Start(Options{Binary: "/nonexistent", Upstream: "10.0.0.1:80"})
	if !errors.Is(err, load.ErrNotLoopback) {
		t.Fatalf("Start error %v, want ErrNotLoopback", err)
	}
	_, err = Start(Options{Binary: "/nonexistent", Upstream: "127.0.0.1:80", Sessions: []string{"127.0.0.1:81", "10.0.0.1:80"}})
	if !errors.Is(err, load.ErrNotLoopback) {
		t.Fatalf("Start with a remote session upstream: %v, want ErrNotLoopback", err)
	}
}

// upstream is a trivial fasthttp server: "/" echoes the path and method and
// reports the Connection header nginx sent; "/sse" streams 5 events.
func upstream(t *testing.T) (addr string, conns *atomic.Int64) {
	t.Helper()
	return serve(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) == "/sse" {
			ctx.SetContentType("text/event-stream")
			ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
				for i := range 5 {
					fmt.Fprintf(w, "event: delta\ndata: {\"i\":%d}\n\n", i)
					_ = w.Flush()
				}
			})
			return
		}
		fmt.Fprintf(ctx, "%s %s conn=%q body=%s", ctx.Method(), ctx.RequestURI(), ctx.Request.Header.Peek("Connection"), ctx.PostBody())
	})
}

// named is a fasthttp server that answers every request with its name.
func named(t *testing.T, name string) (addr string, conns *atomic.Int64) {
	t.Helper()
	return serve(t, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString(name) })
}

// serve serves h on a loopback port until the test ends, counting the
// connections that sent a request.
func serve(t *testing.T, h fasthttp.RequestHandler) (addr string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = new(atomic.Int64)
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if ctx.ConnRequestNum() == 1 {
				conns.Add(1)
			}
			h(ctx)
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		// Serve may not have registered ln yet, so Shutdown alone may miss it.
		_ = srv.Shutdown()
		_ = ln.Close()
		<-done
	})
	return ln.Addr().String(), conns
}

func startOrSkip(t *testing.T, up string, sessions ...string) *Server {
	t.Helper()
	if _, err := Find(); err != nil {
		t.Skip(err)
	}
	s, err := Start(Options{Upstream: up, Sessions: sessions})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func TestNginxProxies(t *testing.T) {
	up, conns := upstream(t)
	s := startOrSkip(t, up)

	var req fasthttp.Request
	var resp fasthttp.Response
	req.SetRequestURI(s.URL() + "/v1/x?a=1")
	req.Header.SetMethod("POST")
	req.SetBodyString(`{"model":"m"}`)
	if err := fasthttp.DoTimeout(&req, &resp, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	want := `POST /v1/x?a=1 conn="" body={"model":"m"}`
	if resp.StatusCode() != 200 || string(resp.Body()) != want {
		t.Fatalf("status %d body %q, want %q", resp.StatusCode(), resp.Body(), want)
	}
	if !bytes.Contains(resp.Header.Peek("Server"), []byte("nginx")) {
		t.Fatalf("answered by %q, not nginx", resp.Header.Peek("Server"))
	}

	// Many requests over few client connections reuse upstream connections,
	// and SSE comes through event by event.
	r, err := load.Run(context.Background(), &load.Spec{URL: s.URL() + "/"}, load.Options{Connections: 4, MaxRequests: 400})
	if err != nil || r.OK != 400 {
		t.Fatalf("err=%v ok=%d errors=%v", err, r.OK, r.Errors)
	}
	if n := conns.Load(); n > 8 {
		t.Fatalf("nginx opened %d upstream connections for 4 client connections: no keep-alive", n)
	}
	r, err = load.Run(context.Background(), &load.Spec{URL: s.URL() + "/sse", Check: load.Check{SSE: true, Events: 5}}, load.Options{Connections: 2, MaxRequests: 20})
	if err != nil || r.OK != 20 || r.Events != 100 {
		t.Fatalf("sse: err=%v ok=%d events=%d errors=%v", err, r.OK, r.Events, r.Errors)
	}

	pids, err := s.PIDs()
	if err != nil || len(pids) != 2 {
		t.Fatalf("pids %v, %v: want master and one worker", pids, err)
	}
	if _, err := load.ReadProcs(pids...); err != nil {
		t.Fatal(err)
	}
}

// TestNginxSessions shows the session-affinity port: many session ids reach
// every one of four upstreams, each id always the same one, over kept-alive
// connections; the first port still sends everything to its one upstream.
func TestNginxSessions(t *testing.T) {
	main, _ := named(t, "main")
	var sessions []string
	var conns []*atomic.Int64
	for i := range 4 {
		addr, c := named(t, fmt.Sprintf("s%d", i))
		sessions, conns = append(sessions, addr), append(conns, c)
	}
	s := startOrSkip(t, main, sessions...)
	if s.SessionsAddr == "" || s.SessionsAddr == s.Addr || s.SessionsURL() != "http://"+s.SessionsAddr {
		t.Fatalf("addr %q, sessions addr %q, sessions URL %q", s.Addr, s.SessionsAddr, s.SessionsURL())
	}

	// 400 ids, each sent twice, the second time in reverse order so that a
	// rotation (round robin) cannot line up with the first pass. Each upstream
	// owns about a quarter of nginx's hash ring (160 points per server): even
	// at a tenth, the chance that one gets none of 400 ids is under 1e-18.
	const ids = 400
	picked := sessionPicks(t, s.SessionsURL(), ids, false)
	seen := map[string]int{}
	for id, name := range sessionPicks(t, s.SessionsURL(), ids, true) {
		if name != picked[id] {
			t.Fatalf("session %d went to %s, then to %s", id, picked[id], name)
		}
		seen[name]++
	}
	t.Logf("sessions per upstream: %v", seen)
	if len(seen) != 4 || seen["main"] != 0 {
		t.Fatalf("sessions reached %v, want s0 to s3", seen)
	}
	if got := sessionPicks(t, s.URL(), 20, false); strings.Join(got, "") != strings.Repeat("main", 20) {
		t.Fatalf("the first port sent sessions to %v, want main only", got)
	}

	// 4 client connections take at most 4 connections to each upstream when
	// nginx keeps them alive, where 400 requests would open ~400 otherwise.
	spec := &load.Spec{URL: s.SessionsURL() + "/", Mutate: load.NewSessionPool(ids, "k").HeaderMutator("x-session-id")}
	r, err := load.Run(context.Background(), spec, load.Options{Connections: 4, MaxRequests: 400})
	if err != nil || r.OK != 400 {
		t.Fatalf("err=%v ok=%d errors=%v", err, r.OK, r.Errors)
	}
	for i, c := range conns {
		if n := c.Load(); n > 8 {
			t.Fatalf("nginx opened %d connections to upstream %d: no keep-alive", n, i)
		}
	}
}

// sessionPicks sends one request with each of n session ids to url, from
// the last id down when reverse, and returns the name of the upstream that
// answered each, by id.
func sessionPicks(t *testing.T, url string, n int, reverse bool) []string {
	t.Helper()
	var req fasthttp.Request
	var resp fasthttp.Response
	names := make([]string, n)
	for j := range n {
		i := j
		if reverse {
			i = n - 1 - j
		}
		req.SetRequestURI(url + "/v1/chat/completions")
		req.Header.Set("x-session-id", fmt.Sprintf("bench-session-%d", i))
		if err := fasthttp.DoTimeout(&req, &resp, 5*time.Second); err != nil || resp.StatusCode() != 200 {
			t.Fatalf("session %d: %v, status %d", i, err, resp.StatusCode())
		}
		names[i] = string(resp.Body())
	}
	return names
}

func TestNginxStopRemovesEverything(t *testing.T) {
	up, _ := upstream(t)
	s := startOrSkip(t, up)
	pid := s.cmd.Process.Pid
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.Dir); !os.IsNotExist(err) {
		t.Fatalf("dir %s still there: %v", s.Dir, err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); !os.IsNotExist(err) {
		t.Fatalf("nginx %d still running: %v", pid, err)
	}
	if c, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s still accepts", s.Addr)
	}
}

func TestNginxBadUpstreamConfigFails(t *testing.T) {
	if _, err := Find(); err != nil {
		t.Skip(err)
	}
	// A port nginx cannot parse makes it exit: Start must say so, not hang.
	_, err := Start(Options{Upstream: "127.0.0.1:99999", StartTimeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "cannot start nginx") {
		t.Fatalf("Start with a bad upstream port: %v", err)
	}
}

// TestEnsureInstalls installs nginx when asked to by the environment; it is
// how the harness machine gets nginx, not part of the normal test run.
func TestEnsureInstalls(t *testing.T) {
	if os.Getenv("BENCH_NGINX_INSTALL") != "1" {
		t.Skip("set BENCH_NGINX_INSTALL=1 to let Ensure install nginx with apt-get")
	}
	path, err := Ensure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v, err := Version(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("nginx %d.%d.%d at %s", v[0], v[1], v[2], path)
}

// TestConfigRenderTLSAndLeastConn shows the TLS server (the same proxying
// as the first, with the certificate) and the least_conn server (its own
// block), after the text of a config without them.
func TestConfigRenderTLSAndLeastConn(t *testing.T) {
	c := Config{Listen: "127.0.0.1:8081", Upstream: "127.0.0.1:9000", Dir: "/tmp/x", WorkerProcesses: 1, KeepAlive: 256, WorkerConnections: 4096, RlimitNofile: 8192}
	plain := c.Render()
	c.TLSListen, c.CertFile, c.KeyFile = "127.0.0.1:8443", "/tmp/x/cert.pem", "/tmp/x/key.pem"
	c.LeastConnListen, c.LeastConn = "127.0.0.1:8083", []string{"127.0.0.1:9001", "127.0.0.1:9002"}
	text := string(c.Render())
	head := plain[:len(plain)-len("}\n")]
	if !strings.HasPrefix(text, string(head)) {
		t.Fatalf("the config with TLS does not start with the one without:\n%s", text)
	}
	added := text[len(head):]
	for _, want := range []string{
		"listen 127.0.0.1:8443 ssl backlog=4096;\n        ssl_certificate /tmp/x/cert.pem;\n        ssl_certificate_key /tmp/x/key.pem;",
		"proxy_pass http://backend;",
		"upstream leastconn {\n        least_conn;\n        server 127.0.0.1:9001;\n        server 127.0.0.1:9002;\n        keepalive 256;",
		"listen 127.0.0.1:8083 backlog=4096;", "proxy_pass http://leastconn;",
	} {
		if !strings.Contains(added, want) {
			t.Fatalf("config lacks %q:\n%s", want, added)
		}
	}
	if strings.Count(text, "{") != strings.Count(text, "}") {
		t.Fatalf("unbalanced braces:\n%s", text)
	}
}
