package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/valyala/fasthttp"
	"google.golang.org/genai"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/spend"
)

// The prices of the budget tests, in USD per million tokens: each kind its
// own, so that a token priced as another kind shows. In pico-USD per token:
// input 3e6, cached 3e5, output 15e6, reasoning 20e6; an image 4e10.
const spendPricing = `{input: 3, output: 15, cached_input: 0.3, cache_write: 3.75, reasoning: 20, image: 0.04}`

// withBudget prices chat-model and image-model and gives team-a the budget
// (a YAML mapping), team-b the named budget shared.
func withBudget(budget string) func(string) string {
	return func(y string) string {
		y = strings.Replace(y, "  - id: chat-model\n", "  - id: chat-model\n    pricing: "+spendPricing+"\n", 1)
		y = strings.Replace(y, "  - id: image-model\n", "  - id: image-model\n    pricing: "+spendPricing+"\n", 1)
		y = strings.Replace(y, "{id: team-a, key: "+keyA+"}", "{id: team-a, key: "+keyA+", budget: "+budget+"}", 1)
		return y
	}
}

// usageCost prices reported counts as the family's provider bills them:
// beta's prompt holds its cached tokens and its completion its reasoning;
// alpha counts cache reads apart from input; gamma's prompt holds its
// cached tokens and its thoughts are apart from its candidates.
func usageCost(fam string, in, out, cached, reasoning int64) int64 {
	const pIn, pCached, pOut, pReason = 3_000_000, 300_000, 15_000_000, 20_000_000
	switch fam {
	case "alpha":
		return in*pIn + cached*pCached + out*pOut
	case "beta":
		return (in-cached)*pIn + cached*pCached + (out-reasoning)*pOut + reasoning*pReason
	}
	return (in-cached)*pIn + cached*pCached + out*pOut + reasoning*pReason
}

// budgetLine returns the ledger's line of key team-a's own budget.
func (e *testEnv) budgetLine() spend.Line {
	for _, ln := range e.gw.spend.ledger.Report() {
		if ln.Own && ln.Name == "team-a" {
			return ln
		}
	}
	e.t.Fatal("team-a has no budget line")
	return spend.Line{}
}

// checkSpend waits for the ledger's spend of team-a to move by want (a
// stream settles when the gateway closes it) and for nothing to stay
// reserved, then checks it moved by exactly that.
func (e *testEnv) checkSpend(t *testing.T, before spend.Line, want int64) {
	t.Helper()
	var got spend.Line
	eventually(t, "the ledger settles every call", func() bool {
		got = e.budgetLine()
		return got.Reserved == 0 && got.Spent-before.Spent >= want
	})
	if moved := got.Spent - before.Spent; moved != want {
		t.Fatalf("spend moved by %d pico-USD, the reported usage costs %d", moved, want)
	}
	if want == 0 {
		t.Fatal("nothing to compare")
	}
}

