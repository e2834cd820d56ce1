package trace

import "github.com/valyala/fasthttp"

// Header is an OpenTelemetry propagation.TextMapCarrier over a fasthttp
// request head: the W3C Trace Context of a client's request is read from
// it. Keys are header names in any case.
type Header struct{ H *fasthttp.RequestHeader }

// Get returns the value of the header key, "" when absent.
func (h Header) Get(key string) string { return string(h.H.Peek(key)) }

// Set sets the header key to value.
func (h Header) Set(key, value string) { h.H.Set(key, value) }

// Keys lists the header names present.
func (h Header) Keys() []string {
	keys := make([]string, 0, h.H.Len())
	for name := range h.H.All() {
		keys = append(keys, string(name))
	}
	return keys
}

// HeadAppender is a propagation.TextMapCarrier that appends each header set
// as a "Name: value" line to a raw request head under construction (see
// upstream.AppendHeader); it reads nothing back.
type HeadAppender struct{ Head []byte }

// Get returns "": an appender has nothing to read.
func (a *HeadAppender) Get(string) string { return "" }

// Set appends "key: value\r\n".
func (a *HeadAppender) Set(key, value string) {
	a.Head = append(append(append(append(a.Head, key...), ": "...), value...), "\r\n"...)
}

// Keys returns nil: an appender has nothing to read.
func (a *HeadAppender) Keys() []string { return nil }

// DropContext removes the W3C Trace Context headers from h: with tracing on,
// the upstream request carries the attempt's, not the client's.
func DropContext(h *fasthttp.RequestHeader) {
	h.Del("Traceparent")
	h.Del("Tracestate")
}
