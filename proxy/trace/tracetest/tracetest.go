// Package tracetest reads back, for tests, the spans a gateway exported: from
// an in-process OTLP/HTTP receiver (Receiver) that decodes the export
// requests, or from a real Jaeger (Jaeger) started through scripts/jaeger.sh
// and read through its query API. Both give the same Span, so that one set of
// checks runs against either.
//
// When Jaeger cannot be had (the binary is not built and cannot be), a test
// asking for it is skipped, unless GATEWAY_REQUIRE_JAEGER=1 is set (CI sets
// it): then it fails.
package tracetest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one exported span, its ids in hex and its attribute values as
// strings.
type Span struct {
	TraceID, SpanID, ParentID string
	Name                      string
	Kind                      string // "server", "client", ...
	Service                   string
	Attrs                     map[string]string
	Events                    []string
}

// Receiver is an OTLP/HTTP collector in the test process: it keeps every span
// exported to it. Safe for concurrent use.
type Receiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []Span
}

// NewReceiver starts a Receiver; Close stops it.
func NewReceiver() *Receiver {
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.export))
	return r
}

// URL is the receiver's base URL, the tracing endpoint to configure.
func (r *Receiver) URL() string { return r.srv.URL }

// Close stops the receiver: exports to it then fail.
func (r *Receiver) Close() { r.srv.Close() }

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

func (r *Receiver) export(w http.ResponseWriter, req *http.Request) {
	b, err := io.ReadAll(req.Body)
	var m coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &m)
	}
	if err != nil || req.URL.Path != "/v1/traces" {
		http.Error(w, fmt.Sprintf("bad export to %s: %v", req.URL.Path, err), 400)
		return
	}
	var got []Span
	for _, rs := range m.ResourceSpans {
		service := anyString(attrValue(rs.GetResource().GetAttributes(), "service.name"))
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				got = append(got, fromOTLP(s, service))
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ = proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Write(b)
}

func fromOTLP(s *tracepb.Span, service string) Span {
	sp := Span{TraceID: fmt.Sprintf("%x", s.TraceId), SpanID: fmt.Sprintf("%x", s.SpanId),
		ParentID: fmt.Sprintf("%x", s.ParentSpanId), Name: s.Name, Service: service,
		Kind: kindName(s.Kind), Attrs: map[string]string{}}
	for _, kv := range s.Attributes {
		sp.Attrs[kv.Key] = anyString(kv.Value)
	}
	for _, e := range s.Events {
		sp.Events = append(sp.Events, e.Name)
	}
	return sp
}

func kindName(k tracepb.Span_SpanKind) string {
	switch k {
	case tracepb.Span_SPAN_KIND_SERVER:
		return "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		return "client"
	case tracepb.Span_SPAN_KIND_INTERNAL:
		return "internal"
	}
	return k.String()
}

func attrValue(kvs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

func anyString(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	}
	return ""
}
