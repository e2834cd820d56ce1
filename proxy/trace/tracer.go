package trace

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/modelgate/gateway/proxy/config"
)

// SchemaURL pins the OpenTelemetry semantic conventions the spans follow:
// v1.37.0, the first with gen_ai.provider.name.
const SchemaURL = "https://opentelemetry.io/schemas/1.37.0"

// Counters count what does not reach the collector, and Log hears why (at
// most once per LogEvery). Each is required.
type Counters struct {
	Log *slog.Logger
	// Dropped counts spans dropped because the export queue was full.
	Dropped *metrics.Counter
	// Failed counts spans whose export failed (collector down or refusing).
	Failed *metrics.Counter
}

// Tracer makes the spans of calls and exports them in batches from a bounded
// queue. Safe for concurrent use; Shutdown ends it.
type Tracer struct {
	cfg    config.Tracing
	tp     *sdktrace.TracerProvider
	tracer oteltrace.Tracer
	prop   propagation.TraceContext
}

// New makes a Tracer exporting to the collector cfg names (or the
// environment's), which must have passed config validation. Nothing is
// dialled until the first export.
func New(cfg config.Tracing, c Counters) (*Tracer, error) {
	logTo(c.Log)
	exp, err := newExporter(cfg)
	if err != nil {
		return nil, err
	}
	q := &queue{max: int64(cfg.QueueSize), dropped: c.Dropped}
	counted := &countedExporter{SpanExporter: exp, q: q, failed: c.Failed}
	q.SpanProcessor = sdktrace.NewBatchSpanProcessor(counted,
		sdktrace.WithMaxQueueSize(cfg.QueueSize),
		sdktrace.WithMaxExportBatchSize(min(512, cfg.QueueSize)),
		sdktrace.WithExportTimeout(cfg.Timeout.D()))
	res, err := resource.New(context.Background(), resource.WithFromEnv(),
		resource.WithSchemaURL(SchemaURL),
		resource.WithAttributes(attribute.String("service.name", serviceName(cfg))))
	if err != nil {
		return nil, fmt.Errorf("cannot describe the traced service: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(q), sdktrace.WithResource(res)}
	if r := cfg.SampleRatio; r != nil {
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(*r))))
	} else if os.Getenv("OTEL_TRACES_SAMPLER") == "" {
		opts = append(opts, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	} // else the SDK reads OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
	tp := sdktrace.NewTracerProvider(opts...)
	return &Tracer{cfg: cfg, tp: tp,
		tracer: tp.Tracer("github.com/modelgate/gateway/proxy", oteltrace.WithSchemaURL(SchemaURL))}, nil
}

// Same reports whether the tracer was made from cfg, so that a reload to
// cfg keeps it.
func (t *Tracer) Same(cfg *config.Tracing) bool { return cfg != nil && reflect.DeepEqual(t.cfg, *cfg) }

// Shutdown exports the spans queued, within ctx, and ends the tracer; spans
// ended after it are dropped.
func (t *Tracer) Shutdown(ctx context.Context) error { return t.tp.Shutdown(ctx) }

// Flush exports the spans queued, within ctx.
func (t *Tracer) Flush(ctx context.Context) error { return t.tp.ForceFlush(ctx) }

func serviceName(cfg config.Tracing) string {
	if cfg.ServiceName != "" {
		return cfg.ServiceName
	}
	if s := os.Getenv("OTEL_SERVICE_NAME"); s != "" {
		return s
	}
	return "modelgate"
}

// protocol is the config's, else the environment's ("grpc" or http).
func protocol(cfg config.Tracing) string {
	p := cfg.Protocol
	if p == "" {
		p = cmpEnv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if p == "grpc" {
		return "grpc"
	}
	return "http"
}

// cmpEnv returns the first of the environment variables that is set.
func cmpEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// newExporter makes the OTLP exporter; what cfg leaves empty the exporter
// reads from the OTEL_EXPORTER_OTLP_* variables.
func newExporter(cfg config.Tracing) (sdktrace.SpanExporter, error) {
	ctx := context.Background()
	timeout := cfg.Timeout.D()
	if protocol(cfg) == "grpc" {
		opts := []otlptracegrpc.Option{otlptracegrpc.WithTimeout(timeout)}
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		}
		if len(cfg.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(cfg.Headers))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithTimeout(timeout)}
	if cfg.Endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(tracesURL(cfg.Endpoint)))
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	return otlptracehttp.New(ctx, opts...)
}

// tracesURL is the OTLP/HTTP traces URL of a collector's base URL: its path
// when it has one, else /v1/traces.
func tracesURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}

// queue bounds the spans between their end and their export: a span that
// would take it past max is dropped and counted, so the batch processor's
// own queue (of the same size) never fills and drops uncounted. A slow or
// unreachable collector never slows a call: ending a span never waits.
type queue struct {
	sdktrace.SpanProcessor
	pending atomic.Int64
	max     int64
	dropped *metrics.Counter
}

// OnEnd hands a sampled span to the batch processor, or drops it.
func (q *queue) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if q.pending.Add(1) > q.max {
		q.pending.Add(-1)
		q.dropped.Inc()
		return
	}
	q.SpanProcessor.OnEnd(s)
}

// countedExporter lets the queue know which spans left it, and counts those
// whose export failed.
type countedExporter struct {
	sdktrace.SpanExporter
	q      *queue
	failed *metrics.Counter
}

func (e *countedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	e.q.pending.Add(-int64(len(spans)))
	if err != nil {
		e.failed.Add(len(spans))
	}
	return err
}

// LogEvery is how often at most an export failure is logged.
var LogEvery = 10 * time.Second

// The SDK reports export failures to one process-wide handler: it logs to the
// logger of the last tracer made, throttled.
var (
	errLog     atomic.Pointer[slog.Logger]
	errLogged  atomic.Int64 // unix nanos of the last line
	errHandler sync.Once
)

func logTo(l *slog.Logger) {
	errLog.Store(l)
	errHandler.Do(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(logError)) })
}

func logError(err error) {
	now, last := time.Now().UnixNano(), errLogged.Load()
	if now-last < int64(LogEvery) || !errLogged.CompareAndSwap(last, now) {
		return
	}
	if l := errLog.Load(); l != nil {
		l.Warn("cannot export traces; spans are counted in gateway_trace_spans_failed_total", "err", err)
	}
}
