package proxy

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"

	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/accesslog"
	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/family"
)

// hotBench is a gateway on an in-memory listener in front of a minimal
// upstream on loopback that answers a fixed body, so what is measured is the
// gateway itself.
type hotBench struct {
	gw       *Gateway
	ln       *fasthttputil.InmemoryListener
	client   *fasthttp.HostClient
	upstream *fasthttp.Server
}

var (
	hotAnswer = []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there, this is a short answer of a few hundred bytes, which is about what a small chat completion returns to a caller."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":30,"total_tokens":39}}`)
	hotStream = []byte("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\" there\"}}]}\n\n" +
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11}}\n\ndata: [DONE]\n\n")
	hotBody = []byte(`{"model":"m","session_id":"session-0001","messages":[{"role":"user","content":"Say hello to the benchmark, briefly."}]}`)
)

// warmRequest returns a request of body and a response for h, released when
// t ends, after 100 calls that warm the pools a steady state reuses.
func (h *hotBench) warmRequest(t *testing.T, body []byte) (*fasthttp.Request, *fasthttp.Response) {
	t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	t.Cleanup(func() { fasthttp.ReleaseRequest(req); fasthttp.ReleaseResponse(resp) })
	hotRequest(req, body)
	for range 100 {
		h.do(t, req, resp)
	}
	return req, resp
}

func newHotBench(tb testing.TB) *hotBench {
	tb.Helper()
	return newHotBenchWith(tb, Options{})
}

// newHotBenchWith is newHotBench with the gateway's options opts (its
// Logger is set here).
func newHotBenchWith(tb testing.TB, opts Options) *hotBench {
	tb.Helper()
	return newHotBenchUpstream(tb, opts, hotUpstream)
}

// hotUpstream answers hotStream to a streamed call, hotAnswer to any other.
func hotUpstream(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType("application/json")
	if parse.Member(ctx.PostBody(), "stream") != nil {
		ctx.SetContentType("text/event-stream")
		ctx.Response.SetBodyRaw(hotStream)
		return
	}
	ctx.Response.SetBodyRaw(hotAnswer)
}

// newHotBenchUpstream is newHotBenchWith with the upstream's handler.
func newHotBenchUpstream(tb testing.TB, opts Options, handler fasthttp.RequestHandler) *hotBench {
	tb.Helper()
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	up := &fasthttp.Server{Handler: handler}
	go up.Serve(upLn)
	yaml := fmt.Sprintf(`
keys: [{id: bench, key: bench-key}]
upstreams:
  - {name: u1, family: beta, base_url: "http://%[1]s/v1", api_key: k}
  - {name: u2, family: beta, base_url: "http://%[1]s/v1", api_key: k}
models:
  - {id: m, upstreams: [u1, u2], fallbacks: [n]}
  - {id: n, upstreams: [{name: u1, model: provider-n}, {name: u2, model: provider-n}]}
