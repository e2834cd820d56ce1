package trace

import (
	"context"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// Call holds the spans of one call: its server span and the span of the
// upstream attempt under way. The zero value is off: every method does
// nothing. Not safe for concurrent use; a call's spans are ended by End.
type Call struct {
	t       *Tracer
	ctx     context.Context // holds the server span
	server  oteltrace.Span
	attempt oteltrace.Span
}

// On reports whether the call is traced (its spans may still be unsampled).
func (c *Call) On() bool { return c.t != nil }

// Sampled reports whether the call's spans are recorded: what is read only
// for them (such as a stream's response id) need not be read otherwise.
func (c *Call) Sampled() bool { return c.t != nil && c.server.IsRecording() }

// Start begins c's server span, named name, at start: a child of the W3C
// Trace Context the client sent in h, if any. The client's context headers
// are then removed from h: the upstream requests carry the attempts'.
func (t *Tracer) Start(c *Call, h *fasthttp.RequestHeader, name string, start time.Time) {
	ctx := t.prop.Extract(context.Background(), Header{h})
	c.ctx, c.server = t.tracer.Start(ctx, name, oteltrace.WithSpanKind(oteltrace.SpanKindServer),
		oteltrace.WithTimestamp(start))
	c.t = t
	DropContext(h)
}

// Attempt is what a call knows of one upstream attempt when it is sent.
type Attempt struct {
	Operation  string // gen_ai.operation.name, "" for a call that is none
	Provider   string // gen_ai.provider.name
	Model      string // the model the client asked for
	Deployment string
	Address    string // host:port the attempt goes to
	N          int    // 1 for the first attempt of the call
}

// StartAttempt begins the client span of an upstream attempt, under the
// call's server span. The attempt before it must have been ended (Retry).
func (c *Call) StartAttempt(a *Attempt) {
	if c.t == nil {
		return
	}
	_, c.attempt = c.t.tracer.Start(c.ctx, spanName(a.Operation, a.Model, "upstream"),
		oteltrace.WithSpanKind(oteltrace.SpanKindClient), oteltrace.WithAttributes(attemptAttrs(a)...))
}

// Retry ends the attempt under way as one that is sent again for reason.
func (c *Call) Retry(reason string, err error) {
	if c.attempt == nil {
		return
	}
	c.attempt.SetAttributes(attribute.String(KeyErrorType, reason), attribute.String(KeyRetryReason, reason))
	if err != nil {
		c.attempt.SetStatus(codes.Error, reason)
	}
	c.attempt.End()
	c.attempt = nil
}

// AppendContext appends the traceparent (and tracestate) header lines of
// the attempt under way, else of the call, to an upstream request head.
func (c *Call) AppendContext(head []byte) []byte {
	if c.t == nil {
		return head
	}
	ctx := c.ctx
	if c.attempt != nil {
		ctx = oteltrace.ContextWithSpan(ctx, c.attempt)
	}
	a := HeadAppender{Head: head}
	c.t.prop.Inject(ctx, &a)
	return a.Head
}

// AppendTraceID appends the call's trace id in hex, as the access log shows it.
func (c *Call) AppendTraceID(dst []byte) []byte {
	if c.t == nil {
		return dst
	}
	id := c.server.SpanContext().TraceID()
	return hex.AppendEncode(dst, id[:])
}

// Outcome is what a call knows when it ends.
type Outcome struct {
	Operation     string // gen_ai.operation.name, "" for a call that is none
	Provider      string // of the deployment that answered
	RequestModel  string
	ResponseModel string
	ResponseID    string
	Usage         bool // InputTokens and OutputTokens were read from the answer
	InputTokens   int64
	OutputTokens  int64
	Status        int
	ErrorType     string // the gateway's reason for a failure, "" for none
	KeyID         string
	Deployment    string
	Session       string // the session key's hash, "" without one
	Attempts      int
	Priced        bool      // the model has prices: CostPicoUSD is the call's cost
	CostPicoUSD   int64     // in 1e-12 USD, as the budgets count it
	FirstByte     time.Time // when the answer's first byte was ready, or zero
	End           time.Time
}

// End ends the call's spans with what it knows at its end, and turns c off.
func (c *Call) End(o *Outcome) {
	if c.t == nil {
		return
	}
	attrs := outcomeAttrs(o)
	if c.attempt != nil {
		c.endAttempt(o, attrs)
	}
	if o.Operation != "" {
		c.server.SetName(spanName(o.Operation, o.RequestModel, ""))
	}
	c.server.SetAttributes(attrs...)
	c.server.SetAttributes(callAttrs(o)...)
	if !o.FirstByte.IsZero() {
		c.server.AddEvent(EventFirstByte, oteltrace.WithTimestamp(o.FirstByte))
	}
	if o.Status >= 500 || o.Status == 0 {
		c.server.SetStatus(codes.Error, o.ErrorType)
	}
	c.server.End(oteltrace.WithTimestamp(o.End))
	*c = Call{}
}

// endAttempt ends the attempt that answered.
func (c *Call) endAttempt(o *Outcome, attrs []attribute.KeyValue) {
	c.attempt.SetAttributes(attrs...)
	if !o.FirstByte.IsZero() {
		c.attempt.AddEvent(EventFirstByte, oteltrace.WithTimestamp(o.FirstByte))
	}
	if o.Status >= 400 || o.Status == 0 {
		c.attempt.SetStatus(codes.Error, o.ErrorType)
	}
	c.attempt.End(oteltrace.WithTimestamp(o.End))
	c.attempt = nil
}

// spanName is "{operation} {model}" as the GenAI conventions name spans,
// else fallback.
func spanName(op, model, fallback string) string {
	switch {
	case op == "":
		return fallback
	case model == "":
		return op
	}
	return op + " " + model
}

// portOf is the port of a host:port, 0 when there is none.
func portOf(addr string) (host string, port int) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			p, err := strconv.Atoi(addr[i+1:])
			if err != nil {
				return addr, 0
			}
			return addr[:i], p
		}
	}
	return addr, 0
}
