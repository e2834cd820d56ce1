package config

import (
	"strings"
	"testing"
	"time"
)

const minimalConfig = `
keys:
  - {id: a, key: "${KEY_A}"}
upstreams:
  - {name: u1, family: beta, base_url: "https://api.example.com/v1", api_key: "${UP}"}
models:
  - {id: m, upstreams: [u1]}
`

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func TestParseConfigExpandsEnvAndDefaults(t *testing.T) {
	cfg, err := Parse([]byte(minimalConfig), env(map[string]string{"KEY_A": "secret-a", "UP": "up-key"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Keys[0].Key != "secret-a" || cfg.Upstreams[0].APIKey != "up-key" {
		t.Fatalf("env not expanded: %+v %+v", cfg.Keys[0], cfg.Upstreams[0])
	}
	if cfg.Listen != "127.0.0.1:8080" || cfg.Store.Engine != "pebble" || cfg.Store.Path != "./data" {
		t.Fatalf("defaults: listen %q store %+v", cfg.Listen, cfg.Store)
	}
	if cfg.Timeouts.Connect.D() != 5*time.Second || cfg.Timeouts.FirstByte.D() != 10*time.Minute || cfg.Timeouts.Idle.D() != 5*time.Minute {
		t.Fatalf("timeout defaults: %+v", cfg.Timeouts)
	}
	if cfg.Timeouts.IdleConn.D() != 4*time.Second {
		t.Fatalf("idle_conn default: %v", cfg.Timeouts.IdleConn.D())
	}
	if cfg.Retry != (Retry{Attempts: 3, BudgetPercent: 20, BudgetMinPerSecond: 3}) {
		t.Fatalf("retry defaults: %+v", cfg.Retry)
	}
	if cfg.Health.Failures != 3 || cfg.Limits.MaxBodyBytes != 32<<20 || cfg.Upstreams[0].MaxConns != 512 {
		t.Fatalf("defaults: %+v %+v %+v", cfg.Health, cfg.Limits, cfg.Upstreams[0])
	}
}

func TestParseConfigMissingEnv(t *testing.T) {
	_, err := Parse([]byte(minimalConfig), env(map[string]string{"KEY_A": "x"}))
	if err == nil || !strings.Contains(err.Error(), "UP") {
		t.Fatalf("want an error naming UP, got %v", err)
	}
}

// Every validation error names the offending field, and secrets never appear.
func TestConfigValidationNamesField(t *testing.T) {
	f := func(name, yaml, wantField string) {
		t.Helper()
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(yaml), env(nil))
			if err == nil {
				t.Fatalf("want an error naming %s", wantField)
			}
			if !strings.Contains(err.Error(), wantField) {
				t.Fatalf("error %q does not name %s", err, wantField)
			}
			if strings.Contains(err.Error(), "topsecret") {
				t.Fatalf("error leaks a secret: %q", err)
			}
		})
	}
	base := func(keys, ups, models string) string {
		return "keys:\n" + keys + "upstreams:\n" + ups + "models:\n" + models
	}
	okKeys := "  - {id: a, key: topsecret}\n"
	okUps := "  - {name: u1, family: beta, base_url: \"http://127.0.0.1:1/v1\", api_key: topsecret}\n"
	okModels := "  - {id: m, upstreams: [u1]}\n"
	f("no keys", "upstreams:\n"+okUps+"models:\n"+okModels, "keys")
	f("key without id", base("  - {key: topsecret}\n", okUps, okModels), "keys[0].id")
	f("duplicate key id", base(okKeys+"  - {id: a, key: other}\n", okUps, okModels), "keys[1].id")
	f("key and sha256", base("  - {id: a, key: topsecret, sha256: "+strings.Repeat("0", 64)+"}\n", okUps, okModels), "keys[0]")
	f("bad sha256", base("  - {id: a, sha256: xyz}\n", okUps, okModels), "keys[0].sha256")
	f("bad family", base(okKeys, "  - {name: u1, family: delta, base_url: \"http://h/v1\"}\n", okModels), "upstreams[0].family")
	f("bad scheme", base(okKeys, "  - {name: u1, family: beta, base_url: \"ftp://h/v1\"}\n", okModels), "upstreams[0].base_url")
	f("too many attempts", base(okKeys, okUps, okModels)+"retry: {attempts: 11}\n", "retry.attempts")
	f("budget over 100%", base(okKeys, okUps, okModels)+"retry: {budget_percent: 101}\n", "retry.budget_percent")
	f("no base url", base(okKeys, "  - {name: u1, family: beta}\n", okModels), "upstreams[0].base_url")
	f("duplicate upstream", base(okKeys, okUps+okUps, okModels), "upstreams[1].name")
	f("unknown upstream", base(okKeys, okUps, "  - {id: m, upstreams: [nope]}\n"), "models[0].upstreams[0]")
	f("model without upstreams", base(okKeys, okUps, "  - {id: m}\n"), "models[0].upstreams")
	f("duplicate model", base(okKeys, okUps, okModels+okModels), "models[1].id")
	f("unknown effort", base(okKeys, okUps, "  - {id: m, upstreams: [u1], reasoning: {supported_efforts: [huge], default_effort: huge}}\n"), "models[0].reasoning.supported_efforts[0]")
	f("default effort not supported", base(okKeys, okUps, "  - {id: m, upstreams: [u1], reasoning: {supported_efforts: [low], default_effort: high}}\n"), "models[0].reasoning.default_effort")
	f("unknown field", base(okKeys, okUps, okModels)+"listne: x\n", "listne")
	f("bad duration", base(okKeys, okUps, okModels)+"timeouts: {connect: soon}\n", "soon")
	f("bad group", base(okKeys, okUps, okModels)+"groups:\n  - {name: \"a/b\", upstreams: [u1]}\n", "groups[0].name")
	f("group unknown upstream", base(okKeys, okUps, okModels)+"groups:\n  - {name: g, upstreams: [zz]}\n", "groups[0].upstreams[0]")
	f("bad engine", base(okKeys, okUps, okModels)+"store: {engine: redis}\n", "store.engine")
	f("bad expiry default", base(okKeys, okUps, okModels)+"files: {default_expires_in: 10m}\n", "files.default_expires_in")
}
