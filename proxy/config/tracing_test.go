package config

import (
	"strings"
	"testing"
	"time"
)

func TestTracingConfig(t *testing.T) {
	vars := env(map[string]string{"KEY_A": "a", "UP": "u"})
	cfg, err := Parse([]byte(minimalConfig), vars)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tracing != nil {
		t.Fatal("tracing is on by default")
	}
	if cfg.Upstreams[0].Provider != "openai" {
		t.Fatalf("provider %q, want openai from the beta family", cfg.Upstreams[0].Provider)
	}
	y := minimalConfig + `tracing: {endpoint: "http://127.0.0.1:4318", protocol: grpc, sample_ratio: 0.5, headers: {x-api-key: s}}
`
	y = strings.Replace(y, `api_key: "${UP}"}`, `api_key: "${UP}", provider: azure.ai.openai}`, 1)
	if cfg, err = Parse([]byte(y), vars); err != nil {
		t.Fatal(err)
	}
	tr := cfg.Tracing
	if tr.Endpoint != "http://127.0.0.1:4318" || tr.Protocol != "grpc" || *tr.SampleRatio != 0.5 ||
		tr.Headers["x-api-key"] != "s" || tr.Timeout.D() != 10*time.Second || tr.QueueSize != 2048 {
		t.Fatalf("tracing %+v", tr)
	}
	if cfg.Upstreams[0].Provider != "azure.ai.openai" {
		t.Fatalf("provider %q", cfg.Upstreams[0].Provider)
	}
	f := func(tracing, field string) {
		t.Helper()
		_, err := Parse([]byte(minimalConfig+"tracing: "+tracing+"\n"), vars)
		if err == nil || !strings.Contains(err.Error(), field+":") {
			t.Fatalf("tracing %s: error %v, want one naming %s", tracing, err, field)
		}
	}
	f(`{endpoint: "127.0.0.1:4318"}`, "tracing.endpoint")
	f(`{protocol: udp}`, "tracing.protocol")
	f(`{sample_ratio: 1.5}`, "tracing.sample_ratio")
	f(`{sample_ratio: lots}`, "tracing.sample_ratio")
	f(`{headers: {"a b": x}}`, "tracing.headers")
	f(`{timeout: 1h}`, "tracing.timeout")
	f(`{queue_size: -1}`, "tracing.queue_size")
	f(`{enabled: true}`, "tracing.enabled")
}