// The spend counted equals the prices times the usage the simulator
// reported, exactly, for plain and streamed calls of every family, cached
// and reasoning tokens included, read through the official SDKs.
func TestSpendMatchesReportedUsage(t *testing.T) {
	e := newEnv(t, withBudget("{usd: 1000, period: month}"))
	ctx := context.Background()
	t.Run("beta", func(t *testing.T) {
		before, want := e.budgetLine(), int64(0)
		add := func(in, out, cached, reasoning int64) {
			if reasoning == 0 || cached == 0 {
				t.Errorf("the simulator reported no reasoning or cached tokens: %d %d", reasoning, cached)
			}
			want += usageCost("beta", in, out, cached, reasoning)
		}
		oc := e.openai(keyA)
		c, err := oc.Chat.Completions.New(ctx, chatParams("chat-model"))
		if err != nil {
			t.Fatal(err)
		}
		u := c.Usage
		add(u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails.CachedTokens, u.CompletionTokensDetails.ReasoningTokens)
		p := chatParams("chat-model")
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := oc.Chat.Completions.NewStreaming(ctx, p)
		for s.Next() {
			if u := s.Current().Usage; u.PromptTokens > 0 {
				add(u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails.CachedTokens, u.CompletionTokensDetails.ReasoningTokens)
			}
		}
		if s.Err() != nil {
			t.Fatal(s.Err())
		}
		r, err := oc.Responses.New(ctx, newResponseParams("chat-model", "hi"))
		if err != nil {
			t.Fatal(err)
		}
		add(r.Usage.InputTokens, r.Usage.OutputTokens, r.Usage.InputTokensDetails.CachedTokens, r.Usage.OutputTokensDetails.ReasoningTokens)
		rs := oc.Responses.NewStreaming(ctx, newResponseParams("chat-model", "hi again"))
		for rs.Next() {
			if ev := rs.Current(); ev.Type == "response.completed" {
				u := ev.Response.Usage
				add(u.InputTokens, u.OutputTokens, u.InputTokensDetails.CachedTokens, u.OutputTokensDetails.ReasoningTokens)
			}
		}
		if rs.Err() != nil {
			t.Fatal(rs.Err())
		}
		e.checkSpend(t, before, want)
	})
	t.Run("alpha", func(t *testing.T) {
		before := e.budgetLine()
		ac := e.anthropic(keyA)
		m, err := ac.Messages.New(ctx, messageParams("chat-model"))
		if err != nil {
			t.Fatal(err)
		}
		want := usageCost("alpha", m.Usage.InputTokens, m.Usage.OutputTokens, m.Usage.CacheReadInputTokens, 0)
		s := ac.Messages.NewStreaming(ctx, messageParams("chat-model"))
		var streamed anthropic.Message
		for s.Next() {
			if err := streamed.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if s.Err() != nil {
			t.Fatal(s.Err())
		}
		u := streamed.Usage
		if u.CacheReadInputTokens == 0 {
			t.Error("the simulator reported no cache reads")
		}
		want += usageCost("alpha", u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, 0)
		e.checkSpend(t, before, want)
	})
	t.Run("gamma", func(t *testing.T) {
		before := e.budgetLine()
		gc, _ := e.gammaClient("/v1/router/gamma", "v1beta", keyA, nil)
		r, err := gc.Models.GenerateContent(ctx, "image-model", genai.Text("Say hello"), nil)
		if err != nil {
			t.Fatal(err)
		}
		u := r.UsageMetadata
		e.checkSpend(t, before, usageCost("gamma", int64(u.PromptTokenCount), int64(u.CandidatesTokenCount),
			int64(u.CachedContentTokenCount), int64(u.ThoughtsTokenCount)))
	})
	t.Run("images", func(t *testing.T) {
		before := e.budgetLine()
		status, _, body := e.do("POST", imagesPath, bearer(keyA), `{"model":"image-model","prompt":"a cat","n":2}`)
		if status != 200 {
			t.Fatalf("%d %s", status, body)
		}
		var got struct {
			Usage struct {
				In  int64 `json:"input_tokens"`
				Out int64 `json:"output_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		e.checkSpend(t, before, usageCost("beta", got.Usage.In, got.Usage.Out, 0, 0)+2*40_000_000_000)
	})
	// The spend counter per key and model is the ledger's, in USD.
	m := e.scrape()
	line := e.budgetLine()
	sum := m[`gateway_spend_usd_total{key="team-a",model="chat-model"}`] + m[`gateway_spend_usd_total{key="team-a",model="image-model"}`]
	if math.Abs(sum-float64(line.Spent)/1e12) > 1e-9 {
		t.Errorf("gateway_spend_usd_total sums to %v, the ledger holds %d pico-USD", sum, line.Spent)
	}
	if got := m[`gateway_budget_spent_usd{key="team-a"}`]; math.Abs(got-float64(line.Spent)/1e12) > 1e-9 {
		t.Errorf("gateway_budget_spent_usd %v", got)
	}
}

// A beta chat stream whose client did not ask for usage is charged: the
// gateway asks for it, and the client sees no usage chunk.
func TestSpendStreamWithoutIncludeUsage(t *testing.T) {
	e := newEnv(t, withBudget("{usd: 1000, period: month}"))
	before, tokens := e.budgetLine(), e.scrape()
	s := e.openai(keyA).Chat.Completions.NewStreaming(context.Background(), chatParams("chat-model"))
	chunks := 0
	for s.Next() {
		chunks++
		if s.Current().Usage.PromptTokens != 0 || s.Current().JSON.Usage.Valid() {
			t.Fatalf("chunk %d carries usage the client did not ask for: %s", chunks, s.Current().RawJSON())
		}
	}
	if s.Err() != nil || chunks == 0 {
		t.Fatal(s.Err(), chunks)
	}
	var after map[string]float64
	moved := func(kind string) int64 {
		k := `gateway_tokens_total{key="team-a",model="chat-model",kind="` + kind + `"}`
		return int64(after[k] - tokens[k])
	}
	eventually(t, "the stream's usage is counted", func() bool {
		after = e.scrape()
		return moved("input") > 0
	})
	e.checkSpend(t, before, usageCost("beta", moved("input"), moved("output"), moved("cached"), moved("reasoning")))
	if up := e.received(); len(up) != 1 || !strings.Contains(string(up[0].Body), `"include_usage":true`) {
		t.Fatalf("the provider was not asked for usage: %d calls", len(up))
	}
}

// A call its budget does not fit is refused before any upstream in the
// family's answer to a spent balance, with x-should-retry: false.
func TestSpendRefusalShapes(t *testing.T) {
	// 100 bytes of body reserve 50 input tokens; a max of 64 output tokens
	// at 20e6 (reasoning's price, the highest output) is 1.28e9: over $0.001.
	e := newEnv(t, withBudget("{usd: 0.001, period: day}"))
	f := func(path string, h map[string]string, body string, wantStatus int, wantBody string) {
		t.Helper()
		status, got, b := e.do("POST", path, h, body)
		if rid := string(got.Peek("X-Request-Id")); rid != "" {
			wantBody = strings.ReplaceAll(wantBody, "$RID", rid)
		}
		if status != wantStatus || !strings.Contains(string(b), wantBody) {
			t.Fatalf("%s: %d %s\nwant %d %s", path, status, b, wantStatus, wantBody)
		}
		if v := string(got.Peek("x-should-retry")); v != "false" {
			t.Errorf("%s: x-should-retry %q", path, v)
		}
	}
	const left = "key 'team-a' allows $0.001 per day and has $0.001 left; this call may cost up to $"
	f(chatPath, bearer(keyA), `{"model":"chat-model","max_tokens":64,"messages":[{"role":"user","content":"Say hello"}]}`, 429,
		`{"error":{"message":"You exceeded your current quota: `+left)
	f(chatPath, bearer(keyA), `{"model":"chat-model","max_tokens":64,"messages":[{"role":"user","content":"Say hello"}]}`, 429,
		`","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	f(messagesPath, bearer(keyA), `{"model":"chat-model","max_tokens":64,"messages":[{"role":"user","content":"Say hello"}]}`, 400,
		`{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the API: `+left)
	f("/gamma/v1beta/models/image-model:generateContent", map[string]string{"x-gamma-api-key": keyA}, gammaImageBody, 429,
		`{"error":{"code":429,"message":"`+left)
	f("/gamma/v1beta/models/image-model:generateContent", map[string]string{"x-gamma-api-key": keyA}, gammaImageBody, 429,
		`"status":"RESOURCE_EXHAUSTED"}}`)
	if n := len(e.received()); n != 0 {
		t.Fatalf("the providers saw %d calls, want none", n)
	}
	if status, body := e.chat(keyB); status != 200 {
		t.Fatalf("a key without a budget: %d %s", status, body)
	}
	// A call that makes no model generate costs nothing: no budget refuses it.
	if status, _, body := e.do("POST", "/v1/router/beta/v1/responses/input_tokens", bearer(keyA), `{"model":"chat-model","input":"hi"}`); status != 200 {
		t.Fatalf("input tokens count: %d %s", status, body)
	}
	// The SDKs read the refusals as their quota errors and do not retry.
	_, err := e.openai(keyA).Chat.Completions.New(context.Background(), chatParams("chat-model"))
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 429 || oe.Code != "insufficient_quota" {
		t.Fatalf("openai-go: %v", err)
	}
	if n := len(e.received()); n != 2 {
		t.Fatalf("the providers saw %d calls, want team-b's and the input tokens count", n)
	}
	if ln := e.budgetLine(); ln.Spent != 0 || ln.Reserved != 0 || ln.Refused != 6 {
		t.Fatalf("budget after refusals: %+v", ln)
	}
}

// The admin API and the status page show each budget's spend and what is
// left; the admin API wants an admin token.
func TestBudgetAdminAndStatus(t *testing.T) {
	e := newEnv(t, func(y string) string {
		y = withBudget("{usd: 2.5, period: week}")(y)
		y = strings.Replace(y, "{id: team-b, sha256: ", "{id: team-b, budgets: [ops], sha256: ", 1)
		return y + "budgets:\n  - {name: ops, usd: 7, period: month}\nadmin:\n  tokens: [{id: ops, key: " + adminToken + "}]\n"
	})
	if status, body := e.chat(keyA); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	ln := e.budgetLine()
	get := func(token string) (int, []byte) {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI("/admin/v1/budgets")
		if token != "" {
			ctx.Request.Header.Set("Authorization", "Bearer "+token)
		}
		e.gw.AdminHandler()(&ctx)
		return ctx.Response.StatusCode(), ctx.Response.Body()
	}
	if status, _ := get(""); status != 401 {
		t.Fatalf("without a token: %d", status)
	}
	status, body := get(adminToken)
	var got struct{ Budgets []budgetView }
	if err := json.Unmarshal(body, &got); status != 200 || err != nil || len(got.Budgets) != 2 {
		t.Fatalf("%d %s %v", status, body, err)
	}
	a, ops := got.Budgets[0], got.Budgets[1]
	if a.Key != "team-a" || a.Period != "week" || a.Limit != "2.5" || a.Spent != config.USD(ln.Spent).String() ||
		a.Remaining != config.USD(25e11-ln.Spent).String() || ln.Spent == 0 {
		t.Errorf("team-a: %+v (ledger %+v)", a, ln)
	}
	if ops.Budget != "ops" || ops.Limit != "7" || ops.Spent != "0" || ops.Remaining != "7" {
		t.Errorf("ops: %+v", ops)
	}
	_, _, page := adminGet(e.gw, "/status")
	if !strings.Contains(string(page), `<td class="num">`+a.Spent+`</td>`) || !strings.Contains(string(page), "key team-a") {
		t.Errorf("the status page lacks team-a's spend %s", a.Spent)
	}
}

// A stream its client leaves mid-way is settled: its reservation released,
// the estimate of what it used charged (the input the provider reported and
// one token per event relayed, at least).
func TestSpendClientGoneMidStream(t *testing.T) {
	e := newEnv(t, withBudget("{usd: 1000, period: month}"))
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second)) // a safety net
	body := `{"model":"chat-model","max_tokens":500,"stream":true,"messages":[{"role":"user","content":"x"}]}`
	fmt.Fprintf(conn, "POST /v1/router/alpha/v1/messages HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer %s\r\n"+
		"X-Sim-Event-Delay: 200ms\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", keyA, len(body), body)
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "data: ") {
			break
		}
	}
	if ln := e.budgetLine(); ln.Reserved == 0 {
		t.Fatalf("the stream holds no reservation: %+v", ln)
	}
	conn.Close()
	var ln spend.Line
	eventually(t, "the stream's reservation is settled", func() bool {
		ln = e.budgetLine()
		return ln.Reserved == 0
	})
	if ln.Spent < 3_000_000 { // at least one input token at $3 per million
		t.Fatalf("the stream cut short was charged %d pico-USD", ln.Spent)
	}
}

// A config without any price makes a free table, whose calls look up no
// prices; a price on one model, or on one deployment of one, does not.
func TestPriceTableFree(t *testing.T) {
	f := func(yaml string, free bool) {
		t.Helper()
		cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		if got := newPriceTable(cfg).free; got != free {
			t.Fatalf("free = %v, want %v:\n%s", got, free, yaml)
		}
	}
	const base = `
keys: [{id: k, key: key-1}]
upstreams:
  - {name: u1, family: beta, base_url: "http://127.0.0.1:1/v1", api_key: a}
  - {name: u2, family: beta, base_url: "http://127.0.0.1:1/v1", api_key: a}
models:
  - {id: n, upstreams: [u1]}
`
	f(base+"  - {id: m, upstreams: [u1, u2]}\n", true)
	f(base+"  - {id: m, upstreams: [u1, u2], pricing: {input: 3}}\n", false)
	f(base+"  - {id: m, upstreams: [u1, {name: u2, pricing: {output: 2}}]}\n", false)
	f(base+"  - {id: m, upstreams: [u1, {name: u2, pricing: {input: 0}}]}\n", true)
}
