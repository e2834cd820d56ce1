package sim

import (
	"testing"

	"github.com/valyala/fasthttp"
)

var chatBody = []byte(`{"model":"gpt-sim","messages":[{"role":"user","content":"hello there"}]}`)

func benchmarkHandler(b *testing.B, o Options, uri string, header map[string]string, body []byte) {
	s := New(o)
	probe := newCtx("POST", uri, header, body)
	s.Handler(probe)
	if probe.Response.StatusCode() != 200 {
		b.Fatalf("status %d: %s", probe.Response.StatusCode(), probe.Response.Body())
	}
	b.SetBytes(int64(len(probe.Response.Body())))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := newCtx("POST", uri, header, body)
		for pb.Next() {
			ctx.Response.Reset()
			s.Handler(ctx)
			_ = ctx.Response.Body()
		}
	})
}

func BenchmarkHandlerChat(b *testing.B) {
	benchmarkHandler(b, Options{NoRecord: true}, "/v1/chat/completions",
		map[string]string{"Authorization": "Bearer k"}, chatBody)
}

func BenchmarkHandlerChatRecorded(b *testing.B) {
	benchmarkHandler(b, Options{RecordLimit: 1024}, "/v1/chat/completions",
		map[string]string{"Authorization": "Bearer k"}, chatBody)
}

func BenchmarkHandlerMessages(b *testing.B) {
	benchmarkHandler(b, Options{NoRecord: true}, "/v1/messages",
		map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01"},
		[]byte(`{"model":"claude-sim","max_tokens":64,"messages":[{"role":"user","content":"hello there"}]}`))
}

func BenchmarkHandlerChatStream(b *testing.B) {
	benchmarkHandler(b, Options{NoRecord: true}, "/v1/chat/completions",
		map[string]string{"Authorization": "Bearer k"},
		[]byte(`{"model":"gpt-sim","stream":true,"messages":[{"role":"user","content":"hello there"}]}`))
}

// BenchmarkLoopbackChat measures plain answers through a real socket and fasthttp client.
func BenchmarkLoopbackChat(b *testing.B) {
	s := startSim(b, Options{NoRecord: true})
	c := &fasthttp.HostClient{Addr: s.Addr(), MaxConns: 64}
	benchmarkClient(b, c, "http://"+s.Addr()+"/v1/chat/completions", chatBody)
}

// BenchmarkLoopbackChatStream measures 20-event SSE answers through a real socket.
func BenchmarkLoopbackChatStream(b *testing.B) {
	s := startSim(b, Options{NoRecord: true, StreamEvents: 20})
	c := &fasthttp.HostClient{Addr: s.Addr(), MaxConns: 64}
	benchmarkClient(b, c, "http://"+s.Addr()+"/v1/chat/completions",
		[]byte(`{"model":"gpt-sim","stream":true,"messages":[{"role":"user","content":"hello there"}]}`))
}

func benchmarkClient(b *testing.B, c *fasthttp.HostClient, url string, body []byte) {
	do := func(req *fasthttp.Request, resp *fasthttp.Response) int {
		if err := c.Do(req, resp); err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode() != 200 {
			b.Fatalf("status %d: %s", resp.StatusCode(), resp.Body())
		}
		return len(resp.Body())
	}
	newReq := func() *fasthttp.Request {
		req := fasthttp.AcquireRequest()
		req.Header.SetMethod("POST")
		req.SetRequestURI(url)
		req.Header.Set("Authorization", "Bearer "+testBetaKey)
		req.SetBody(body)
		return req
	}
	req, resp := newReq(), fasthttp.AcquireResponse()
	b.SetBytes(int64(do(req, resp)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, resp := newReq(), fasthttp.AcquireResponse()
		for pb.Next() {
			do(req, resp)
		}
	})
}
