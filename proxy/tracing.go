package proxy

import (
	"context"
	"time"
	"unicode/utf8"

	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/trace"
	"github.com/modelgate/gateway/proxy/upstream"
)

// Traces (issue 36): with a tracing section in the config, each call is a
// server span and each upstream attempt a client span under it; see
// proxy/trace and docs/operations.md. The hooks below are called from the
// call's lifecycle; with tracing off each is one nil check.

// operations is the gen_ai.operation.name of each endpoint that calls a
// model ("" for the others).
var operations = [numEndpoints]string{
	epMessages:        "chat",
	epChat:            "chat",
	epResponsesCreate: "chat",
	epGenerateContent: "generate_content",
	epImages:          "generate_content",
}

// tracerFor is the tracer of a state built from cfg: prev's when its tracing
// section is unchanged, a new one when it changed (prev's then shut down
// once its calls had time to end), nil when tracing is off.
func (g *Gateway) tracerFor(cfg *config.Config, prev *state) (*trace.Tracer, error) {
	var old *trace.Tracer
	if prev != nil {
		old = prev.tracer
	}
	if old != nil && old.Same(cfg.Tracing) {
		return old, nil
	}
	var t *trace.Tracer
	if cfg.Tracing != nil {
		var err error
		if t, err = trace.New(*cfg.Tracing, g.obs.traceCounters); err != nil {
			return nil, err
		}
	}
	if old != nil {
		time.AfterFunc(time.Minute, func() { old.Shutdown(context.Background()) })
	}
	return t, nil
}

// FlushTraces exports the spans queued, within ctx; nothing with tracing off.
func (g *Gateway) FlushTraces(ctx context.Context) error {
	if t := g.state.Load().tracer; t != nil {
		return t.Flush(ctx)
	}
	return nil
}

// traceStart begins the call's server span.
func (c *call) traceStart() {
	if t := c.st.tracer; t != nil {
		t.Start(&c.trace, &c.ctx.Request.Header, c.ep.String(), c.start)
	}
}

// traceAttempt begins the span of an attempt to dep.
func (c *call) traceAttempt(dep *upstream.Deployment) {
	if !c.trace.On() {
		return
	}
	c.trace.StartAttempt(&trace.Attempt{Operation: operations[c.ep], Provider: dep.Provider(),
		Model: loggedModel(c), Deployment: dep.Name(), Address: dep.Addr(), N: int(c.attempts)})
	if c.trace.Sampled() {
		c.up.ReadIdentity() // a stream's id and model, read as it is relayed
	}
}

// traceRetry ends the attempt span of a call sent again for reason.
func (c *call) traceRetry(reason upstream.RetryReason, err error) {
	if c.trace.On() {
		c.trace.Retry(reason.String(), err)
	}
}

// traceEnd ends the call's spans.
func (c *call) traceEnd(status int, now time.Time) {
	if !c.trace.On() {
		return
	}
	o := trace.Outcome{Operation: operations[c.ep], RequestModel: loggedModel(c), Status: status,
		ErrorType: c.reason, KeyID: c.keyID, Deployment: deploymentName(c.dep), Attempts: int(c.attempts),
		FirstByte: c.firstByteAt(), End: now}
	if c.dep != nil {
		o.Provider = c.dep.Provider()
	}
	if c.hasSession {
		var hex [16]byte
		o.Session = string(appendSessionHash(hex[:0], c.sessionHash))
	}
	if u := c.up.Usage(); u.Found {
		o.Usage, o.InputTokens, o.OutputTokens = true, u.Input, u.Output
	}
	if p := c.prices(); p != nil && !p.Zero() {
		o.Priced, o.CostPicoUSD = true, c.spent
	}
	c.answerIdentity(&o)
	c.trace.End(&o)
}

// answerIdentity reads the response id and model of a success: from its
// body when it was read whole, else what the relay read from the stream's
// events (see upstream.Relay.ReadIdentity). Both are bounded and must be
// valid UTF-8, since they come from the upstream.
func (c *call) answerIdentity(o *trace.Outcome) {
	if c.status < 200 || c.status > 299 {
		return
	}
	if c.up.Streaming() {
		id, model := c.up.Identity()
		o.ResponseID, o.ResponseModel = identityString(id), identityString(model)
		return
	}
	if c.ctx == nil {
		return
	}
	body := c.ctx.Response.Body()
	idKey, modelKey := "id", "model"
	if c.family == family.Gamma {
		idKey, modelKey = "responseId", "modelVersion"
	}
	o.ResponseID = jsonString(parse.Member(body, idKey))
	o.ResponseModel = jsonString(parse.Member(body, modelKey))
}

// jsonString is the string a JSON string literal holds, as identityString
// takes it; "" for anything else.
func jsonString(raw []byte) string {
	if len(raw) == 0 || raw[0] != '"' || len(raw) > parse.MaxIdentity+2 {
		return ""
	}
	s, err := parse.StringValue(nil, raw)
	if err != nil {
		return ""
	}
	return identityString(s)
}

// identityString is b as a span attribute's value: "" when it is longer than
// parse.MaxIdentity or not valid UTF-8 (an exporter refuses such a string).
func identityString(b []byte) string {
	if len(b) > parse.MaxIdentity || !utf8.Valid(b) {
		return ""
	}
	return string(b)
}

// appendTraceID appends the access log's trace_id: the call's trace id.
func (c *call) appendTraceID(dst []byte) []byte { return c.trace.AppendTraceID(dst) }
