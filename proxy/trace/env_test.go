package trace

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/trace/tracetest"
)

func testCounters() Counters {
	set := metrics.NewSet()
	return Counters{Log: slog.New(slog.DiscardHandler), Dropped: set.NewCounter("d"), Failed: set.NewCounter("f")}
}

// TestEnvWhereConfigSilent: the OTEL_* variables give what the config leaves
// empty, and the config wins where both are set.
func TestEnvWhereConfigSilent(t *testing.T) {
	r := tracetest.NewReceiver()
	defer r.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.URL())
	t.Setenv("OTEL_SERVICE_NAME", "from-env")
	tr, err := New(config.Tracing{Timeout: config.Duration(5 * time.Second), QueueSize: 16}, testCounters())
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	var h fasthttp.RequestHeader
	var c Call
	tr.Start(&c, &h, "models", time.Now())
	c.End(&Outcome{Status: 200, End: time.Now()})
	if err := tr.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := r.Spans()
	if len(spans) != 1 || spans[0].Service != "from-env" || spans[0].Name != "models" {
		t.Fatalf("spans %+v", spans)
	}

	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	if protocol(config.Tracing{}) != "grpc" || protocol(config.Tracing{Protocol: "http"}) != "http" {
		t.Fatal("protocol: the environment's where the config is silent, else the config's")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
	if protocol(config.Tracing{}) != "http" {
		t.Fatal("protocol: the traces variable comes first")
	}
}

// TestSamplerFromEnv: without sample_ratio, OTEL_TRACES_SAMPLER decides;
// with it, the config does.
func TestSamplerFromEnv(t *testing.T) {
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	f := func(ratio *float64, sampled bool) {
		t.Helper()
		tr, err := New(config.Tracing{Endpoint: "http://127.0.0.1:1", Timeout: config.Duration(time.Second), QueueSize: 16, SampleRatio: ratio}, testCounters())
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Shutdown(context.Background())
		var h fasthttp.RequestHeader
		var c Call
		tr.Start(&c, &h, "x", time.Now())
		if got := c.server.SpanContext().IsSampled(); got != sampled {
			t.Fatalf("sampled %v, want %v", got, sampled)
		}
		c.End(&Outcome{End: time.Now()})
	}
	f(nil, false)
	one := 1.0
	f(&one, true)
}
