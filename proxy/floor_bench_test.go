package proxy

import (
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/rawio"
)

// BenchmarkServedChat is a chat completion as the harness sends one, over
// loopback, to the gateway as it is served (its listener, its client
// connections) and to fasthttp's own reverse proxy on the same socket layer
// (bench/cmd/floor's fasthttp-relay), in front of the same upstream. Besides
// ns/op it reports cpu-µs/op: the process's CPU time (client, proxy and
// upstream together) per call, so that the difference between the two is
// what the gateway's own work costs a call beyond fasthttp's.
func BenchmarkServedChat(b *testing.B) {
	b.Run("target=gateway", func(b *testing.B) {
		h := newHotBenchUpstream(b, Options{}, providerUpstream)
		ln := listenLoopback(b)
		srv := h.gw.NewServer()
		go srv.Serve(h.gw.Listener(ln))
		b.Cleanup(func() { srv.Shutdown() })
		servedChat(b, ln.Addr().String(), "/v1/router/beta/v1/chat/completions")
	})
	b.Run("target=fasthttp-relay", func(b *testing.B) {
		h := newHotBenchUpstream(b, Options{}, providerUpstream)
		up := h.gw.state.Load().deps["u1"].Addr()
		ln := listenLoopback(b)
		srv := fasthttpRelay(up)
		go srv.Serve(rawListener{ln})
		b.Cleanup(func() { srv.Shutdown() })
		servedChat(b, ln.Addr().String(), "/v1/router/beta/v1/chat/completions")
	})
}

func listenLoopback(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return ln
}

// fasthttpRelay is bench/cmd/floor's fasthttp-relay for a plain call: the
// client's request, pointed at the upstream up with its key, through a
// fasthttp client into the client's response.
func fasthttpRelay(up string) *fasthttp.Server {
	hc := &fasthttp.HostClient{Addr: up, MaxConns: 1 << 14, DisablePathNormalizing: true,
		Dial: func(addr string) (net.Conn, error) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return nil, err
			}
			return rawWrap(c), nil
		}}
	uri := "http://" + up + "/v1/chat/completions"
	return &fasthttp.Server{
		ReadBufferSize: 8 << 10,
		Handler: func(ctx *fasthttp.RequestCtx) {
			req := &ctx.Request
			req.SetRequestURI(uri)
			req.Header.SetHost(up)
			req.Header.Set("Authorization", "Bearer k")
			if err := hc.Do(req, &ctx.Response); err != nil {
				ctx.Error("upstream failed", fasthttp.StatusBadGateway)
			}
		},
	}
}

// rawListener gives a server the gateway's socket layer, as bench/cmd/floor does.
type rawListener struct{ net.Listener }

func (l rawListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return rawWrap(c), nil
}

func rawWrap(c net.Conn) net.Conn {
	if rc := rawio.Wrap(c); rc != nil {
		return rc
	}
	return c
}

// servedBody is the harness's chat body (bench/scenario): no session.
var servedBody = []byte(`{"model":"m","messages":[{"role":"user","content":"Write one paragraph about lighthouses."}]}`)

// providerUpstream answers hotAnswer with the headers OpenAI sends with
// every answer (as bench/sim does): a request id, its organisation, version
// and rate limits, and its front end's.
func providerUpstream(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.SetContentType("application/json")
	h.Set("x-request-id", "req_0123456789abcdef0123456789abcdef")
	for _, kv := range sim.BetaHeaders() {
		h.Add(kv[0], kv[1])
	}
	h.Set("cf-ray", "0123456789abcdef-SJC")
	ctx.Response.SetBodyRaw(hotAnswer)
}

// servedChat sends servedBody with openai-go's headers to path on addr from
// parallel clients, b.N times, and reports the process's CPU per call.
func servedChat(b *testing.B, addr, path string) {
	client := &fasthttp.HostClient{Addr: addr, MaxConns: 1024}
	b.ReportAllocs()
	b.SetBytes(int64(len(servedBody) + len(hotAnswer)))
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		hotRequest(req, servedBody)
		req.SetRequestURI("http://" + addr + path)
		for _, kv := range sdkHeaders {
			req.Header.Set(kv[0], kv[1])
		}
		for pb.Next() {
			if err := client.Do(req, resp); err != nil {
				b.Fatal(err)
			}
			if resp.StatusCode() != 200 {
				b.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// sdkHeaders are what openai-go sends besides the credentials, the type and
// the length (as bench/scenario sends them).
var sdkHeaders = [][2]string{
	{"User-Agent", "OpenAI/Go 3.8.1"}, {"Accept", "application/json"},
	{"X-Stainless-Lang", "go"}, {"X-Stainless-Package-Version", "3.8.1"},
	{"X-Stainless-Os", "Linux"}, {"X-Stainless-Arch", "x64"},
	{"X-Stainless-Runtime", "go"}, {"X-Stainless-Runtime-Version", "go1.26.0"},
	{"X-Stainless-Retry-Count", "0"}, {"X-Stainless-Timeout", "600"},
	{"Accept-Encoding", "gzip"},
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
