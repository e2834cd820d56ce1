package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/config"
)

func (e *testEnv) openai(key string, opts ...option.RequestOption) *openai.Client {
	c := openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(e.base + "/v1/router/beta/v1"), option.WithAPIKey(key), option.WithMaxRetries(0),
	}, opts...)...)
	return &c
}

func (e *testEnv) anthropic(key string, opts ...aoption.RequestOption) *anthropic.Client {
	c := anthropic.NewClient(append([]aoption.RequestOption{
		aoption.WithBaseURL(e.base + "/v1/router/alpha"), aoption.WithAuthToken(key), aoption.WithAPIKey(""),
		aoption.WithMaxRetries(0),
	}, opts...)...)
	return &c
}

func chatParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Say hello")},
	}
}

func messageParams(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Say hello"))},
	}
}

func TestChatCompletionsSDK(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	client := e.openai(keyA)

	got, err := client.Chat.Completions.New(ctx, chatParams("chat-model"), option.WithHeader("x-session-id", "s-1"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Object != "chat.completion" || len(got.Choices) != 1 || got.Choices[0].Message.Content == "" {
		t.Fatalf("unexpected completion: %+v", got)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, chatParams("chat-model"))
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks < 3 || len(acc.Choices) != 1 || acc.Choices[0].Message.Content == "" {
		t.Fatalf("stream: %d chunks, %+v", chunks, acc.Choices)
	}

	// What reached the providers: the provider's key, never the caller's, and
	// no gateway headers.
	for _, r := range e.received() {
		if r.Header.Get("Authorization") != "Bearer up-beta" {
			t.Fatalf("upstream Authorization = %q", r.Header.Get("Authorization"))
		}
		if r.Header.Get("X-Session-Id") != "" || strings.Contains(fmt.Sprint(r.Header), keyA) {
			t.Fatalf("gateway or caller headers leaked upstream: %v", r.Header)
		}
		if r.Path != "/v1/chat/completions" {
			t.Fatalf("upstream path %q", r.Path)
		}
	}
}

func TestMessagesSDK(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	client := e.anthropic(keyA)

	msg, err := client.Messages.New(ctx, messageParams("chat-model"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Type != "message" || len(msg.Content) == 0 || msg.Content[0].Text == "" {
		t.Fatalf("unexpected message: %+v", msg)
	}

	stream := client.Messages.NewStreaming(ctx, messageParams("chat-model"))
	var acc anthropic.Message
	events := 0
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
		events++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if events < 5 || len(acc.Content) == 0 || acc.Content[0].Text == "" || acc.StopReason == "" {
		t.Fatalf("stream: %d events, %+v", events, acc)
	}
	for _, r := range e.received() {
		if r.Header.Get("X-Api-Key") != "up-alpha" || r.Header.Get("Anthropic-Version") == "" {
			t.Fatalf("upstream auth headers: %v", r.Header)
		}
		if r.Header.Get("Authorization") != "" {
			t.Fatalf("caller Authorization forwarded: %q", r.Header.Get("Authorization"))
		}
	}

	// The alpha SDK's default header x-api-key is accepted as the caller's key.
	viaAPIKey := anthropic.NewClient(aoption.WithBaseURL(e.base+"/alpha"), aoption.WithAPIKey(keyB), aoption.WithMaxRetries(0))
	if _, err := viaAPIKey.Messages.New(ctx, messageParams("chat-model")); err != nil {
		t.Fatalf("x-api-key caller on /alpha: %v", err)
	}
}

func TestAnthropicHeadersPassThrough(t *testing.T) {
	e := newEnv(t, nil)
	status, _, body := e.do("POST", "/v1/router/alpha/v1/messages", map[string]string{
		"Authorization": "Bearer " + keyA, "anthropic-version": "2023-06-01", "anthropic-beta": "files-api-2025-04-14",
	}, `{"model":"chat-model","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	r := e.received()[0]
	if r.Header.Get("Anthropic-Beta") != "files-api-2025-04-14" || r.Header.Get("Anthropic-Version") != "2023-06-01" {
		t.Fatalf("anthropic headers not passed through: %v", r.Header)
	}
}

func TestModelListSDK(t *testing.T) {
	e := newEnv(t, nil)
	client := openai.NewClient(option.WithBaseURL(e.base+"/v1"), option.WithAPIKey(keyA), option.WithMaxRetries(0))
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]openai.Model{}
	for _, m := range page.Data {
		ids[m.ID] = m
	}
	m, ok := ids["chat-model"]
	if len(ids) != 4 || !ok {
		t.Fatalf("models: %v", ids)
	}
	if m.Object != "model" || m.OwnedBy == "" || m.Created == 0 {
		t.Fatalf("model entry: %+v", m)
	}
	var params []string
	if err := json.Unmarshal([]byte(m.JSON.ExtraFields["supported_parameters"].Raw()), &params); err != nil {
		t.Fatal(err)
	}
	var reasoning reasoningEntry
	if err := json.Unmarshal([]byte(m.JSON.ExtraFields["reasoning"].Raw()), &reasoning); err != nil {
		t.Fatal(err)
	}
	if !contains(params, "reasoning") || !contains(reasoning.SupportedEfforts, "max") || reasoning.DefaultEffort != "medium" || !reasoning.DefaultEnabled {
		t.Fatalf("reasoning fields: %v %+v", params, reasoning)
	}
	// A second key sees the same list; no key sees 401.
	clientB := e.openai(keyB, option.WithBaseURL(e.base+"/v1"))
	if _, err := clientB.Models.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	status, _, body := e.do("GET", "/v1/models", nil, "")
	assertBetaError(t, status, body, 401)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// The bytes a provider receives are the client's bytes minus session_id.
func TestSessionIDSplicedOut(t *testing.T) {
	e := newEnv(t, nil)
	f := func(name, in, want string) {
		t.Helper()
		e.resetSims()
		status, _, body := e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(keyA), in)
		if status != 200 && want != "{}" {
			t.Fatalf("%s: status %d: %s", name, status, body)
		}
		got := e.received()
		if len(got) != 1 {
			t.Fatalf("%s: upstream got %d requests", name, len(got))
		}
		if string(got[0].Body) != want {
			t.Fatalf("%s: upstream body\n got %q\nwant %q", name, got[0].Body, want)
		}
	}
	msgs := `"messages":[{"role":"user","content":"a \"quoted\", {braced} text"}]`
	f("first", `{"session_id":"s1",`+msgs+`,"model":"chat-model"}`, `{`+msgs+`,"model":"chat-model"}`)
	f("last", `{"model":"chat-model",`+msgs+`,"session_id":"s1"}`, `{"model":"chat-model",`+msgs+`}`)
	f("middle", `{"model":"chat-model", "session_id" : "s,}\"1" ,`+msgs+`}`, `{"model":"chat-model", `+msgs+`}`)
	f("odd whitespace", "{\n\t\"model\" :\"chat-model\",\r\n  \"session_id\"\t:\n\"s1\"\n,\n"+msgs+"\n}", "{\n\t\"model\" :\"chat-model\",\r\n  "+msgs+"\n}")
	f("escaped key", `{"model":"chat-model",`+msgs+`,"session\u005fid":"s\u00e91"}`, `{"model":"chat-model",`+msgs+`}`)
	f("no session", `{"model":"chat-model",`+msgs+`}`, `{"model":"chat-model",`+msgs+`}`)
	f("nested session_id untouched", `{"model":"chat-model",`+msgs+`,"metadata":{"session_id":"keep"}}`, `{"model":"chat-model",`+msgs+`,"metadata":{"session_id":"keep"}}`)
	f("null session", `{"session_id":null,"model":"chat-model",`+msgs+`}`, `{"model":"chat-model",`+msgs+`}`)
	// alone: the provider rejects the empty body, but what it saw is {}.
	e.resetSims()
	status, _, _ := e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(keyA), `{"session_id":"s1"}`)
	if status != 400 || len(e.received()) != 0 {
		t.Fatalf("alone: want the gateway's 400 (no model), got %d and %d upstream calls", status, len(e.received()))
	}
}

// deploymentOf sends a chat call and returns which simulator answered.
func (e *testEnv) deploymentOf(headers map[string]string, body string) string {
	e.t.Helper()
	status, h, resp := e.do("POST", "/v1/router/beta/v1/chat/completions", headers, body)
	if status != 200 {
		e.t.Fatalf("status %d: %s", status, resp)
	}
	return string(h.Peek("x-sim-deployment"))
}

func chatBody(session string) string {
	if session == "" {
		return `{"model":"chat-model","messages":[{"role":"user","content":"hi"}]}`
	}
	return `{"model":"chat-model","session_id":"` + session + `","messages":[{"role":"user","content":"hi"}]}`
}

func withSession(key, session string) map[string]string {
	h := bearer(key)
	h["x-session-id"] = session
	return h
}

func TestAffinitySameKeySameDeployment(t *testing.T) {
	e := newEnv(t, nil)
	first := e.deploymentOf(bearer(keyA), chatBody("sticky"))
	for i := 0; i < 200; i++ {
		if got := e.deploymentOf(bearer(keyA), chatBody("sticky")); got != first {
			t.Fatalf("call %d landed on %s, first on %s", i, got, first)
		}
	}
	// The header alone gives the same choice as the body field.
	if got := e.deploymentOf(withSession(keyA, "sticky"), chatBody("")); got != first {
		t.Fatalf("header session landed on %s, body session on %s", got, first)
	}
}

func TestAffinityBodyBeatsHeader(t *testing.T) {
	e := newEnv(t, nil)
	// Find a header session and a body session that land apart.
	var hdr, body string
	for i := 0; i < 100 && (hdr == "" || body == ""); i++ {
		s := fmt.Sprintf("s-%d", i)
		switch e.deploymentOf(withSession(keyA, s), chatBody("")) {
		case "d1":
			hdr = s
		case "d2":
			body = s
		}
	}
	if hdr == "" || body == "" {
		t.Fatal("100 sessions all on one deployment")
	}
	for i := 0; i < 20; i++ {
		if got := e.deploymentOf(withSession(keyA, hdr), chatBody(body)); got != "d2" {
			t.Fatalf("body session_id should win over x-session-id: landed on %s", got)
		}
	}
}

func sessionSpread(e *testEnv, n int, seed uint64) map[string]string {
	r := rand.New(rand.NewPCG(seed, seed))
	where := make(map[string]string, n)
	for i := 0; i < n; i++ {
		s := fmt.Sprintf("sess-%016x", r.Uint64())
		where[s] = e.deploymentOf(withSession(keyA, s), chatBody(""))
	}
	return where
}

func TestAffinitySpreadAndMove(t *testing.T) {
	if testing.Short() {
		t.Skip("3,000 calls")
	}
	d3, err := sim.Listen("127.0.0.1:0", sim.Options{Name: "d3", BetaKey: "up-beta", NoRecord: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d3.Close()
	e := newEnv(t, nil)
	before := sessionSpread(e, 1000, 1)
	count := map[string]int{}
	for _, d := range before {
		count[d]++
	}
	if count["d1"] < 450 || count["d1"] > 550 || count["d1"]+count["d2"] != 1000 {
		t.Fatalf("1,000 sessions over two deployments: %v", count)
	}

	// A third deployment joins: about a third move, all of them to it.
	yaml := strings.Replace(fmt.Sprintf(testConfigYAML, e.sims[0].Addr(), e.sims[1].Addr(), HashKey(keyB)),
		"  - {name: d1-gamma", fmt.Sprintf("  - {name: d3-beta, family: beta, base_url: \"http://%s/v1\", api_key: up-beta}\n  - {name: d1-gamma", d3.Addr()), 1)
	yaml = strings.Replace(yaml, "upstreams: [d1-alpha, d2-alpha, d1-beta, d2-beta]", "upstreams: [d1-alpha, d2-alpha, d1-beta, d2-beta, d3-beta]", 1)
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if err := e.gw.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for s, was := range before {
		now := e.deploymentOf(withSession(keyA, s), chatBody(""))
		if now != was {
			if now != "d3" {
				t.Fatalf("session %s moved from %s to %s, not to the new deployment", s, was, now)
			}
			moved++
		}
	}
	if moved < 280 || moved > 390 {
		t.Fatalf("%d of 1,000 sessions moved to the third deployment; want about a third", moved)
	}
}

// While d1 is excluded, its sessions are served by d2. The cooldown is an
// hour, so that no machine is slow enough to see it end within the test.
func TestAffinityFailedDeploymentSessionsMove(t *testing.T) {
	e := newEnv(t, func(y string) string { return noFailover(longCooldown(y)) })
	spread := sessionSpread(e, 40, 2)
	excludeD1(t, e, spread)
	for s, was := range spread {
		if now := e.deploymentOf(withSession(keyA, s), chatBody("")); now != "d2" {
			t.Fatalf("session %s (was %s) on %s while d1 is excluded", s, was, now)
		}
	}
}

// Once d1's cooldown (300ms) is over and it answers again, every session is
// back on the deployment it had. The wait is for an outcome, bounded by 10 s.
func TestAffinityFailedDeploymentSessionsReturn(t *testing.T) {
	e := newEnv(t, noFailover)
	spread := sessionSpread(e, 40, 2)
	excludeD1(t, e, spread)
	e.sim("d1").SetFault(sim.Fault{})
	back := 0
	eventually(t, "every session back after the cooldown", func() bool {
		back = 0
		for s, was := range spread {
			if e.deploymentOf(withSession(keyA, s), chatBody("")) == was {
				back++
			}
		}
		return back == len(spread)
	})
}

// excludeD1 makes d1 answer 503 and sends two sessions of spread that live on
// d1 there: with health {failures: 2}, d1 is excluded. The 503s reach the
// client (failover is off) and count towards health.
func excludeD1(t *testing.T, e *testEnv, spread map[string]string) {
	t.Helper()
	e.sim("d1").SetFault(sim.Fault{Status: 503})
	var onD1 []string
	for s, d := range spread {
		if d == "d1" {
			onD1 = append(onD1, s)
		}
	}
	if len(onD1) < 2 {
		t.Fatal("fewer than 2 sessions on d1")
	}
	for _, s := range onD1[:2] {
		status, _, _ := e.do("POST", "/v1/router/beta/v1/chat/completions", withSession(keyA, s), chatBody(""))
		if status != 503 {
			t.Fatalf("the upstream's 503 should pass through, got %d", status)
		}
	}
}

// A deployment that refuses connections is skipped for the next one, within
// the same call.
func TestConnectionRefusedFailsOver(t *testing.T) {
	e := newEnv(t, nil)
	e.sim("d1").Close()
	for i := 0; i < 20; i++ {
		if got := e.deploymentOf(withSession(keyA, fmt.Sprint(i)), chatBody("")); got != "d2" {
			t.Fatalf("landed on %q", got)
		}
	}
	e.sim("d2").Close()
	status, _, body := e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(keyA), chatBody(""))
	assertBetaError(t, status, body, 502)
}

func TestUpstreamTimeout(t *testing.T) {
	e := newEnv(t, func(y string) string {
		return strings.Replace(y, "first_byte: 10s", "first_byte: 300ms", 1)
	})
	h := bearer(keyA)
	h["x-sim-fault"] = "first-byte=2s"
	status, _, body := e.do("POST", "/v1/router/beta/v1/chat/completions", h, chatBody(""))
	assertBetaError(t, status, body, 504)
	h = map[string]string{"Authorization": "Bearer " + keyA, "x-sim-fault": "first-byte=2s"}
	status, _, body = e.do("POST", "/v1/router/alpha/v1/messages", h, `{"model":"chat-model","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`)
	assertAlphaError(t, status, body, 504, "timeout_error")
}

// An answer's head must come whole within timeouts.first_byte: one whose
// bytes trickle in, each well within timeouts.idle, gets 504 at that bound,
// not after its 8 KiB at the pace the upstream likes.
func TestUpstreamTricklingHeadTimesOut(t *testing.T) {
	up := tcpUpstream(t, func(c net.Conn, br *bufio.Reader) {
		var req fasthttp.Request
		if req.Read(br) != nil {
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: "); err != nil {
			return
		}
		for { // a byte every 20 ms, for as long as the gateway reads
			time.Sleep(20 * time.Millisecond)
			if _, err := io.WriteString(c, "a"); err != nil {
				return
			}
		}
	})
	addr := gatewayFor(t, up, "timeouts: {first_byte: 1s, idle: 500ms}")
	answers, bodies := exchange(t, addr, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"+
		"Authorization: Bearer key-1\r\nConnection: close\r\nContent-Length: 27\r\n\r\n"+`{"model":"m","messages":[]}`)
	if len(answers) != 1 || answers[0].StatusCode != 504 {
		t.Fatalf("want 504, got %d answers %q", len(answers), bodies)
	}
}

// The body of an answer not asked for as a stream must come whole within
// timeouts.idle after its head: one whose bytes trickle, each well within
// idle, gets 504 there, whether fasthttp reads it whole or the relay does
// (a deployment whose bound is above what fasthttp reads at linear cost). A
// stream asked for as one may take as long as its reads keep coming.
func TestUpstreamTricklingBodyTimesOut(t *testing.T) {
	trickle := func(head string, n int) string {
		return tcpUpstream(t, func(c net.Conn, br *bufio.Reader) {
			var req fasthttp.Request
			if req.Read(br) != nil {
				return
			}
			if _, err := io.WriteString(c, head); err != nil {
				return
			}
			for i := 0; i < n; i++ { // a byte every 20 ms, while the gateway reads
				time.Sleep(20 * time.Millisecond)
				if _, err := io.WriteString(c, "a"); err != nil {
					return
				}
			}
		})
	}
	gateway := func(up, limits string) string {
		return gatewayFor(t, up, "timeouts: {first_byte: 4s, idle: 2s}", limits)
	}
	call := func(addr, body string) ([]*http.Response, []string) {
		return exchange(t, addr, "POST /v1/router/beta/v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"+
			"Authorization: Bearer key-1\r\nConnection: close\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	}
	whole := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
	for _, limits := range []string{"", "limits: {max_response_bytes: 134217728}"} {
		answers, bodies := call(gateway(trickle(whole, 100000), limits), `{"model":"m","messages":[]}`)
		if len(answers) != 1 || answers[0].StatusCode != 504 {
			t.Fatalf("%q: want 504, got %d answers %q", limits, len(answers), bodies)
		}
	}
	// A stream a byte at a time: 3.2 s in all, each read well within idle.
	events := strings.Repeat("data: {}\n\n", 5) + "data: [DONE]\n\n"
	sse := tcpUpstream(t, func(c net.Conn, br *bufio.Reader) {
		var req fasthttp.Request
		if req.Read(br) != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: "+strconv.Itoa(len(events))+"\r\n\r\n")
		for i := range events {
			time.Sleep(50 * time.Millisecond)
			if _, err := io.WriteString(c, events[i:i+1]); err != nil {
				return
			}
		}
	})
	answers, bodies := call(gateway(sse, ""), `{"model":"m","stream":true,"messages":[]}`)
	if len(answers) != 1 || answers[0].StatusCode != 200 || bodies[0] != events {
		t.Fatalf("stream: %d answers %q", len(answers), bodies)
	}
}

func TestUpstreamErrorPassesThrough(t *testing.T) {
	e := newEnv(t, nil)
	client := e.openai(keyA)
	_, err := client.Chat.Completions.New(context.Background(), chatParams("chat-model"), option.WithHeader("x-sim-fault", "status=429"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
		t.Fatalf("want the provider's 429, got %v", err)
	}
	// The provider rejects unknown fields; its error reaches the SDK.
	_, err = client.Chat.Completions.New(context.Background(), chatParams("chat-model"), option.WithJSONSet("not_a_field", 1))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "not_a_field") {
		t.Fatalf("want the provider's unknown-field 400, got %v", err)
	}
}

func TestMidStreamFailureEndsStreamNatively(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	oc := e.openai(keyA)
	stream := oc.Chat.Completions.NewStreaming(ctx, chatParams("chat-model"), option.WithHeader("x-sim-fault", "cut=3"))
	n := 0
	for stream.Next() {
		n++
	}
	if stream.Err() == nil || n == 0 {
		t.Fatalf("beta: want chunks then an error, got %d chunks and %v", n, stream.Err())
	}
	ac := e.anthropic(keyA)
	astream := ac.Messages.NewStreaming(ctx, messageParams("chat-model"), aoption.WithHeader("x-sim-fault", "cut=3"))
	n = 0
	for astream.Next() {
		n++
	}
	if astream.Err() == nil || n == 0 {
		t.Fatalf("alpha: want events then an error, got %d events and %v", n, astream.Err())
	}
	// Raw: the alpha stream ends with an event: error frame.
	h := bearer(keyA)
	h["x-sim-fault"] = "cut=2"
	status, hdr, body := e.do("POST", "/v1/router/alpha/v1/messages", h, `{"model":"chat-model","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if status != 200 || !strings.HasPrefix(string(hdr.ContentType()), "text/event-stream") {
		t.Fatalf("status %d content type %q", status, hdr.ContentType())
	}
	if !strings.Contains(string(body), "event: error\ndata: {\"type\":\"error\"") {
		t.Fatalf("alpha stream does not end with an error event:\n%s", body)
	}
	if string(hdr.Peek("X-Accel-Buffering")) != "no" || string(hdr.Peek("Cache-Control")) != "no-cache" {
		t.Fatalf("SSE headers: %s", hdr.String())
	}
}

// Every rejection answers in the family's native shape, and nothing reaches a provider.
func TestCoreRejections(t *testing.T) {
	e := newEnv(t, nil)
	long := strings.Repeat("x", 257)
	chat := "/v1/router/beta/v1/chat/completions"
	msgs := "/v1/router/alpha/v1/messages"
	alphaBody := `{"model":"chat-model","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`
	beta := func(name, path string, h map[string]string, body string, status int) {
		t.Helper()
		s, _, b := e.do("POST", path, h, body)
		assertBetaError(t, s, b, status)
	}
	alpha := func(name string, h map[string]string, body string, status int, typ string) {
		t.Helper()
		s, hdr, b := e.do("POST", msgs, h, body)
		assertAlphaError(t, s, b, status, typ)
		if len(hdr.Peek("request-id")) == 0 {
			t.Fatalf("%s: alpha error without request-id header", name)
		}
	}
	beta("no key", chat, nil, chatBody(""), 401)
	beta("wrong key", chat, bearer("sk-wrong"), chatBody(""), 401)
	beta("basic auth", chat, map[string]string{"Authorization": "Basic " + keyA}, chatBody(""), 401)
	beta("header session too long", chat, withSession(keyA, long), chatBody(""), 400)
	beta("body session too long", chat, bearer(keyA), chatBody(long), 400)
	beta("session not a string", chat, bearer(keyA), `{"model":"chat-model","session_id":7,"messages":[]}`, 400)
	beta("unknown model", chat, bearer(keyA), `{"model":"nope","messages":[]}`, 404)
	beta("model without beta route", chat, bearer(keyA), `{"model":"text-gamma","messages":[]}`, 404)
	beta("no model", chat, bearer(keyA), `{"messages":[]}`, 400)
	beta("bad json", chat, bearer(keyA), `{"model":"chat-model",`, 400)
	beta("not an object", chat, bearer(keyA), `["model"]`, 400)
	beta("unknown path", "/v1/router/beta/v1/nothing", bearer(keyA), chatBody(""), 404)
	alpha("no key", nil, alphaBody, 401, "authentication_error")
	alpha("wrong key", bearer("sk-wrong"), alphaBody, 401, "authentication_error")
	alpha("session too long", withSession(keyA, long), alphaBody, 400, "invalid_request_error")
	alpha("unknown model", bearer(keyA), `{"model":"nope","max_tokens":5,"messages":[]}`, 404, "not_found_error")
	alpha("bad json", bearer(keyA), `{`, 400, "invalid_request_error")
	// 256 characters, multi-byte, is within the limit.
	ok := strings.Repeat("é", 256)
	if d := e.deploymentOf(bearer(keyA), chatBody(ok)); d == "" {
		t.Fatal("256-character session rejected")
	}
	if n := len(e.received()); n != 1 {
		t.Fatalf("rejected calls reached a provider: %d upstream requests", n)
	}
}

func TestBodyTooLarge(t *testing.T) {
	e := newEnv(t, func(y string) string { return y + "limits: {max_body_bytes: 2048}\n" })
	big := `{"model":"chat-model","messages":[{"role":"user","content":"` + strings.Repeat("a", 4096) + `"}]}`
	s, _, b := e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(keyA), big)
	assertBetaError(t, s, b, 413)
	s, _, b = e.do("POST", "/v1/router/alpha/v1/messages", bearer(keyA), big)
	assertAlphaError(t, s, b, 413, "request_too_large")
	if len(e.received()) != 0 {
		t.Fatal("an oversized body reached a provider")
	}
}

// betaErrorBody is the OpenAI error body, as the tests read it.
type betaErrorBody struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func assertBetaError(t *testing.T, status int, body []byte, want int) {
	t.Helper()
	var v betaErrorBody
	if status != want || json.Unmarshal(body, &v) != nil || v.Error == nil || v.Error.Message == "" || v.Error.Type == "" {
		t.Fatalf("want %d in the beta error shape, got %d: %s", want, status, body)
	}
	if !strings.Contains(string(body), `"param":`) || !strings.Contains(string(body), `"code":`) {
		t.Fatalf("beta error without param/code: %s", body)
	}
}

// alphaErrorBody is the Anthropic error body, as the tests read it.
type alphaErrorBody struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

func assertAlphaError(t *testing.T, status int, body []byte, want int, typ string) {
	t.Helper()
	var v alphaErrorBody
	if status != want || json.Unmarshal(body, &v) != nil || v.Type != "error" || v.Error.Type != typ || v.Error.Message == "" || v.RequestID == "" {
		t.Fatalf("want %d %s in the alpha error shape, got %d: %s", want, typ, status, body)
	}
}
