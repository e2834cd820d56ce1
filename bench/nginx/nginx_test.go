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
}

// upstream is a trivial fasthttp server: "/" echoes the path and method and
// reports the Connection header nginx sent; "/sse" streams 5 events.
func upstream(t *testing.T) (addr string, conns *atomic.Int64) {
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

func startOrSkip(t *testing.T, up string) *Server {
	t.Helper()
	if _, err := Find(); err != nil {
		t.Skip(err)
	}
	s, err := Start(Options{Upstream: up})
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
