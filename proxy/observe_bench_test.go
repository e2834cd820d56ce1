package proxy

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/accesslog"
	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/family"
)

// BenchmarkAccessLog serves chat completions through three gateways in front
// of the same two simulators on loopback: access log off, in text, and in JSON
// (to io.Discard: the cost measured is building and formatting the line). The
// modes take turns in blocks of 256 requests from 8 parallel clients, so that
// the load of a shared machine drifts over all three alike; b.N requests go
// through each. It reports each mode's time per request (ns-off, ns-text,
// ns-json) and the logging modes' ratios to off (x-text-off, x-json-off).
//
//	go test ./proxy/ -run '^$' -bench AccessLog -benchtime 20000x
func BenchmarkAccessLog(b *testing.B) {
	sims := make([]string, 2)
	for i := range sims {
		s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: fmt.Sprintf("d%d", i+1), AlphaKey: "up-alpha", BetaKey: "up-beta", GammaKey: "up-gamma", NoRecord: true})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		sims[i] = s.Addr()
	}
	modes := []struct {
		name   string
		access *accesslog.Log
		addr   string
		spent  time.Duration
	}{
		{name: "off"},
		{name: "text", access: accesslog.New(io.Discard, accesslog.Text)},
		{name: "json", access: accesslog.New(io.Discard, accesslog.JSON)},
		{name: "slog-json", access: accesslog.FromSlog(slog.New(slog.NewJSONHandler(io.Discard, nil)))},
	}
	for i := range modes {
		modes[i].addr = startBenchGateway(b, sims, Options{AccessLog: modes[i].access})
		benchChat(b, modes[i].addr, 256) // warm the connections and counters
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(256, b.N-done)
		for i := range modes {
			start := time.Now()
			benchChat(b, modes[i].addr, n)
			modes[i].spent += time.Since(start)
		}
		done += n
	}
	b.StopTimer()
	off := float64(modes[0].spent.Nanoseconds())
	for _, m := range modes {
		b.ReportMetric(float64(m.spent.Nanoseconds())/float64(b.N), "ns-"+m.name)
		if m.name != "off" {
			b.ReportMetric(float64(m.spent.Nanoseconds())/off, "x-"+m.name+"-off")
		}
	}
}

// benchChat sends n chat completions to the gateway at addr from 8 clients.
func benchChat(b *testing.B, addr string, n int) {
	const clients = 8
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for i := w; i < n; i += clients {
				req.Reset()
				req.Header.SetMethod("POST")
				req.SetRequestURI("http://" + addr + chatPath)
				req.Header.Set("Authorization", "Bearer "+keyA)
				req.SetBodyString(chatBody(""))
				if err := benchClient.Do(req, resp); err != nil || resp.StatusCode() != 200 {
					b.Errorf("%v %d", err, resp.StatusCode())
					return
				}
			}
		}()
	}
	wg.Wait()
}

var benchClient = &fasthttp.Client{MaxConnsPerHost: 64}

func startBenchGateway(b *testing.B, sims []string, opts Options) string {
	b.Helper()
	return serveGateway(b, fmt.Sprintf(testConfigYAML, sims[0], sims[1], HashKey(keyB)), opts)
}

// BenchmarkFinish measures what a call's end costs: counters and histograms
// alone, and with an access log line to io.Discard: in JSON, in text, and in
// JSON through slog's handler (as the gateway wrote it before accesslog).
func BenchmarkFinish(b *testing.B) {
	for _, mode := range []string{"off", "json", "text", "slog-json"} {
		b.Run(mode, func(b *testing.B) {
			var opts Options
			switch mode {
			case "json":
				opts.AccessLog = accesslog.New(io.Discard, accesslog.JSON)
			case "text":
				opts.AccessLog = accesslog.New(io.Discard, accesslog.Text)
			case "slog-json":
				opts.AccessLog = accesslog.FromSlog(slog.New(slog.NewJSONHandler(io.Discard, nil)))
			}
			g, c := finishFixture(b, opts)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				g.finish(c)
			}
		})
	}
}

// finishFixture returns a gateway (its deployments never called) and a
// finished chat call on it as finish sees one.
func finishFixture(tb testing.TB, opts Options) (*Gateway, *call) {
	tb.Helper()
	yaml := fmt.Sprintf(testConfigYAML, "127.0.0.1:1", "127.0.0.1:2", HashKey(keyB))
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		tb.Fatal(err)
	}
	g, err := New(cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	st := g.state.Load()
	ctx := &fasthttp.RequestCtx{}
	ctx.Response.SetBodyString(`{"id":"x","object":"chat.completion","choices":[]}`)
	start := time.Now()
	c := &call{g: g, st: st, ctx: ctx, family: family.Beta, ep: epChat, keyID: "team-a",
		model: st.models["chat-model"], dep: st.deps["d1-beta"], status: 200,
		start: start, firstByte: start.Add(time.Millisecond), reqID: []byte("req_0123456789abcdef0123456789abcdef"),
		body: bytes.Repeat([]byte("x"), 200), sessionHash: 42, hasSession: true}
	return g, c
}
