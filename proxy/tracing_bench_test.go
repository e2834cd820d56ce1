package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/config"
)

// BenchmarkTracing is BenchmarkProxiedRequest and BenchmarkProxiedStream
// with tracing off and on at sample ratio 1, its spans exported to an
// OTLP/HTTP sink in the same process that reads and drops each export (its
// read counted in): the cost of a traced call.
//
//	go test ./proxy/ -run '^$' -bench Tracing -benchtime 20000x
func BenchmarkTracing(b *testing.B) {
	stream := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer sink.Close()
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		for _, body := range [][]byte{hotBody, stream} {
			kind := "plain"
			if len(body) == len(stream) && string(body) == string(stream) {
				kind = "stream"
			}
			b.Run(kind+"/tracing="+name, func(b *testing.B) {
				h := newHotBench(b)
				if on {
					traceTo(b, h.gw, sink.URL)
				}
				h.proxied(b, body)
			})
		}
	}
}

// traceTo reloads g with tracing on to endpoint, every call sampled.
func traceTo(tb testing.TB, g *Gateway, endpoint string) {
	tb.Helper()
	cfg := *g.Config()
	one := 1.0
	cfg.Tracing = &config.Tracing{Endpoint: endpoint, SampleRatio: &one, Timeout: config.Duration(5 * time.Second), QueueSize: 2048}
	if err := g.Reload(&cfg); err != nil {
		tb.Fatal(err)
	}
}
