package config

import (
	"net/url"
	"strings"
	"time"
)

// Tracing sends OpenTelemetry traces of the calls to an OTLP collector. A
// field left empty takes the standard OTEL_EXPORTER_OTLP_* or
// OTEL_TRACES_SAMPLER* environment variable when one is set (see
// proxy/trace), else its default. Header values are secrets: they never
// reach a log line, a page or an error text.
type Tracing struct {
	// Endpoint is the collector's URL, such as http://127.0.0.1:4318 (http)
	// or http://127.0.0.1:4317 (grpc); empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	// or OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string `yaml:"endpoint"`
	// Protocol is "http" (OTLP/HTTP protobuf) or "grpc"; empty:
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL, else http.
	Protocol string `yaml:"protocol"`
	// SampleRatio is the share of calls traced, 0 to 1, where the client sent
	// no sampled parent; nil: OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG,
	// else 1.
	SampleRatio *float64 `yaml:"sample_ratio"`
	// Headers go with every export, such as a collector's API key.
	Headers map[string]string `yaml:"headers"`
	// ServiceName is the service.name of the spans; empty: OTEL_SERVICE_NAME,
	// else modelgate.
	ServiceName string `yaml:"service_name"`
	// Timeout bounds one export; default 10s.
	Timeout Duration `yaml:"timeout"`
	// QueueSize bounds the spans waiting for export; past it spans are
	// dropped and counted. Default 2048.
	QueueSize int `yaml:"queue_size"`
}

// ensureDefaults fills what has a default that no environment variable
// gives; a nil t stays nil (tracing off).
func (t *Tracing) ensureDefaults() {
	if t == nil {
		return
	}
	setDefault(&t.Timeout, 10*time.Second)
	if t.QueueSize == 0 {
		t.QueueSize = 2048
	}
}

// defaultProvider is the gen_ai.provider.name of a family, a well-known value
// of the OpenTelemetry GenAI semantic conventions.
func defaultProvider(fam string) string {
	switch fam {
	case "alpha":
		return "anthropic"
	case "beta":
		return "openai"
	case "gamma":
		return "gcp.gemini"
	}
	return ""
}

// maxQueueSize bounds tracing.queue_size: spans held in memory.
const maxQueueSize = 1 << 20

func (p *problems) tracing(t *Tracing) {
	if t == nil {
		return
	}
	if t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add("tracing.endpoint", "expected a URL such as http://127.0.0.1:4318, not %q", t.Endpoint)
		}
	}
	switch t.Protocol {
	case "", "http", "grpc":
	default:
		p.add("tracing.protocol", "expected http or grpc, not %q", t.Protocol)
	}
	if r := t.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		p.add("tracing.sample_ratio", "must be between 0 and 1")
	}
	for name, v := range t.Headers {
		if name == "" || strings.ContainsAny(name, " :\r\n") || strings.ContainsAny(v, "\r\n") {
			p.add("tracing.headers", "a header name must be a token and a value one line (header %q)", name)
		}
	}
	if d := t.Timeout.D(); d < 0 || d > 5*time.Minute {
		p.add("tracing.timeout", "must be between 0 (the default) and 5m")
	}
	if t.QueueSize < 0 || t.QueueSize > maxQueueSize {
		p.add("tracing.queue_size", "must be between 0 (the default, 2048) and %d", maxQueueSize)
	}
}
