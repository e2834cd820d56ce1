package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/trace/tracetest"
)

// The trace tests send calls of every family through a gateway with tracing
// on and read the spans back: from an in-process OTLP receiver, and from a
// real Jaeger through its query API (see tracetest).

// newTracedEnv is newOpsEnv with tracing to endpoint as service; more is
// added to the tracing section.
func newTracedEnv(t *testing.T, endpoint, service, more string) (*testEnv, *syncBuffer) {
	t.Helper()
	return newOpsEnv(t, func(y string) string {
		return y + `tracing: {endpoint: "` + endpoint + `", service_name: ` + service + `, timeout: 2s` + more + "}\n"
	}, Options{})
}

// tracedCall is a call of the scenario and what its spans must show.
type tracedCall struct {
	name, method, path string
	headers            map[string]string
	body               string
	op, provider       string // gen_ai.operation.name and gen_ai.provider.name
	model              string // gen_ai.request.model
	answered           bool   // a buffered answer: response id, model and usage are read
	parent             string // the client's traceparent, "" for none
	// in, idKey, modelKey: where a streamed answer's events carry its id and
	// model (members of the event's member in, when set); respID and
	// respModel are the first the client got.
	in, idKey, modelKey string
	respID, respModel   string
}

const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
)

func traceCalls() []tracedCall {
	gk := map[string]string{"x-gamma-api-key": keyA}
	return []tracedCall{
		{name: "chat", method: "POST", path: chatPath, body: chatBody("s-1"),
			headers: withHeaders(keyA, "traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-01", "tracestate", "vendor=1"),
			op:      "chat", provider: "openai", model: "chat-model", answered: true,
			parent: clientSpanID},
		{name: "chat-stream", method: "POST", path: chatPath, headers: bearer(keyA),
			body: `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"a secret prompt"}]}`,
			op:   "chat", provider: "openai", model: "plain-model", idKey: "id", modelKey: "model"},
		{name: "messages", method: "POST", path: "/v1/router/alpha/v1/messages", headers: bearer(keyA),
			body: `{"model":"chat-model","max_tokens":5,"messages":[{"role":"user","content":"a secret prompt"}]}`,
			op:   "chat", provider: "anthropic", model: "chat-model", answered: true},
		{name: "messages-stream", method: "POST", path: "/v1/router/alpha/v1/messages", headers: bearer(keyA),
			body: `{"model":"chat-model","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"a secret prompt"}]}`,
			op:   "chat", provider: "anthropic", model: "chat-model", in: "message", idKey: "id", modelKey: "model"},
		{name: "responses", method: "POST", path: "/v1/router/beta/v1/responses", headers: bearer(keyA),
			body: `{"model":"chat-model","input":"a secret prompt"}`,
			op:   "chat", provider: "openai", model: "chat-model", answered: true},
		{name: "responses-stream", method: "POST", path: "/v1/router/beta/v1/responses", headers: bearer(keyA),
			body: `{"model":"chat-model","input":"a secret prompt","stream":true}`,
			op:   "chat", provider: "openai", model: "chat-model", in: "response", idKey: "id", modelKey: "model"},
		{name: "image", method: "POST", path: imagesPath, headers: bearer(keyA),
			body: `{"model":"image-model","prompt":"a secret prompt","size":"256x256"}`,
			op:   "generate_content", provider: "openai", model: "image-model"},
		{name: "gamma", method: "POST", path: "/v1/router/gamma/v1beta/models/image-model:generateContent", headers: gk,
			body: `{"contents":[{"role":"user","parts":[{"text":"a secret prompt"}]}]}`,
			op:   "generate_content", provider: "gcp.gemini", model: "image-model"},
	}
}

// streamIdentity sets c's respID and respModel from the first events of the
// stream body that carry them.
func streamIdentity(t *testing.T, c *tracedCall, body []byte) {
	t.Helper()
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), "data:")
		var ev map[string]json.RawMessage
		if !ok || json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		if c.in != "" {
			obj := ev[c.in]
			ev = nil
			json.Unmarshal(obj, &ev)
		}
		json.Unmarshal(ev[c.idKey], &c.respID)
		json.Unmarshal(ev[c.modelKey], &c.respModel)
		if c.respID != "" && c.respModel != "" {
			return
		}
	}
	t.Fatalf("%s: no %s and %s in the stream %s", c.name, c.idKey, c.modelKey, body)
}

