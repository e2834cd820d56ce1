// Package trace owns the gateway's OpenTelemetry traces: the tracer and its
// exporter set up from the config's tracing section, the spans of one call
// (a server span for the call, a client span for each upstream attempt) with
// their OpenTelemetry GenAI semantic-convention attributes, and W3C Trace
// Context on fasthttp headers (a client's traceparent continued, the
// attempt's written into the upstream request head).
//
// The wire format, the batching and the bounded export queue are the
// OpenTelemetry Go SDK's (go.opentelemetry.io/otel/sdk and its OTLP
// exporters); this package counts what that queue drops and what fails to
// export. It does not decide what a call is or where it goes: proxy calls it
// at the call's start and end and at each attempt, with what the call knows.
// Nothing of a prompt, a completion, a key or a secret is put in a span.
//
// With tracing off there is no Tracer, and a Call's zero value does nothing:
// the request path pays one nil check per hook and allocates nothing.
package trace
