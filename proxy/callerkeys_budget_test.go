package proxy

import (
	"encoding/json"
	"strings"
	"testing"
)

// A key made through the admin API with a money budget: the ledger applies it on the node
// the change reaches, refuses in the family's quota answer once it is spent, and a raise
// through the API admits the key again with what it spent kept.

// withRuntimeBudgets prices chat-model, configures the named budget ops and turns the
// admin API on.
func withRuntimeBudgets(y string) string {
	y = strings.Replace(y, "  - id: chat-model\n", "  - id: chat-model\n    pricing: "+spendPricing+"\n", 1)
	return withAdmin("budgets:\n  - {name: ops, usd: 7, period: month}\n")(y)
}

// runtimeBudgetBody reserves 50 input tokens and 64 output tokens at the highest prices:
// 1.43e9 pico-USD, over $0.0014.
const runtimeBudgetBody = `{"model":"chat-model","max_tokens":64,"messages":[{"role":"user","content":"Say hello to the world"}]}`

func TestKeysRuntimeBudget(t *testing.T) {
	e := newKeysEnv(t, withRuntimeBudgets)
	created := e.adminJSON("POST", "/admin/v1/keys", `{"id":"rt-1","budget":{"usd":0.002,"period":"day"},"budgets":["ops"]}`, 201)
	secret := created["key"].(string)
	if b, _ := json.Marshal(created["budget"]); string(b) != `{"period":"day","usd":"0.002"}` || len(created["budgets"].([]any)) != 1 {
		t.Fatalf("created: %v", created)
	}
	got := e.adminJSON("GET", "/admin/v1/keys/rt-1", "", 200)
	if b, _ := json.Marshal(got["budget"]); string(b) != `{"period":"day","usd":"0.002"}` || got["budgets"].([]any)[0] != "ops" {
		t.Fatalf("the key's view: %v", got)
	}
	// Calls until the budget refuses one: each spends its reported usage, and the next
	// reservation no longer fits within $0.002.
	admitted, refused := 0, false
	for range 200 {
		status, _, body := e.do("POST", chatPath, bearer(secret), runtimeBudgetBody)
		if status == 200 {
			admitted++
			continue
		}
		if status != 429 || !strings.Contains(string(body), `"code":"insufficient_quota"`) ||
			!strings.Contains(string(body), "key 'rt-1' allows $0.002 per day") {
			t.Fatalf("after %d calls: %d %s", admitted, status, body)
		}
		refused = true
		break
	}
	if !refused || admitted == 0 {
		t.Fatalf("admitted %d calls, refused %v: want some then a refusal", admitted, refused)
	}
	var spent int64
	for _, ln := range e.gw.spend.ledger.Report() {
		if ln.Own && ln.Name == "rt-1" {
			spent = ln.Spent
		}
	}
	if spent == 0 {
		t.Fatal("the key's budget recorded no spend")
	}
	// A raise through the API admits the key again, and keeps what was spent.
	e.adminJSON("PATCH", "/admin/v1/keys/rt-1", `{"budget":{"usd":"5","period":"day"}}`, 200)
	if status, _, body := e.do("POST", chatPath, bearer(secret), runtimeBudgetBody); status != 200 {
		t.Fatalf("after the raise: %d %s", status, body)
	}
	raised := false
	for _, ln := range e.gw.spend.ledger.Report() {
		if ln.Own && ln.Name == "rt-1" {
			raised = ln.Limit == 5e12 && ln.Spent > spent
			if !raised {
				t.Fatalf("after the raise: %+v, spent %d before", ln, spent)
			}
		}
	}
	if !raised {
		t.Fatal("no line of the key's budget after the raise")
	}
	// The named budget is spent too; clearing both leaves the key without budgets.
	if !e.gw.spend.ledger.Applies("rt-1") {
		t.Fatal("the key has no budget in force")
	}
	e.adminJSON("PATCH", "/admin/v1/keys/rt-1", `{"budget":null,"budgets":null}`, 200)
	if e.gw.spend.ledger.Applies("rt-1") {
		t.Fatal("a key whose budgets were cleared still spends one")
	}
}

func TestKeysRuntimeBudgetBadInput(t *testing.T) {
	e := newKeysEnv(t, withRuntimeBudgets)
	f := func(body, field, message string) {
		t.Helper()
		status, b := e.call("POST", "/admin/v1/keys", adminToken, body)
		var v struct {
			Error struct{ Field, Message string }
		}
		json.Unmarshal(b, &v)
		if status != 400 || v.Error.Field != field || !strings.Contains(v.Error.Message, message) {
			t.Fatalf("%s: %d %s, want 400 on %s: %s", body, status, b, field, message)
		}
	}
	f(`{"budget":{"usd":1,"period":"year"}}`, "budget.period", `must be one of day, week, month, total, not "year"`)
	f(`{"budget":{"usd":"-1"}}`, "budget.usd", `invalid amount "-1"`)
	f(`{"budget":{"usd":1e-3}}`, "budget.usd", `invalid amount "1e-3"`)
	f(`{"budget":{"usd":"0.0000000000001"}}`, "budget.usd", "invalid amount")
	f(`{"budget":{"usd":2000000}}`, "budget.usd", "invalid amount")
	f(`{"budget":{"period":"day"}}`, "budget.usd", "required")
	f(`{"budget":{"usd":1,"per":"day"}}`, "budget.per", "unknown field")
	f(`{"budget":5}`, "budget", "expected")
	f(`{"budgets":["nope"]}`, "budgets[0]", `unknown budget "nope"`)
	f(`{"budgets":["ops","ops"]}`, "budgets[1]", `duplicate budget "ops"`)
	f(`{"budgets":["ops","a","b","c","d","e","f","g"]}`, "budgets", "at most 7 budgets per key")
	f(`{"budgets":"ops"}`, "budgets", "expected")
	if status, b := e.call("GET", "/admin/v1/keys?limit=10", adminToken, ""); status != 200 || strings.Contains(string(b), `"budget"`) {
		t.Fatalf("a refused key was made: %d %s", status, b)
	}
}
