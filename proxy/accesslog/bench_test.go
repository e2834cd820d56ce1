package accesslog

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// BenchmarkLine is one access line of a call (24 attributes) written to
// io.Discard: through slog's handlers as the gateway wrote it before
// (slog-text, slog-json), and by a Log (text, json). Both lines are the same.
//
//	go test ./proxy/accesslog/ -run '^$' -bench Line -benchmem
func BenchmarkLine(b *testing.B) {
	attrs := callAttrs("req_0123456789abcdef0123456789abcdef", "team-a", "gpt-4o", "upstream: connection refused")
	for _, bc := range []struct {
		name string
		h    slog.Handler
	}{{"slog-text", slog.NewTextHandler(io.Discard, nil)}, {"slog-json", slog.NewJSONHandler(io.Discard, nil)}} {
		b.Run(bc.name, func(b *testing.B) {
			l := slog.New(bc.h)
			b.ReportAllocs()
			for b.Loop() {
				l.LogAttrs(context.Background(), slog.LevelInfo, "request", attrs...)
			}
		})
	}
	for _, bc := range []struct {
		name string
		f    Format
	}{{"text", Text}, {"json", JSON}} {
		b.Run(bc.name, func(b *testing.B) {
			l := New(io.Discard, bc.f)
			b.ReportAllocs()
			for b.Loop() {
				ln := l.Begin("request")
				writeCall(ln)
				ln.End()
			}
		})
	}
}

// writeCall adds callAttrs' attributes as proxy adds them, value by value.
func writeCall(ln *Line) {
	ln.String("request_id", "req_0123456789abcdef0123456789abcdef")
	ln.String("key_id", "team-a")
	ln.String("family", "beta")
	ln.String("endpoint", "chat")
	ln.String("model", "gpt-4o")
	ln.String("deployment", "")
	ln.Int("status", 502)
	ln.Duration("latency", 1234567*time.Nanosecond)
	ln.Int("bytes_in", 120)
	ln.Int("bytes_out", 0)
	ln.Bool("stream", true)
	ln.Duration("ttfb", 456*time.Microsecond)
	ln.String("session", "0123456789abcdef")
	ln.Int("attempts", 2)
	ln.Int("stale_retries", 1)
	ln.Int("input_tokens", 10)
	ln.Int("output_tokens", 20)
	ln.Int("cached_tokens", 0)
	ln.Int("reasoning_tokens", 0)
	ln.String("cost_usd", "0.000123")
	ln.String("reserved_usd", "0.01")
	ln.String("reason", "upstream_error")
	ln.String("error", "upstream: connection refused")
	ln.String("trace_id", "00f067aa0ba902b7")
}

// writeCall writes the same line as callAttrs.
func TestWriteCallIsCallAttrs(t *testing.T) {
	at := times[4]
	attrs := callAttrs("req_0123456789abcdef0123456789abcdef", "team-a", "gpt-4o", "upstream: connection refused")
	for _, f := range []Format{Text, JSON} {
		var buf bytes.Buffer
		ln := New(&buf, f).begin(at, "request")
		writeCall(ln)
		ln.End()
		if want := slogLine(t, f, at, "request", attrs); buf.String() != want {
			t.Fatalf("got  %q\nwant %q", buf.String(), want)
		}
	}
}
