package load

import (
	"bufio"
	"context"
	"net"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
)

// benchWorker returns a worker whose client talks to an in-memory fasthttp
// server, to measure the generator's own cost per request.
func benchWorker(b *testing.B, check Check, h fasthttp.RequestHandler) *worker {
	b.Helper()
	ln := fasthttputil.NewInmemoryListener()
	srv := &fasthttp.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() {
		_ = srv.Shutdown()
		_ = ln.Close()
	})
	spec := &Spec{URL: "http://127.0.0.1:1/x", Check: check}
	c, err := newClient("127.0.0.1:1", 1, spec, &spec.Check, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	c.Dial = func(string) (net.Conn, error) { return ln.Dial() }
	return newWorker(c, spec, 10*time.Second)
}

func BenchmarkWorkerDoBuffered(b *testing.B) {
	w := benchWorker(b, Check{}, func(ctx *fasthttp.RequestCtx) { ctx.SetBodyString(`{"id":"x","object":"chat.completion"}`) })
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w.do(uint64(i), time.Now())
	}
	if w.ok != uint64(b.N) {
		b.Fatalf("ok %d of %d: %v", w.ok, b.N, w.errs)
	}
}

func BenchmarkWorkerDoSSE(b *testing.B) {
	const event = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"hi\"}}\n\n"
	w := benchWorker(b, Check{SSE: true, Events: 8}, func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("text/event-stream")
		ctx.SetBodyStreamWriter(func(bw *bufio.Writer) {
			for range 8 {
				_, _ = bw.WriteString(event)
				_ = bw.Flush()
			}
		})
	})
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		w.do(uint64(i), time.Now())
	}
	if w.ok != uint64(b.N) {
		b.Fatalf("ok %d of %d: %v", w.ok, b.N, w.errs)
	}
}

// BenchmarkRunClosedLoopback is the whole generator against a trivial
// loopback server: the ceiling of what it can measure on this machine.
func BenchmarkRunClosedLoopback(b *testing.B) {
	s := newTestServer(b)
	spec := &Spec{URL: s.URL + "/ok"}
	b.ResetTimer()
	r, err := Run(context.Background(), spec, Options{Connections: 8, MaxRequests: uint64(b.N), Duration: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	if r.OK != uint64(b.N) {
		b.Fatalf("ok %d of %d: %v", r.OK, b.N, r.Errors)
	}
	b.ReportMetric(r.RPS, "req/s")
	b.ReportMetric(float64(r.Latency.P99.Microseconds()), "p99-µs")
}

func BenchmarkHistogramRecord(b *testing.B) {
	h := NewHistogram()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.Record(time.Duration(i%100_000) * time.Microsecond)
	}
}