// traceScenario sends the calls, then a Responses continuation and a
// failover, and checks the spans spans returns.
func traceScenario(t *testing.T, e *testEnv, access *syncBuffer, service string, spans func() []tracetest.Span) {
	calls := traceCalls()
	want := map[string]tracedCall{} // by request id
	for i, c := range calls {
		id := fmt.Sprintf("trace-%s-%d", c.name, i)
		h := map[string]string{"x-request-id": id}
		for k, v := range c.headers {
			h[k] = v
		}
		status, _, body := e.do(c.method, c.path, h, c.body)
		if status != 200 {
			t.Fatalf("%s: %d %s", c.name, status, body)
		}
		if c.idKey != "" {
			streamIdentity(t, &c, body)
		}
		want[id] = c
		if c.name == "responses" {
			var r struct{ ID string }
			json.Unmarshal(body, &r)
			cont := tracedCall{name: "responses-continue", method: "POST", path: c.path, headers: bearer(keyA),
				body: `{"previous_response_id":"` + r.ID + `","input":"more"}`, op: "chat", provider: "openai", model: "chat-model", answered: true}
			id := "trace-responses-continue"
			if status, _, body := e.do("POST", c.path, withHeaders(keyA, "x-request-id", id), cont.body); status != 200 {
				t.Fatalf("continuation: %d %s", status, body)
			}
			want[id] = cont
		}
	}
	// A failover: d1 refuses connections; the sessions that go to d1 first
	// go again to d2, a second attempt under the same call.
	e.sim("d1").Close()
	var failovers []string
	for i := range 8 {
		id := fmt.Sprintf("trace-failover-%d", i)
		if status, _, body := e.do("POST", chatPath, withHeaders(keyA, "x-request-id", id), chatBody(fmt.Sprint("fo-", i))); status != 200 {
			t.Fatalf("failover call: %d %s", status, body)
		}
		failovers = append(failovers, id)
	}

	// Every call's access line names its trace; wait until each trace has its
	// server span (a stream's call ends after the client has its answer).
	traceOf := map[string]string{}
	eventually(t, "an access line with trace_id for every call", func() bool {
		for _, l := range accessLines(t, access) {
			id, _ := l["request_id"].(string)
			if tid, _ := l["trace_id"].(string); tid != "" {
				traceOf[id] = tid
			}
		}
		return len(traceOf) >= len(want)+len(failovers)
	})
	var byTrace map[string][]tracetest.Span
	eventually(t, "the spans of every call exported", func() bool {
		e.gw.FlushTraces(context.Background())
		byTrace = map[string][]tracetest.Span{}
		for _, s := range spans() {
			if s.Service == service {
				byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
			}
		}
		for id := range traceOf {
			if len(byTrace[traceOf[id]]) < 2 {
				return false
			}
		}
		return true
	})

	seen := map[string]bool{}
	for id, c := range want {
		tid := traceOf[id]
		if seen[tid] {
			t.Fatalf("%s: trace %s is another call's too", c.name, tid)
		}
		seen[tid] = true
		server, attempts := splitSpans(t, c.name, byTrace[tid])
		checkCallSpans(t, c, server, attempts)
		if c.parent != "" {
			if tid != clientTraceID || server.ParentID != c.parent {
				t.Fatalf("%s: trace %s parent %s, want the client's %s/%s", c.name, tid, server.ParentID, clientTraceID, c.parent)
			}
			checkUpstreamContext(t, e, id, tid, attempts[0].SpanID)
		} else if server.ParentID != "" && strings.Trim(server.ParentID, "0") != "" {
			t.Fatalf("%s: a root call has parent %s", c.name, server.ParentID)
		}
	}
	twice := 0
	for _, id := range failovers {
		server, attempts := splitSpans(t, id, byTrace[traceOf[id]])
		if len(attempts) == 2 {
			twice++
			a1, a2 := attempts[0], attempts[1]
			if a1.Attrs["gateway.attempt"] != "1" {
				a1, a2 = a2, a1
			}
			if a1.Attrs["gateway.retry_reason"] == "" || a1.Attrs["error.type"] == "" || a1.Attrs["gateway.deployment"] != "d1-beta" ||
				a2.Attrs["gateway.attempt"] != "2" || a2.Attrs["gateway.deployment"] != "d2-beta" || a2.Attrs["http.response.status_code"] != "200" {
				t.Fatalf("failover attempts:\n%v\n%v", a1.Attrs, a2.Attrs)
			}
			if server.Attrs["gateway.attempts"] != "2" || server.Attrs["gateway.deployment"] != "d2-beta" {
				t.Fatalf("failover call %v", server.Attrs)
			}
		}
	}
	if twice == 0 {
		t.Fatal("no call failed over: no trace with two attempts")
	}
	checkNoSecrets(t, byTrace)
}

