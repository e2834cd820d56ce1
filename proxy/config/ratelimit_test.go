package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseKeyLimits(t *testing.T) {
	y := `
keys:
  - {id: a, key: "${KEY_A}", limits: {requests_per_minute: 600, tokens_per_minute: 200000, concurrent: 32,
     models: {m: {requests_per_minute: 60}}}}
  - {id: b, key: "kb"}
upstreams:
  - {name: u1, family: beta, base_url: "https://api.example.com/v1", api_key: "${UP}"}
models:
  - {id: m, upstreams: [u1]}
rate_limit: {fail_open: false, timeout: 100ms}
`
	cfg, err := Parse([]byte(y), env(map[string]string{"KEY_A": "a", "UP": "u"}))
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.Keys[0].Limits
	if l.Key() != (RateLimits{RequestsPerMinute: 600, TokensPerMinute: 200000, Concurrent: 32}) {
		t.Fatalf("key limits: %+v", l.Key())
	}
	if l.Models["m"] != (RateLimits{RequestsPerMinute: 60}) {
		t.Fatalf("model limits: %+v", l.Models)
	}
	if cfg.Keys[1].Limits != nil || cfg.RateLimit.Open() || cfg.RateLimit.Timeout.D() != 100*time.Millisecond {
		t.Fatalf("rate_limit: %+v, key b %+v", cfg.RateLimit, cfg.Keys[1].Limits)
	}
	def, err := Parse([]byte(minimalConfig), env(map[string]string{"KEY_A": "a", "UP": "u"}))
	if err != nil {
		t.Fatal(err)
	}
	if !def.RateLimit.Open() || def.RateLimit.Timeout.D() != 250*time.Millisecond {
		t.Fatalf("rate_limit defaults: %+v", def.RateLimit)
	}
}

func TestParseKeyLimitsErrorsNameTheField(t *testing.T) {
	f := func(limits, want string) {
		t.Helper()
		y := strings.Replace(minimalConfig, `{id: a, key: "${KEY_A}"}`, `{id: a, key: "${KEY_A}", limits: `+limits+`}`, 1)
		_, err := Parse([]byte(y), env(map[string]string{"KEY_A": "a", "UP": "u"}))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("limits %s: error %v, want it to name %q", limits, err, want)
		}
	}
	f(`{requests_per_minute: -1}`, "keys[0].limits.requests_per_minute: must be between 0")
	f(`{tokens_per_minute: 2000000000}`, "keys[0].limits.tokens_per_minute: must be between 0")
	f(`{concurrent: -2}`, "keys[0].limits.concurrent: must be between 0")
	f(`{models: {nope: {concurrent: 1}}}`, `keys[0].limits.models.nope: unknown model "nope"`)
	f(`{models: {m: {requests_per_minut: 1}}}`, "keys[0].limits.models.m.requests_per_minut: unknown field")
	f(`{models: [m]}`, "keys[0].limits.models: expected a mapping")
	f(`{requests_per_minute: lots}`, "keys[0].limits.requests_per_minute: expected an integer")
	y := minimalConfig + "rate_limit: {timeout: 1m}\n"
	if _, err := Parse([]byte(y), env(map[string]string{"KEY_A": "a", "UP": "u"})); err == nil || !strings.Contains(err.Error(), "rate_limit.timeout") {
		t.Fatalf("timeout 1m: %v", err)
	}
}
