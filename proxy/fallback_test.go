package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/modelgate/gateway/bench/sim"
)

// withFallbacks adds busy-model, served by d1 alone, whose fallback is
// spare-model, served by d2 under the provider's own name spare-provider.
func withFallbacks(y string) string {
	return strings.Replace(y, "groups:\n", `  - id: busy-model
    upstreams: [d1-beta]
    fallbacks: [spare-model]
  - id: spare-model
    upstreams: [{name: d2-beta, model: spare-provider}]
groups:
`, 1)
}

// A model whose deployments all answer 429 falls back: the SDK gets one
// success from the fallback model's deployment, whose body names it by its
// provider name, and x-gateway-model names the served model, as do the
// metrics.
func TestFallbackServesRateLimitedModel(t *testing.T) {
	e := newEnv(t, withFallbacks)
	// A call that needs no fallback carries no x-gateway-model.
	status, h, _ := e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(keyA), chatBodyFor("busy-model"))
	if status != 200 || len(h.Peek("x-gateway-model")) != 0 {
		t.Fatalf("status %d, x-gateway-model %q", status, h.Peek("x-gateway-model"))
	}
	e.sim("d1").SetFault(sim.Fault{Status: 429})
	before := e.scrape()
	var resp *http.Response
	out, err := e.openai(keyA).Chat.Completions.New(context.Background(), chatParams("busy-model"), option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("x-gateway-model"); got != "spare-model" {
		t.Fatalf("x-gateway-model %q, want spare-model", got)
	}
	if !strings.Contains(out.Choices[0].Message.Content, "deployment d2") {
		t.Fatalf("answer %q is not d2's", out.Choices[0].Message.Content)
	}
	d1, d2 := e.sim("d1").Requests(), e.sim("d2").Requests()
	if len(d1) != 2 || len(d2) != 1 {
		t.Fatalf("d1 saw %d requests, d2 %d; want 2 and 1", len(d1), len(d2))
	}
	if !strings.Contains(string(d2[0].Body), `"model":"spare-provider"`) || strings.Contains(string(d2[0].Body), "busy-model") {
		t.Fatalf("d2's body: %s", d2[0].Body)
	}
	m := e.scrape()
	for series, want := range map[string]float64{
		`gateway_requests_total{family="beta",endpoint="chat_completions",model="spare-model",status="2xx"}`: 1,
		`gateway_requests_total{family="beta",endpoint="chat_completions",model="busy-model",status="2xx"}`:  0,
		`gateway_upstream_retries_total{deployment="d1-beta",reason="429"}`:                                  1,
	} {
		if got := m[series] - before[series]; got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	// A stream falls back alike.
	stream := e.openai(keyA).Chat.Completions.NewStreaming(context.Background(), chatParams("busy-model"))
	n := 0
	for stream.Next() {
		n++
	}
	if err := stream.Err(); err != nil || n == 0 {
		t.Fatalf("stream: %d chunks, %v", n, err)
	}
}

// With retry.attempts spent, nothing falls back: the last upstream answer
// reaches the client as it was. A model whose deployments are all excluded
// goes to its fallback at its first send.
func TestFallbackWithinRetryAttempts(t *testing.T) {
	e := newEnv(t, func(y string) string { return noFailover(withFallbacks(y)) })
	e.sim("d1").SetFault(sim.Fault{Status: 429, RetryAfter: "7"})
	status, h, body := e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(keyA), chatBodyFor("busy-model"))
	if status != 429 || string(h.Peek("Retry-After")) != "7" || !strings.Contains(string(body), "Simulated failure") || len(h.Peek("x-gateway-model")) != 0 {
		t.Fatalf("status %d retry-after %q x-gateway-model %q body %s", status, h.Peek("Retry-After"), h.Peek("x-gateway-model"), body)
	}
	if d1, d2 := len(e.sim("d1").Requests()), len(e.sim("d2").Requests()); d1 != 1 || d2 != 0 {
		t.Fatalf("d1 saw %d requests, d2 %d; want 1 and 0", d1, d2)
	}
	// d1 is now excluded for its retry-after: the next call goes to the
	// fallback model at once, which is its first send, not a resend.
	var resp *http.Response
	if _, err := e.openai(keyA).Chat.Completions.New(context.Background(), chatParams("busy-model"), option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("x-gateway-model"); got != "spare-model" {
		t.Fatalf("x-gateway-model %q, want spare-model", got)
	}
	if d1, d2 := len(e.sim("d1").Requests()), len(e.sim("d2").Requests()); d1 != 1 || d2 != 1 {
		t.Fatalf("d1 saw %d requests, d2 %d; want 1 and 1", d1, d2)
	}
}

// A 503 is the model's own answer, not a refusal for load: no fallback.
func TestFallbackNotForServerError(t *testing.T) {
	e := newEnv(t, withFallbacks)
	e.sim("d1").SetFault(sim.Fault{Status: 503})
	status, h, _ := e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(keyA), chatBodyFor("busy-model"))
	if status != 503 || len(h.Peek("x-gateway-model")) != 0 || len(e.sim("d2").Requests()) != 0 {
		t.Fatalf("status %d x-gateway-model %q, d2 saw %d", status, h.Peek("x-gateway-model"), len(e.sim("d2").Requests()))
	}
}