`, upLn.Addr())
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	gw, err := New(cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	ln := fasthttputil.NewInmemoryListener()
	go gw.NewServer().Serve(ln)
	h := &hotBench{gw: gw, ln: ln, upstream: up, client: &fasthttp.HostClient{
		Addr: "gateway", Dial: func(string) (net.Conn, error) { return ln.Dial() }, MaxConns: 1024,
	}}
	tb.Cleanup(func() { ln.Close(); up.Shutdown() })
	return h
}

func (h *hotBench) do(tb testing.TB, req *fasthttp.Request, resp *fasthttp.Response) {
	if err := h.client.Do(req, resp); err != nil {
		tb.Fatal(err)
	}
	if resp.StatusCode() != 200 {
		tb.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
	}
}

func hotRequest(req *fasthttp.Request, body []byte) {
	req.Header.SetMethod("POST")
	req.SetRequestURI("http://gateway/v1/router/beta/v1/chat/completions")
	req.Header.Set("Authorization", "Bearer bench-key")
	req.Header.SetContentType("application/json")
	req.SetBodyRaw(body)
}

// BenchmarkProxiedRequest is a whole chat completion through the gateway:
// auth, peek, session splice, pick, forward, relay.
func BenchmarkProxiedRequest(b *testing.B) {
	b.SetBytes(int64(len(hotBody) + len(hotAnswer)))
	newHotBench(b).proxied(b, hotBody)
}

// BenchmarkProxiedRequestAccessLog is BenchmarkProxiedRequest with the access
// log on, to io.Discard: written by accesslog (text, json), and through
// slog's handlers as the gateway wrote it before (slog-text, slog-json).
//
//	go test ./proxy/ -run '^$' -bench ProxiedRequestAccessLog -benchmem
func BenchmarkProxiedRequestAccessLog(b *testing.B) {
	for _, bc := range []struct {
		name string
		log  *accesslog.Log
	}{
		{"off", nil},
		{"slog-text", accesslog.FromSlog(slog.New(slog.NewTextHandler(io.Discard, nil)))},
		{"text", accesslog.New(io.Discard, accesslog.Text)},
		{"slog-json", accesslog.FromSlog(slog.New(slog.NewJSONHandler(io.Discard, nil)))},
		{"json", accesslog.New(io.Discard, accesslog.JSON)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(hotBody) + len(hotAnswer)))
			newHotBenchWith(b, Options{AccessLog: bc.log}).proxied(b, hotBody)
		})
	}
}

// BenchmarkTokenUsage is BenchmarkProxiedRequest and BenchmarkProxiedStream
// (whose last chunk carries usage) with the reading of token usage on and
// off: its cost.
func BenchmarkTokenUsage(b *testing.B) {
	stream := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	for _, off := range []bool{false, true} {
		name := "on"
		if off {
			name = "off"
		}
		b.Run("plain/usage="+name, func(b *testing.B) {
			newHotBenchWith(b, Options{NoTokenUsage: off}).proxied(b, hotBody)
		})
		b.Run("stream/usage="+name, func(b *testing.B) {
			newHotBenchWith(b, Options{NoTokenUsage: off}).proxied(b, stream)
		})
	}
}

// BenchmarkProxiedStream is a streamed chat completion through the gateway.
func BenchmarkProxiedStream(b *testing.B) {
	newHotBench(b).proxied(b, []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
}

// proxied sends body through the gateway from parallel clients, b.N times.
func (h *hotBench) proxied(b *testing.B, body []byte) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		hotRequest(req, body)
		for pb.Next() {
			h.do(b, req, resp)
		}
	})
}

// BenchmarkDirect is the same request sent straight to the upstream: the floor.
func BenchmarkDirect(b *testing.B) {
	h := newHotBench(b)
	up := h.gw.state.Load().deps["u1"]
	client := &fasthttp.HostClient{Addr: up.Addr(), MaxConns: 1024}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		hotRequest(req, hotBody)
		req.SetRequestURI("http://" + up.Addr() + "/v1/chat/completions")
		for pb.Next() {
			if err := client.Do(req, resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPrepare builds and writes the upstream request of a chat
// completion as openai-go sends it: header filtering, URL, credentials, the
// request id and the length, then the head and body into the connection's
// buffer.
func BenchmarkPrepare(b *testing.B) {
	h := newHotBench(b)
	var ctx fasthttp.RequestCtx
	raw := "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n" +
		"User-Agent: OpenAI/Go 3.8.1\r\nAuthorization: Bearer bench-key\r\nContent-Type: application/json\r\n" +
		"Accept: application/json\r\nX-Stainless-Lang: go\r\nX-Stainless-Package-Version: 3.8.1\r\n" +
		"X-Stainless-Os: Linux\r\nX-Stainless-Arch: x64\r\nX-Stainless-Runtime: go\r\n" +
		"X-Stainless-Runtime-Version: go1.26.0\r\nX-Stainless-Retry-Count: 0\r\nX-Stainless-Timeout: 600\r\n" +
		"Idempotency-Key: stainless-go-retry-0a4c1b2e\r\nAccept-Encoding: gzip\r\nX-Session-Id: s-1\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(hotBody), hotBody)
	if err := ctx.Request.Read(bufio.NewReader(strings.NewReader(raw))); err != nil {
		b.Fatal(err)
	}
	c := h.gw.acquireCall(&ctx, family.Beta, epChat)
	dep := c.st.deps["u1"]
	w := bufio.NewWriter(io.Discard)
	var head []byte
	b.ReportAllocs()
	for b.Loop() {
		head = c.appendHead(head[:0], dep, "/chat/completions", len(hotBody))
		w.Write(head)
		w.Write(hotBody)
	}
	w.Flush()
}
