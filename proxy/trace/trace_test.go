package trace

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/modelgate/gateway/proxy/config"
)

func attrMap(kv []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, a := range kv {
		m[string(a.Key)] = a.Value.Emit()
	}
	return m
}

func TestAttributeMapping(t *testing.T) {
	f := func(got []attribute.KeyValue, want map[string]string) {
		t.Helper()
		m := attrMap(got)
		if len(m) != len(want) {
			t.Fatalf("attributes %v, want %v", m, want)
		}
		for k, v := range want {
			if m[k] != v {
				t.Fatalf("%s = %q, want %q (all: %v)", k, m[k], v, m)
			}
		}
	}
	f(attemptAttrs(&Attempt{Operation: "chat", Provider: "openai", Model: "gpt", Deployment: "d1",
		Address: "api.example.com:443", N: 2}), map[string]string{
		KeyOperation: "chat", KeyProvider: "openai", KeyRequestModel: "gpt", KeyDeployment: "d1",
		KeyServerAddress: "api.example.com", KeyServerPort: "443", KeyAttempt: "2"})
	// A call that is no model call: no gen_ai operation, model or provider.
	f(attemptAttrs(&Attempt{Deployment: "d1", Address: "[::1]:8080", N: 1}), map[string]string{
		KeyDeployment: "d1", KeyServerAddress: "[::1]", KeyServerPort: "8080", KeyAttempt: "1"})
	o := &Outcome{ResponseModel: "gpt-2025", ResponseID: "chatcmpl-1", Usage: true, InputTokens: 12,
		OutputTokens: 34, Status: 200}
	f(outcomeAttrs(o), map[string]string{KeyResponseModel: "gpt-2025", KeyResponseID: "chatcmpl-1",
		KeyInputTokens: "12", KeyOutputTokens: "34", KeyStatus: "200"})
	f(outcomeAttrs(&Outcome{Status: 429}), map[string]string{KeyStatus: "429", KeyErrorType: "429"})
	f(outcomeAttrs(&Outcome{Status: 504, ErrorType: "upstream_timeout"}),
		map[string]string{KeyStatus: "504", KeyErrorType: "upstream_timeout"})
	f(outcomeAttrs(&Outcome{}), map[string]string{KeyErrorType: "_OTHER"})
	f(callAttrs(&Outcome{Operation: "generate_content", Provider: "gcp.gemini", RequestModel: "m",
		KeyID: "team-a", Deployment: "d2", Session: "00ff", Attempts: 2}), map[string]string{
		KeyOperation: "generate_content", KeyProvider: "gcp.gemini", KeyRequestModel: "m", KeyKeyID: "team-a",
		KeyDeployment: "d2", KeySession: "00ff", KeyAttempts: "2"})
}

func TestSpanName(t *testing.T) {
	if got := spanName("chat", "gpt", "x"); got != "chat gpt" {
		t.Fatal(got)
	}
	if got := spanName("chat", "", "x"); got != "chat" {
		t.Fatal(got)
	}
	if got := spanName("", "gpt", "files_list"); got != "files_list" {
		t.Fatal(got)
	}
}

func TestTracesURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":              "http://127.0.0.1:4318/v1/traces",
		"http://127.0.0.1:4318/":             "http://127.0.0.1:4318/v1/traces",
		"https://otel.example.com/custom/tr": "https://otel.example.com/custom/tr",
	} {
		if got := tracesURL(in); got != want {
			t.Errorf("tracesURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHeaderCarrier(t *testing.T) {
	var h fasthttp.RequestHeader
	h.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	h.Set("Tracestate", "congo=t61rcWkgMzE")
	h.Set("Authorization", "Bearer sk")
	c := Header{&h}
	if got := c.Get("Traceparent"); got != "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" {
		t.Fatalf("Get = %q", got)
	}
	if got := c.Get("missing"); got != "" {
		t.Fatalf("Get(missing) = %q", got)
	}
	keys := c.Keys()
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"Authorization", "Traceparent", "Tracestate"}) {
		t.Fatalf("Keys = %v", keys)
	}
	DropContext(&h)
	if h.Peek("Traceparent") != nil || h.Peek("Tracestate") != nil || h.Peek("Authorization") == nil {
		t.Fatalf("after DropContext: %s", h.Header())
	}
	a := HeadAppender{Head: []byte("GET / HTTP/1.1\r\n")}
	a.Set("traceparent", "00-x")
	if a.Get("traceparent") != "" || a.Keys() != nil || string(a.Head) != "GET / HTTP/1.1\r\ntraceparent: 00-x\r\n" {
		t.Fatalf("appender head %q", a.Head)
	}
}

// newTestTracer is a Tracer whose spans go to an in-memory exporter.
func newTestTracer(t *testing.T) (*Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return &Tracer{tp: tp, tracer: tp.Tracer("test")}, exp
}