// A Responses continuation is bound to the deployment that holds its
// response: it never falls back, while a new response does on a 429.
func TestFallbackNeverForContinuation(t *testing.T) {
	e := newEnv(t, withFallbacks)
	client := e.openai(keyA)
	first, err := client.Responses.New(context.Background(), newResponseParams("busy-model", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	e.sim("d1").SetFault(sim.Fault{Status: 429})
	cont := `{"previous_response_id":"` + first.ID + `","input":"more"}`
	status, h, _ := e.do("POST", "/v1/router/beta/v1/responses", bearer(keyA), cont)
	if status != 429 || len(h.Peek("x-gateway-model")) != 0 {
		t.Fatalf("continuation: status %d, x-gateway-model %q", status, h.Peek("x-gateway-model"))
	}
	if d2 := len(e.sim("d2").Requests()); d2 != 0 {
		t.Fatalf("the continuation reached d2 (%d requests)", d2)
	}
	var resp *http.Response
	if _, err := client.Responses.New(context.Background(), newResponseParams("busy-model", "again"), option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("x-gateway-model"); got != "spare-model" {
		t.Fatalf("a new response: x-gateway-model %q", got)
	}
}

// A key that may not use the fallback model does not fall back: its client
// gets the model's own 429, and the fallback's deployment never sees the call.
func TestFallbackNeedsKeyAccess(t *testing.T) {
	e := newKeysEnv(t, func(y string) string { return withAdmin("")(withFallbacks(y)) })
	only := e.adminJSON("POST", "/admin/v1/keys", `{"name":"busy-only","models":["busy-model"]}`, 201)["key"].(string)
	both := e.adminJSON("POST", "/admin/v1/keys", `{"name":"busy-and-spare","models":["busy-model","spare-model"]}`, 201)["key"].(string)
	e.sim("d1").SetFault(sim.Fault{Status: 429, RetryAfter: "120", Times: 1})
	if status, h, body := e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(only), chatBodyFor("busy-model")); status != 429 || len(h.Peek("x-gateway-model")) != 0 {
		t.Fatalf("a key without the fallback: %d, x-gateway-model %q, %s", status, h.Peek("x-gateway-model"), body)
	}
	if d2 := len(e.sim("d2").Requests()); d2 != 0 {
		t.Fatalf("d2 saw %d requests", d2)
	}
	status, h, body := e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(both), chatBodyFor("busy-model"))
	if status != 200 || string(h.Peek("x-gateway-model")) != "spare-model" {
		t.Fatalf("a key with the fallback: %d %q %s", status, h.Peek("x-gateway-model"), body)
	}
}
