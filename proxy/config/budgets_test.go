package config

import (
	"strings"
	"testing"
)

const budgetYAML = `
budgets:
  - {name: team, usd: 500, period: month}
keys:
  - {id: a, key: "ka", budget: {usd: 100.000000000001, period: day}, budgets: [team]}
  - {id: b, key: "kb", budgets: [team]}
upstreams:
  - {name: u1, family: beta, base_url: "https://api.example.com/v1", api_key: "u"}
  - {name: u2, family: beta, base_url: "https://api.example.com/v1", api_key: "u"}
models:
  - id: m
    upstreams: [u1, {name: u2, pricing: {input: 0.000001, output: 2}}]
    pricing: {input: 3, output: 15, cached_input: 0.075, cache_write: 3.75, reasoning: 20, image: 0.04}
    default_max_output_tokens: 8192
  - {id: free, upstreams: [u1]}
`

// Amounts are read from their decimal text, exactly, as pico-USD.
func TestParseBudgets(t *testing.T) {
	cfg, err := Parse([]byte(budgetYAML), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Keys[0]
	if k.Budget.USD != 100_000_000_000_001 || k.Budget.Period != "day" || k.Budgets[0] != "team" {
		t.Fatalf("key budget: %+v %v", k.Budget, k.Budgets)
	}
	p := cfg.Models[0].Pricing
	if p.Input != 3*PicoPerUSD || p.CachedInput != 75_000_000_000 || p.CacheWrite != 3_750_000_000_000 ||
		*p.Reasoning != 20*PicoPerUSD || p.Image != 40_000_000_000 || cfg.Models[0].DefaultMaxOutputTokens != 8192 {
		t.Fatalf("pricing: %+v", p)
	}
	if up := cfg.Models[0].Upstreams[1].Pricing; up == nil || up.Input != 1_000_000 {
		t.Fatalf("deployment pricing: %+v", up)
	}
	if cfg.Budgets[0].USD != 500*PicoPerUSD || USD(100_000_000_000_001).String() != "100.000000000001" || USD(0).String() != "0" {
		t.Fatalf("budgets: %+v", cfg.Budgets)
	}
	if got := cfg.Unpriced(); len(got) != 1 || got[0] != "free" {
		t.Fatalf("unpriced: %v", got)
	}
}

func TestBudgetErrorsNameTheField(t *testing.T) {
	f := func(edit func(string) string, want ...string) {
		t.Helper()
		_, err := Parse([]byte(edit(budgetYAML)), env(nil))
		if err == nil {
			t.Fatalf("no error, want %q", want)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q lacks %q", err, w)
			}
		}
	}
	rep := func(old, new string) func(string) string {
		return func(y string) string { return strings.Replace(y, old, new, 1) }
	}
	f(rep("budgets: [team]}", "budgets: [nope]}"), `keys[0].budgets[0]: unknown budget "nope"`)
	f(rep("period: month}", "period: year}"), `budgets[0].period: must be one of day, week, month, total, not "year"`)
	f(rep("usd: 500", "usd: -5"), "budgets[0].usd: expected an amount in USD")
	f(rep("usd: 500", "usd: 1.0000000000001"), "budgets[0].usd: expected an amount in USD")
	f(rep("usd: 500", "usd: 2000000"), "budgets[0].usd: expected an amount in USD")
	f(rep("input: 3,", "input: 3.0000001,"), "models[0].pricing.input: at most 6 decimals")
	f(rep("{name: team,", "{name: a:b,"), "budgets[0].name: must not contain")
	f(rep("  - {name: team, usd: 500, period: month}\n", "  - {name: team, usd: 500, period: month}\n  - {name: team, usd: 1}\n"), `budgets[1].name: duplicate name "team"`)
	f(rep("default_max_output_tokens: 8192", "default_max_output_tokens: -1"), "models[0].default_max_output_tokens: must not be negative")
}
