package proxy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/modelgate/gateway/bench/sim"
)

// noFailover edits the fixture's config to send each call to one deployment.
func noFailover(y string) string { return y + "retry: {attempts: 1}\n" }

// sessionOnD1 returns a session key whose first choice is deployment d1 in
// both the alpha and the beta family.
func (e *testEnv) sessionOnD1() string {
	e.t.Helper()
	const alphaBody = `{"model":"chat-model","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`
	for i := range 100 {
		s := fmt.Sprintf("fail-%d", i)
		if e.deploymentOf(withSession(keyA, s), chatBody("")) != "d1" {
			continue
		}
		status, h, _ := e.do("POST", "/v1/router/alpha/v1/messages", withSession(keyA, s), alphaBody)
		if status == 200 && string(h.Peek("x-sim-deployment")) == "d1" {
			e.resetSims()
			return s
		}
	}
	e.t.Fatal("no session of 100 lands on d1")
	return ""
}

func (e *testEnv) counts() (d1, d2 int) {
	return len(e.sim("d1").Requests()), len(e.sim("d2").Requests())
}

// A rate-limited deployment is skipped: the SDK sees one success, and the
// deployment stays excluded for its retry-after, so the session's next call
// goes straight to the second choice.
func TestRateLimitedDeploymentIsSkipped(t *testing.T) {
	e := newEnv(t, nil)
	s := e.sessionOnD1()
	e.sim("d1").SetFault(sim.Fault{Status: 429, RetryAfter: "120", Times: 1})
	client := e.openai(keyA, option.WithHeader("x-session-id", s))
	before := e.scrape()
	for i := range 2 {
		if _, err := client.Chat.Completions.New(context.Background(), chatParams("chat-model")); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if d1, d2 := e.counts(); d1 != 1 || d2 != 2 {
		t.Fatalf("d1 saw %d requests, d2 %d; want 1 and 2", d1, d2)
	}
	m := e.scrape()
	if m[`gateway_deployment_excluded{deployment="d1-beta",family="beta"}`] != 1 {
		t.Error("d1-beta is not excluded for its retry-after")
	}
	for series, want := range map[string]float64{
		`gateway_upstream_retries_total{deployment="d1-beta",reason="429"}`:                                 1,
		`gateway_upstream_attempts_total{deployment="d1-beta"}`:                                             1,
		`gateway_upstream_attempts_total{deployment="d2-beta"}`:                                             2,
		`gateway_deployment_excluded{deployment="d1-beta",family="beta"}`:                                   1,
		`gateway_upstream_retry_budget_exhausted_total{deployment="d1-beta"}`:                               0,
		`gateway_affinity_session_moves_total{deployment="d2-beta"}`:                                        2,
		`gateway_requests_total{family="beta",endpoint="chat_completions",model="chat-model",status="2xx"}`: 2,
	} {
		if got := m[series] - before[series]; got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// The alpha family's overload (529) and a connection reset before the
// answer's headers fail over as well.
func TestOverloadAndResetFailOver(t *testing.T) {
	e := newEnv(t, nil)
	s := e.sessionOnD1()
	ac := e.anthropic(keyA, aoption.WithHeader("x-session-id", s))
	e.sim("d1").SetFault(sim.Fault{Status: 529, Times: 1})
	msg, err := ac.Messages.New(context.Background(), messageParams("chat-model"))
	if err != nil || !strings.Contains(msg.Content[0].Text, "deployment d2") {
		t.Fatalf("529: %v %+v", err, msg)
	}
	oc := e.openai(keyA, option.WithHeader("x-session-id", s))
	e.sim("d1").SetFault(sim.Fault{Reset: true})
	e.gw.state.Load().deps["d1-beta"].Succeeded() // the 529's exclusion is the alpha deployment's
	if _, err := oc.Chat.Completions.New(context.Background(), chatParams("chat-model")); err != nil {
		t.Fatalf("reset: %v", err)
	}
	// The reset came on a kept-alive connection, which reads as one the
	// upstream closed while idle: it is sent once more on a fresh one, whose
	// reset then moves the call to d2.
	if d1, d2 := e.counts(); d1 != 3 || d2 != 2 {
		t.Fatalf("d1 saw %d requests, d2 %d; want 3 and 2", d1, d2)
	}
}

// When every deployment fails, the client gets the last upstream answer as
// it was: status, native body and retry-after, for the SDK's own retries.
func TestAllFailedPassesLastAnswer(t *testing.T) {
	e := newEnv(t, nil)
	for _, d := range []string{"d1", "d2"} {
		e.sim(d).SetFault(sim.Fault{Status: 429, RetryAfter: "7"})
	}
	status, h, body := e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(keyA), chatBody(""))
	if status != 429 || string(h.Peek("Retry-After")) != "7" || !strings.Contains(string(body), "Simulated failure") {
		t.Fatalf("status %d retry-after %q body %s", status, h.Peek("Retry-After"), body)
	}
	if d1, d2 := e.counts(); d1 != 1 || d2 != 1 {
		t.Fatalf("d1 saw %d requests, d2 %d; want 1 and 1", d1, d2)
	}
	_, err := e.openai(keyA).Chat.Completions.New(context.Background(), chatParams("chat-model"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
		t.Fatalf("want the provider's 429, got %v", err)
	}
}

// A stream cut after its first bytes reached the client is not retried: it
// ends in the family's error form, and the second choice never sees it.
func TestStreamCutMidwayIsNotRetried(t *testing.T) {
	e := newEnv(t, nil)
	s := e.sessionOnD1()
	e.sim("d1").SetFault(sim.Fault{CutAfter: 3})
	ac := e.anthropic(keyA, aoption.WithHeader("x-session-id", s))
	stream := ac.Messages.NewStreaming(context.Background(), messageParams("chat-model"))
	n := 0
	for stream.Next() {
		n++
	}
	var apiErr *anthropic.Error
	if n == 0 || !errors.As(stream.Err(), &apiErr) {
		t.Fatalf("want events then the family's error event, got %d events and %v", n, stream.Err())
	}
	if d1, d2 := e.counts(); d1 != 1 || d2 != 0 {
		t.Fatalf("d1 saw %d requests, d2 %d; want 1 and 0", d1, d2)
	}
}

// A Responses create may have stored a response upstream: a 503 is not
// retried (the upstream is not asked twice), a 429 is (it proves nothing was
// done).
func TestResponsesCreateIsNotDuplicated(t *testing.T) {
	e := newEnv(t, nil)
	s := e.sessionOnD1()
	client := e.openai(keyA, option.WithHeader("x-session-id", s))
	e.sim("d1").SetFault(sim.Fault{Status: 503})
	_, err := client.Responses.New(context.Background(), newResponseParams("chat-model", "hi"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 {
		t.Fatalf("want the provider's 503, got %v", err)
	}
	if d1, d2 := e.counts(); d1 != 1 || d2 != 0 {
		t.Fatalf("503: d1 saw %d requests, d2 %d; want 1 and 0", d1, d2)
	}
	e.sim("d1").SetFault(sim.Fault{Status: 429, Times: 1})
	r, err := client.Responses.New(context.Background(), newResponseParams("chat-model", "hi"))
	if err != nil || !strings.Contains(r.OutputText(), "deployment d2") {
		t.Fatalf("429: %v", err)
	}
	if d1, d2 := e.counts(); d1 != 2 || d2 != 1 {
		t.Fatalf("429: d1 saw %d requests, d2 %d; want 2 and 1", d1, d2)
	}
}

// With failover off, a failure reaches the client from the first choice.
func TestFailoverOff(t *testing.T) {
	e := newEnv(t, noFailover)
	s := e.sessionOnD1()
	e.sim("d1").SetFault(sim.Fault{Status: 503})
	status, _, body := e.do("POST", "/v1/router/beta/v1/chat/completions", withSession(keyA, s), chatBody(""))
	assertBetaError(t, status, body, 503)
	if d1, d2 := e.counts(); d1 != 1 || d2 != 0 {
		t.Fatalf("d1 saw %d requests, d2 %d; want 1 and 0", d1, d2)
	}
}

// A streamed call whose first choice answers 503 before any byte streams
// from the second; the access log line names the attempts and the tokens.
func TestStreamFailsOverBeforeFirstByte(t *testing.T) {
	e, access := newOpsEnv(t, nil, Options{})
	s := e.sessionOnD1()
	e.sim("d1").SetFault(sim.Fault{Status: 503, Times: 1})
	ac := e.anthropic(keyA, aoption.WithHeader("x-session-id", s))
	stream := ac.Messages.NewStreaming(context.Background(), messageParams("chat-model"))
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if stream.Err() != nil || !strings.Contains(msg.Content[0].Text, "deployment d2") {
		t.Fatalf("stream: %v %+v", stream.Err(), msg.Content)
	}
	if d1, d2 := e.counts(); d1 != 1 || d2 != 1 {
		t.Fatalf("d1 saw %d requests, d2 %d; want 1 and 1", d1, d2)
	}
	// the line is written when the gateway closes the stream, which may come
	// after the client read its end
	var last string
	eventually(t, "the stream's access line", func() bool {
		lines := strings.Split(strings.TrimSpace(access.String()), "\n")
		last = lines[len(lines)-1]
		return strings.Contains(last, `"stream":true`)
	})
	want := `"deployment":"d2-alpha","status":200,`
	for _, w := range []string{want, `"attempts":2`, fmt.Sprintf(`"output_tokens":%d`, msg.Usage.OutputTokens),
		fmt.Sprintf(`"input_tokens":%d`, msg.Usage.InputTokens)} {
		if !strings.Contains(last, w) {
			t.Fatalf("access line without %s:\n%s", w, last)
		}
	}
}