// TestContinuesClientTrace: the server span is the child of the client's
// traceparent, the attempt the child of the server span, and the upstream
// head carries the attempt's context.
func TestContinuesClientTrace(t *testing.T) {
	tr, exp := newTestTracer(t)
	var h fasthttp.RequestHeader
	h.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	h.Set("Tracestate", "congo=t61rcWkgMzE")
	var c Call
	tr.Start(&c, &h, "chat_completions", time.Now())
	if h.Peek("Traceparent") != nil {
		t.Fatal("the client's traceparent stays in the request")
	}
	c.StartAttempt(&Attempt{Operation: "chat", Model: "m", Address: "h:1", N: 1})
	head := string(c.AppendContext(nil))
	attemptID := c.attempt.SpanContext().SpanID().String()
	want := "traceparent: 00-0af7651916cd43dd8448eb211c80319c-" + attemptID + "-01\r\n"
	if !strings.Contains(head, want) || !strings.Contains(head, "tracestate: congo=t61rcWkgMzE\r\n") {
		t.Fatalf("head %q, want %q and the tracestate", head, want)
	}
	traceID := string(c.AppendTraceID(nil))
	c.End(&Outcome{Operation: "chat", RequestModel: "m", Status: 200, FirstByte: time.Now(), End: time.Now()})
	if c.On() {
		t.Fatal("a call ended stays on")
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	attempt, server := spans[0], spans[1]
	if traceID != "0af7651916cd43dd8448eb211c80319c" || server.SpanContext.TraceID().String() != traceID {
		t.Fatalf("trace id %s, server's %s", traceID, server.SpanContext.TraceID())
	}
	if server.Parent.SpanID().String() != "b7ad6b7169203331" || !server.Parent.IsRemote() {
		t.Fatalf("server parent %v", server.Parent)
	}
	if attempt.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Fatal("the attempt is not the server span's child")
	}
	if server.Name != "chat m" || len(server.Events) != 1 || server.Events[0].Name != EventFirstByte {
		t.Fatalf("server span %q events %v", server.Name, server.Events)
	}
}

// TestOffDoesNothing: the zero Call is off, every method a no-op.
func TestOffDoesNothing(t *testing.T) {
	var c Call
	c.StartAttempt(&Attempt{})
	c.Retry("x", nil)
	if c.On() || c.AppendContext(nil) != nil || c.AppendTraceID(nil) != nil {
		t.Fatal("an off call did something")
	}
	c.End(&Outcome{})
}

// blockingExporter holds every export until release is closed.
type blockingExporter struct {
	release chan struct{}
	once    sync.Once
	got     chan int
}

func (e *blockingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.got <- len(spans)
	<-e.release
	return nil
}

func (e *blockingExporter) Shutdown(context.Context) error {
	e.once.Do(func() { close(e.release) })
	return nil
}

// TestQueueDropsWhenFull: with the exporter stuck, spans past the queue's
// bound are dropped and counted; ending a span never waits.
func TestQueueDropsWhenFull(t *testing.T) {
	const size = 4
	set := metrics.NewSet()
	dropped := set.NewCounter("dropped")
	exp := &blockingExporter{release: make(chan struct{}), got: make(chan int, 16)}
	q := &queue{max: size, dropped: dropped}
	q.SpanProcessor = sdktrace.NewBatchSpanProcessor(&countedExporter{SpanExporter: exp, q: q, failed: set.NewCounter("failed")},
		sdktrace.WithMaxQueueSize(size), sdktrace.WithMaxExportBatchSize(size))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(q))
	tr := tp.Tracer("test")
	for range size {
		_, s := tr.Start(context.Background(), "s")
		s.End()
	}
	<-exp.got // the first batch is being exported, and stays so
	for range 10 {
		_, s := tr.Start(context.Background(), "s")
		s.End()
	}
	if got := dropped.Get(); got != 10 {
		t.Fatalf("dropped %d spans, want 10", got)
	}
	exp.Shutdown(context.Background())
	tp.Shutdown(context.Background())
}

// TestNewFromConfig: a tracer made from the config exports to its endpoint
// and counts failed exports when nothing listens there.
func TestNewFromConfig(t *testing.T) {
	set := metrics.NewSet()
	c := Counters{Log: slog.New(slog.DiscardHandler), Dropped: set.NewCounter("d"), Failed: set.NewCounter("f")}
	cfg := config.Tracing{Endpoint: "http://127.0.0.1:1", Timeout: config.Duration(200 * time.Millisecond), QueueSize: 16}
	tr, err := New(cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Same(&cfg) {
		t.Fatal("not the same config")
	}
	var h fasthttp.RequestHeader
	var call Call
	tr.Start(&call, &h, "x", time.Now())
	call.End(&Outcome{Status: 200, End: time.Now()})
	tr.Flush(context.Background())
	if c.Failed.Get() != 1 {
		t.Fatalf("failed %d, want 1", c.Failed.Get())
	}
	tr.Shutdown(context.Background())
}

// TestSampled: a call is sampled when its tracer samples it, not otherwise,
// and never when off: what is read only for its spans is read only then.
func TestSampled(t *testing.T) {
	var off Call
	if off.Sampled() {
		t.Fatal("an off call is sampled")
	}
	f := func(sampler sdktrace.Sampler, want bool) {
		t.Helper()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler))
		defer tp.Shutdown(context.Background())
		tr := &Tracer{tp: tp, tracer: tp.Tracer("test")}
		var c Call
		tr.Start(&c, &fasthttp.RequestHeader{}, "chat_completions", time.Now())
		if !c.On() || c.Sampled() != want {
			t.Fatalf("on %v, sampled %v, want %v", c.On(), c.Sampled(), want)
		}
		c.End(&Outcome{End: time.Now()})
	}
	f(sdktrace.AlwaysSample(), true)
	f(sdktrace.NeverSample(), false)
}