// splitSpans returns a call's server span and its attempts' spans.
func splitSpans(t *testing.T, name string, spans []tracetest.Span) (server tracetest.Span, attempts []tracetest.Span) {
	t.Helper()
	n := 0
	for _, s := range spans {
		switch s.Kind {
		case "server":
			server = s
			n++
		case "client":
			attempts = append(attempts, s)
		}
	}
	if n != 1 || len(attempts) == 0 {
		t.Fatalf("%s: %d server spans and %d attempts in its trace: %+v", name, n, len(attempts), spans)
	}
	for _, a := range attempts {
		if a.ParentID != server.SpanID {
			t.Fatalf("%s: attempt %s is not under the call's span %s", name, a.ParentID, server.SpanID)
		}
	}
	return server, attempts
}

func checkCallSpans(t *testing.T, c tracedCall, server tracetest.Span, attempts []tracetest.Span) {
	t.Helper()
	a := attempts[len(attempts)-1]
	for _, s := range []tracetest.Span{server, a} {
		for k, v := range map[string]string{"gen_ai.operation.name": c.op, "gen_ai.provider.name": c.provider,
			"gen_ai.request.model": c.model, "http.response.status_code": "200"} {
			if s.Attrs[k] != v {
				t.Fatalf("%s: %s span %s = %q, want %q (all: %v)", c.name, s.Kind, k, s.Attrs[k], v, s.Attrs)
			}
		}
		if !contains(s.Events, "gateway.first_byte") {
			t.Fatalf("%s: %s span has no first byte event: %v", c.name, s.Kind, s.Events)
		}
		if _, ok := s.Attrs["error.type"]; ok {
			t.Fatalf("%s: a success has error.type %q", c.name, s.Attrs["error.type"])
		}
	}
	if server.Name != c.op+" "+c.model || a.Name != server.Name {
		t.Fatalf("%s: spans named %q and %q", c.name, server.Name, a.Name)
	}
	if server.Attrs["gateway.key_id"] != "team-a" || server.Attrs["gateway.deployment"] == "" || a.Attrs["server.address"] != "127.0.0.1" ||
		a.Attrs["server.port"] == "" || a.Attrs["gateway.attempt"] != "1" {
		t.Fatalf("%s: gateway attributes %v / %v", c.name, server.Attrs, a.Attrs)
	}
	if c.name == "chat" && len(server.Attrs["gateway.session_hash"]) != 16 {
		t.Fatalf("%s: session hash %q", c.name, server.Attrs["gateway.session_hash"])
	}
	if c.idKey != "" {
		for k, v := range map[string]string{"gen_ai.response.id": c.respID, "gen_ai.response.model": c.respModel} {
			if server.Attrs[k] != v || a.Attrs[k] != v {
				t.Fatalf("%s: %s = %q on the call, %q on the attempt; the stream sent %q", c.name, k, server.Attrs[k], a.Attrs[k], v)
			}
		}
	}
	if c.answered {
		for _, k := range []string{"gen_ai.response.id", "gen_ai.response.model", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} {
			if server.Attrs[k] == "" || a.Attrs[k] != server.Attrs[k] {
				t.Fatalf("%s: %s = %q on the call, %q on the attempt", c.name, k, server.Attrs[k], a.Attrs[k])
			}
		}
	}
}

