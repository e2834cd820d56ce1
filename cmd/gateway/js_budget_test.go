package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/sim"
)

// budgetPricing is priced-model's prices in USD per million tokens, and the
// same in pico-USD per token (a price of p USD per million tokens is p*1e6
// pico-USD a token).
const budgetPricing = "{input: 3, output: 15, cached_input: 0.3, reasoning: 20}"

var budgetPico = struct{ input, output, cached, reasoning int64 }{3e6, 15e6, 3e5, 20e6}

// TestJSSDKBudget runs jsDir's budget-stream.mjs: openai streaming a chat
// completion without stream_options on a key with a money budget sees the
// chunks it sees on a key without budget, none with usage, though the gateway
// asked the provider for the usage; the call is charged the simulator's usage
// at the model's prices, to the pico-dollar. The call overshoots the budget
// (priced-model reserves one output token, and the answer has more), so the
// next call is refused: the SDK throws its 429 error with code
// insufficient_quota and, with its default retries, does not send it again.
func TestJSSDKBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the JS SDK tests install packages and start node")
	}
	node := installJS(t)
	e := newEnv(t)
	// The stream's estimate is its body's bytes / 2 input tokens at $3 and
	// one output token at $20, under $0.0005; its cost, the simulator's usage
	// priced, is above (checked below).
	const limit = "0.0005"
	e.writeConfig("  - {id: priced-model, upstreams: [s1-beta], pricing: "+budgetPricing+", default_max_output_tokens: 1}\n",
		"  - {id: team-c, key: "+keyC+", budget: {usd: "+limit+", period: total}}\n")
	g := e.start()
	env := []string{"GATEWAY_URL=" + g.base, "GATEWAY_BUDGET_KEY=" + keyC, "GATEWAY_FREE_KEY=" + keyA, "GATEWAY_CHAT_MODEL=priced-model"}
	runScript(t, node, g, "budget-stream.mjs", append(env, "GATEWAY_STEP=stream")...)

	// The budgeted stream asked the provider for its usage, the free one did not.
	reqs := e.sim.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[0].Body), `"stream_options":{"include_usage":true}`) ||
		strings.Contains(string(reqs[1].Body), "stream_options") {
		t.Fatalf("the provider got %d requests: %q", len(reqs), reqs)
	}
	// The usage the provider reported to the gateway: the simulator answers
	// the same body with the same usage.
	in, out, cached, reasoning := simStreamUsage(t, e, reqs[0])
	want := (in-cached)*budgetPico.input + cached*budgetPico.cached +
		(out-reasoning)*budgetPico.output + reasoning*budgetPico.reasoning
	if in == 0 || out == 0 || want <= pico(t, limit) {
		t.Fatalf("usage %d in (%d cached), %d out (%d reasoning): cost %d pico-USD does not pass the budget %s",
			in, cached, out, reasoning, want, limit)
	}

	// The charge: on the access line, in the spend counter and in the budget.
	var cost string
	deadline := time.Now().Add(15 * time.Second)
	for cost = accessCost(t, g, "team-c"); cost == ""; cost = accessCost(t, g, "team-c") {
		if time.Now().After(deadline) {
			t.Fatalf("no access line with a cost for team-c:\n%s", g.stdout.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("usage %d in (%d cached), %d out (%d reasoning): $%s charged of a $%s budget", in, cached, out, reasoning, cost, limit)
	if got := pico(t, cost); got != want {
		t.Errorf("the access line charged %s (%d pico-USD), the usage costs %d", cost, got, want)
	}
	metrics := func() map[string]string {
		_, _, body := do(t, "GET", g.admin+"/metrics", "", nil, "")
		m := map[string]string{}
		for _, line := range strings.Split(body, "\n") {
			if name, v, ok := strings.Cut(line, " "); ok && !strings.HasPrefix(line, "#") {
				m[name] = v
			}
		}
		return m
	}
	// The counters are updated as the call settles, before its access line;
	// the loop is a guard, not a wait on timing.
	m := metrics()
	for deadline := time.Now().Add(15 * time.Second); m[`gateway_spend_usd_total{key="team-a",model="priced-model"}`] == "" && time.Now().Before(deadline); m = metrics() {
		time.Sleep(20 * time.Millisecond)
	}
	for _, name := range []string{`gateway_spend_usd_total{key="team-c",model="priced-model"}`, `gateway_budget_spent_usd{key="team-c"}`} {
		if v, ok := m[name]; !ok || pico(t, v) != want {
			t.Errorf("%s = %q, want %d pico-USD", name, v, want)
		}
	}
	// The free key's stream is charged too (it has no budget, but a price).
	if v := m[`gateway_spend_usd_total{key="team-a",model="priced-model"}`]; v == "" || pico(t, v) == 0 {
		t.Errorf("the free key's stream cost nothing: %q", v)
	}

	// The budget is spent: the next call is refused, once, before the provider.
	runScript(t, node, g, "budget-stream.mjs", append(env, "GATEWAY_STEP=refused")...)
	if n := len(e.sim.Requests()); n != 3 { // the two streams and simStreamUsage's
		t.Errorf("the provider got %d requests, want 3: the refused call reached it", n)
	}
	if v := metrics()[`gateway_rejections_total{family="beta",reason="budget_exceeded"}`]; v != "1" {
		t.Errorf(`gateway_rejections_total{family="beta",reason="budget_exceeded"} = %q, want 1: the SDK retried`, v)
	}
	if n := strings.Count(g.stdout.String(), `"status":429`); n != 1 {
		t.Errorf("%d access lines with status 429, want 1:\n%s", n, g.stdout.String())
	}
}

// simStreamUsage sends r, a chat stream the gateway sent the simulator, to
// the simulator again and returns the usage of its usage chunk.
func simStreamUsage(t *testing.T, e *env, r sim.Request) (in, out, cached, reasoning int64) {
	t.Helper()
	headers := map[string]string{"Content-Type": "application/json", "x-sim-events": r.Header.Get("X-Sim-Events")}
	status, _, body := do(t, "POST", "http://"+e.sim.Addr()+r.Path, upBeta, headers, string(r.Body))
	if status != 200 {
		t.Fatalf("the simulator: %d %s", status, body)
	}
	found := false
	for _, line := range strings.Split(body, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Usage *struct {
				PromptTokens        int64 `json:"prompt_tokens"`
				CompletionTokens    int64 `json:"completion_tokens"`
				PromptTokensDetails struct {
					CachedTokens int64 `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
				CompletionTokensDetails struct {
					ReasoningTokens int64 `json:"reasoning_tokens"`
				} `json:"completion_tokens_details"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("a chunk of the simulator: %v: %s", err, data)
		}
		if u := c.Usage; u != nil {
			in, out = u.PromptTokens, u.CompletionTokens
			cached, reasoning = u.PromptTokensDetails.CachedTokens, u.CompletionTokensDetails.ReasoningTokens
			found = true
		}
	}
	if !found {
		t.Fatalf("no usage chunk in the simulator's stream:\n%s", body)
	}
	return in, out, cached, reasoning
}

// accessCost returns the cost_usd of g's access line of key id, "" when none.
func accessCost(t *testing.T, g *gateway, id string) string {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(g.stdout.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "request" && m["key_id"] == id {
			if c, ok := m["cost_usd"].(string); ok {
				return c
			}
		}
	}
	return ""
}
