package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"google.golang.org/genai"
)

// manualClock is the gateways' clock in the rate-limit tests: it moves only
// when a test moves it, so no count depends on how fast the machine runs.
type manualClock struct{ ns atomic.Int64 }

var limitEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newManualClock() *manualClock {
	c := &manualClock{}
	c.ns.Store(limitEpoch.UnixNano())
	return c
}

func (c *manualClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *manualClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// withKeyLimits gives team-a the limits (a YAML mapping).
func withKeyLimits(limits string) func(string) string {
	return func(y string) string {
		return strings.Replace(y, "{id: team-a, key: "+keyA+"}", "{id: team-a, key: "+keyA+", limits: "+limits+"}", 1)
	}
}

func limitEnv(t *testing.T, limits string) (*testEnv, *manualClock) {
	t.Helper()
	clk := newManualClock()
	return newEnvAt(t, withKeyLimits(limits), clk.now), clk
}

const (
	limitChatBody     = `{"model":"chat-model","messages":[{"role":"user","content":"Say hello"}]}`
	limitMessagesBody = `{"model":"chat-model","max_tokens":16,"messages":[{"role":"user","content":"Say hello"}]}`
	messagesPath      = "/v1/router/alpha/v1/messages"
)

func (e *testEnv) chat(key string) (int, []byte) {
	e.t.Helper()
	status, _, body := e.do("POST", chatPath, bearer(key), limitChatBody)
	return status, body
}

// metricsText returns the gateway's /metrics page.
func (e *testEnv) metricsText() string {
	var b bytes.Buffer
	e.gw.WritePrometheus(&b)
	return b.String()
}

// waitFor waits, up to 10 s, for cond: for what the gateway does after the
// client has its last byte (a stream is settled when fasthttp closes it).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not so after 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRateLimitRequestsExact(t *testing.T) {
	e, clk := limitEnv(t, "{requests_per_minute: 60}")
	for i := range 60 {
		if status, body := e.chat(keyA); status != 200 {
			t.Fatalf("call %d: %d %s", i+1, status, body)
		}
	}
	for i := range 5 {
		if status, body := e.chat(keyA); status != 429 {
			t.Fatalf("call %d over the limit: %d %s", 61+i, status, body)
		}
	}
	if status, body := e.chat(keyB); status != 200 {
		t.Fatalf("another key: %d %s", status, body)
	}
	if n := len(e.received()); n != 61 {
		t.Fatalf("the providers saw %d calls, want 61: a refused call must not reach them", n)
	}
	clk.advance(time.Second)
	if status, _ := e.chat(keyA); status != 200 {
		t.Fatalf("a second later one call is due, got %d", status)
	}
	m := e.metricsText()
	for _, want := range []string{
		`gateway_ratelimit_limit{key="team-a",model="",kind="requests"} 60`,
		`gateway_ratelimit_used{key="team-a",model="",kind="requests"} 60`,
		`gateway_ratelimit_rejections_total{key="team-a",model="",kind="requests"} 5`,
		`gateway_rejections_total{family="beta",reason="rate_limit_requests"} 5`,
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestRateLimitAnswerShapes byte-checks the 429 of each family.
func TestRateLimitAnswerShapes(t *testing.T) {
	e, _ := limitEnv(t, "{requests_per_minute: 1}")
	if status, body := e.chat(keyA); status != 200 {
		t.Fatalf("first call: %d %s", status, body)
	}
	const msg = "rate limit exceeded: key 'team-a' allows 1 requests per minute; retry after 60s"
	f := func(method, path string, h map[string]string, body, wantBody string, wantHeaders ...string) {
		t.Helper()
		status, got, b := e.do(method, path, h, body)
		if rid := string(got.Peek("X-Request-Id")); rid != "" {
			wantBody = strings.ReplaceAll(wantBody, "$RID", rid)
		}
		if status != 429 || string(b) != wantBody {
			t.Fatalf("%s: %d %s\nwant 429 %s", path, status, b, wantBody)
		}
		wantHeaders = append(wantHeaders, "Retry-After", "60", "Content-Type", "application/json")
		for i := 0; i < len(wantHeaders); i += 2 {
			if v := string(got.Peek(wantHeaders[i])); v != wantHeaders[i+1] {
				t.Errorf("%s: %s = %q, want %q", path, wantHeaders[i], v, wantHeaders[i+1])
			}
		}
		if v := got.Peek("x-should-retry"); v != nil {
			t.Errorf("%s: x-should-retry %q on a 429", path, v)
		}
	}
	f("POST", chatPath, bearer(keyA), limitChatBody,
		`{"error":{"message":"`+msg+`","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
		"x-ratelimit-limit-requests", "1", "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "1m0s")
	f("POST", messagesPath, bearer(keyA), limitMessagesBody,
		`{"type":"error","error":{"type":"rate_limit_error","message":"`+msg+`"},"request_id":"$RID"}`,
		"anthropic-ratelimit-requests-limit", "1", "anthropic-ratelimit-requests-remaining", "0",
		"anthropic-ratelimit-requests-reset", "2026-03-01T12:01:00Z")
	f("POST", "/gamma/v1beta/models/image-model:generateContent", map[string]string{"x-gamma-api-key": keyA}, gammaImageBody,
		`{"error":{"code":429,"message":"`+msg+`","status":"RESOURCE_EXHAUSTED",`+
			`"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"60s"}]}}`)
	if n := len(e.received()); n != 1 {
		t.Fatalf("the providers saw %d calls, want 1", n)
	}
}

// TestRateLimitSDKsParse429 shows each official SDK reading the gateway's 429
// into its error type (their own retries off: they honour retry-after).
func TestRateLimitSDKsParse429(t *testing.T) {
	e, _ := limitEnv(t, "{requests_per_minute: 1}")
	ctx := context.Background()
	if _, err := e.openai(keyA).Chat.Completions.New(ctx, chatParams("chat-model")); err != nil {
		t.Fatal(err)
	}
	_, err := e.openai(keyA).Chat.Completions.New(ctx, chatParams("chat-model"))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 429 || oe.Type != "requests" || oe.Code != "rate_limit_exceeded" ||
		oe.Response.Header.Get("x-ratelimit-remaining-requests") != "0" {
		t.Fatalf("openai-go: %v", err)
	}
	_, err = e.anthropic(keyA).Messages.New(ctx, messageParams("chat-model"))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 429 || !strings.Contains(ae.Error(), `"rate_limit_error"`) ||
		ae.Response.Header.Get("anthropic-ratelimit-requests-reset") != "2026-03-01T12:01:00Z" {
		t.Fatalf("anthropic-sdk-go: %v", err)
	}
	gc, _ := e.gammaClient("/gamma", "v1beta", keyA, nil)
	_, err = gc.Models.GenerateContent(ctx, "image-model", genai.Text("x"), imageConfig("1:1", "1K"))
	var ge genai.APIError
	if !errors.As(err, &ge) || ge.Code != 429 || ge.Status != "RESOURCE_EXHAUSTED" || len(ge.Details) != 1 ||
		ge.Details[0]["retryDelay"] != "60s" {
		t.Fatalf("genai: %#v", err)
	}
	if n := len(e.received()); n != 1 {
		t.Fatalf("the providers saw %d calls, want 1", n)
	}
}

// chatTokens returns the input + output tokens the answer body reports.
func chatTokens(t *testing.T, body []byte) int64 {
	t.Helper()
	var sum int64
	for _, f := range []string{`"prompt_tokens":`, `"completion_tokens":`} {
		i := bytes.Index(body, []byte(f))
		if i < 0 {
			t.Fatalf("no %s in %s", f, body)
		}
		rest := body[i+len(f):]
		n, err := strconv.ParseInt(string(rest[:bytes.IndexAny(rest, ",}")]), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		sum += n
	}
	return sum
}

// TestRateLimitTokens charges the usage the simulator reports, plain and
// streamed; a call is admitted while the budget is not spent.
func TestRateLimitTokens(t *testing.T) {
	probe := newEnv(t, nil)
	_, per := probe.chat(keyA)
	n := chatTokens(t, per)
	// Two calls' worth less one: the second is admitted (budget left), the third is not.
	e, clk := limitEnv(t, fmt.Sprintf("{tokens_per_minute: %d}", 2*n-1))
	for i := range 2 {
		status, body := e.chat(keyA)
		if status != 200 || chatTokens(t, body) != n {
			t.Fatalf("call %d: %d %s", i+1, status, body)
		}
	}
	status, h, body := e.do("POST", chatPath, bearer(keyA), limitChatBody)
	// 2n spent of 2n-1: the bucket is whole again in 2n*60000/(2n-1) ms, rounded up.
	wantReset := time.Duration((2*n*60000+2*n-2)/(2*n-1)) * time.Millisecond
	if status != 429 || !bytes.Contains(body, []byte(`"type":"tokens"`)) ||
		string(h.Peek("x-ratelimit-remaining-tokens")) != "0" ||
		string(h.Peek("x-ratelimit-limit-tokens")) != strconv.FormatInt(2*n-1, 10) ||
		string(h.Peek("x-ratelimit-reset-tokens")) != wantReset.String() {
		t.Fatalf("over the token budget: %d %s %s", status, body, h.String())
	}
	used := fmt.Sprintf(`gateway_ratelimit_used{key="team-a",model="",kind="tokens"} %d`, 2*n)
	if m := e.metricsText(); !strings.Contains(m, used+"\n") {
		t.Fatalf("/metrics lacks %s", used)
	}
	// A streamed answer is charged when it ends.
	clk.advance(time.Minute)
	stream := `{"model":"chat-model","max_tokens":16,"stream":true,"messages":[{"role":"user","content":"Say hello"}]}`
	if status, _, body := e.do("POST", messagesPath, bearer(keyA), stream); status != 200 || !bytes.Contains(body, []byte("message_stop")) {
		t.Fatalf("stream: %d %s", status, body)
	}
	waitFor(t, "the stream's tokens charged", func() bool {
		return !strings.Contains(e.metricsText(), `gateway_ratelimit_used{key="team-a",model="",kind="tokens"} 0`+"\n")
	})
}

// openStream starts a chat stream of a minute (120 events 500 ms apart) for
// key on a raw connection and returns once its first event arrived: the call
// holds its slot until the stream ends or the client goes away.
func openStream(t *testing.T, e *testEnv, key string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", e.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"plain-model","stream":true,"messages":[{"role":"user","content":"x"}]}`
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"x-sim-events: 120\r\nx-sim-event-delay: 500ms\r\nContent-Length: %d\r\n\r\n%s", chatPath, key, len(body), body)
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "HTTP/1.1 ") && !strings.HasPrefix(line, "HTTP/1.1 200") {
			t.Fatalf("stream refused: %s", line)
		}
		if strings.HasPrefix(line, "data: ") {
			return conn
		}
	}
}

// TestRateLimitConcurrentStreams: a stream holds its slot until it ends, a
// cancelled one gives it back; none leaks.
func TestRateLimitConcurrentStreams(t *testing.T) {
	e, _ := limitEnv(t, "{concurrent: 2}")
	a := openStream(t, e, keyA)
	b := openStream(t, e, keyA)
	status, h, body := e.do("POST", chatPath, bearer(keyA), limitChatBody)
	if status != 429 || !strings.Contains(string(body), "allows 2 concurrent requests") || string(h.Peek("Retry-After")) != "1" {
		t.Fatalf("a third call with two streams held: %d %s", status, body)
	}
	if status, _ := e.chat(keyB); status != 200 {
		t.Fatalf("another key: %d", status)
	}
	inFlight := func(n int) func() bool {
		return func() bool {
			return strings.Contains(e.metricsText(), fmt.Sprintf(`gateway_ratelimit_used{key="team-a",model="",kind="concurrent"} %d`+"\n", n))
		}
	}
	if !inFlight(2)() {
		t.Fatal("/metrics does not show the two streams in flight")
	}
	a.Close() // cancelled mid-stream
	waitFor(t, "the cancelled stream's slot given back", inFlight(1))
	if status, body := e.chat(keyA); status != 200 {
		t.Fatalf("a slot was freed: %d %s", status, body)
	}
	b.Close()
	waitFor(t, "every slot given back", inFlight(0))
	for range 5 {
		if status, _ := e.chat(keyA); status != 200 {
			t.Fatalf("calls one after another never exceed 2 at once: %d", status)
		}
	}
	if !inFlight(0)() {
		t.Fatal("finished calls leaked slots")
	}
}

func TestRateLimitPerModel(t *testing.T) {
	e, _ := limitEnv(t, "{requests_per_minute: 100, models: {plain-model: {requests_per_minute: 1}}}")
	plain := `{"model":"plain-model","messages":[{"role":"user","content":"x"}]}`
	if status, _, body := e.do("POST", chatPath, bearer(keyA), plain); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	status, _, body := e.do("POST", chatPath, bearer(keyA), plain)
	if status != 429 || !strings.Contains(string(body), "key 'team-a' on model 'plain-model' allows 1 requests per minute") {
		t.Fatalf("second plain-model call: %d %s", status, body)
	}
	if status, body := e.chat(keyA); status != 200 {
		t.Fatalf("another model of the key: %d %s", status, body)
	}
	if m := e.metricsText(); !strings.Contains(m, `gateway_ratelimit_rejections_total{key="team-a",model="plain-model",kind="requests"} 1`+"\n") {
		t.Fatal("/metrics lacks the per-model rejection")
	}
}

// TestRateLimitReload: limits change with the config; the use of a key that
// stays survives.
func TestRateLimitReload(t *testing.T) {
	e, _ := limitEnv(t, "{requests_per_minute: 2}")
	for range 2 {
		if status, _ := e.chat(keyA); status != 200 {
			t.Fatal(status)
		}
	}
	if err := e.gw.Reload(e.cfg); err != nil {
		t.Fatal(err)
	}
	if status, _ := e.chat(keyA); status != 429 {
		t.Fatalf("after a reload that keeps the key: %d, want 429", status)
	}
	raised := *e.cfg
	raised.Keys = append(raised.Keys[:0:0], raised.Keys...)
	l := *raised.Keys[0].Limits
	l.RequestsPerMinute = 3
	raised.Keys[0].Limits = &l
	if err := e.gw.Reload(&raised); err != nil {
		t.Fatal(err)
	}
	if status, _ := e.chat(keyA); status != 200 {
		t.Fatalf("raised to 3: %d", status)
	}
	if status, _ := e.chat(keyA); status != 429 {
		t.Fatalf("3 of 3 spent: %d", status)
	}
}