// checkUpstreamContext: the upstream request of the call with request id id
// carried the attempt's traceparent, not the client's.
func checkUpstreamContext(t *testing.T, e *testEnv, id, traceID, attemptID string) {
	t.Helper()
	for _, r := range e.received() {
		if r.Header.Get("X-Request-Id") != id {
			continue
		}
		want := "00-" + traceID + "-" + attemptID + "-01"
		if got := r.Header.Values("Traceparent"); len(got) != 1 || got[0] != want {
			t.Fatalf("upstream traceparent %q, want %q", got, want)
		}
		if got := r.Header.Get("Tracestate"); got != "vendor=1" {
			t.Fatalf("upstream tracestate %q", got)
		}
		return
	}
	t.Fatalf("no upstream request of %s", id)
}

// checkNoSecrets: no attribute holds a caller key, a provider key or a prompt.
func checkNoSecrets(t *testing.T, byTrace map[string][]tracetest.Span) {
	t.Helper()
	for _, spans := range byTrace {
		for _, s := range spans {
			for k, v := range s.Attrs {
				for _, secret := range []string{keyA, "up-alpha", "up-beta", "up-gamma", "secret prompt", "Bearer"} {
					if strings.Contains(k, secret) || strings.Contains(v, secret) {
						t.Fatalf("span %q attribute %s=%q holds %q", s.Name, k, v, secret)
					}
				}
			}
		}
	}
}

func TestTracesToOTLPReceiver(t *testing.T) {
	r := tracetest.NewReceiver()
	defer r.Close()
	e, access := newTracedEnv(t, r.URL(), "gw-otlp", "")
	traceScenario(t, e, access, "gw-otlp", r.Spans)
}

// TestTracesOffForwardsClientContext: with tracing off, the client's
// traceparent goes upstream as the client sent it, and the access line has
// no trace_id.
func TestTracesOffForwardsClientContext(t *testing.T) {
	e, access := newOpsEnv(t, nil, Options{})
	tp := "00-" + clientTraceID + "-" + clientSpanID + "-01"
	if status, _, body := e.do("POST", chatPath, withHeaders(keyA, "traceparent", tp, "x-request-id", "off-1"), chatBody("")); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if got := lastUpstream(e).Header.Values("Traceparent"); len(got) != 1 || got[0] != tp {
		t.Fatalf("upstream traceparent %q, want the client's", got)
	}
	if l := accessLine(t, access, "off-1"); l["trace_id"] != nil {
		t.Fatalf("trace_id %v with tracing off", l["trace_id"])
	}
}

func lastUpstream(e *testEnv) sim.Request {
	all := e.received()
	if len(all) == 0 {
		e.t.Fatal("no upstream request")
	}
	return all[len(all)-1]
}

// collectorDown sends calls through a gateway whose collector went away: they
// all succeed, and the spans that could not be exported are counted.
func collectorDown(t *testing.T, e *testEnv) {
	t.Helper()
	for i := range 40 {
		if status, _, body := e.do("POST", chatPath, bearer(keyA), chatBody(fmt.Sprint("down-", i))); status != 200 {
			t.Fatalf("call %d with the collector down: %d %s", i, status, body)
		}
	}
	eventually(t, "spans counted as dropped or failed", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		e.gw.FlushTraces(ctx)
		cancel()
		m := e.scrape()
		return m["gateway_trace_spans_dropped_total"]+m["gateway_trace_spans_failed_total"] > 0
	})
}

func TestTracesCollectorDown(t *testing.T) {
	r := tracetest.NewReceiver()
	e, _ := newTracedEnv(t, r.URL(), "gw-down", ", queue_size: 8")
	if status, _, _ := e.do("POST", chatPath, bearer(keyA), chatBody("")); status != 200 {
		t.Fatal(status)
	}
	r.Close()
	collectorDown(t, e)
}

// TestTracesToJaeger runs the scenario against a real Jaeger, read back
// through its query API; then stops Jaeger mid-run: calls go on, and the
// spans it would have had are counted.
func TestTracesToJaeger(t *testing.T) {
	j := tracetest.StartJaeger(t, tracetest.Port())
	service := fmt.Sprintf("gw-jaeger-%d", time.Now().UnixNano())
	e, access := newTracedEnv(t, j.OTLPHTTP, service, ", queue_size: 64")
	traceScenario(t, e, access, service, func() []tracetest.Span {
		spans, err := j.Spans(service)
		if err != nil {
			t.Logf("jaeger query: %v", err)
		}
		return spans
	})
	if err := j.Stop(); err != nil {
		t.Fatal(err)
	}
	collectorDown(t, e)
}
