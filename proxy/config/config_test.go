package config

import (
	"os"
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
	if cfg.Listen != "127.0.0.1:8080" || cfg.Store.Engine != "pebble" || cfg.Store.Path != "./data" || cfg.Store.Durability != "process" {
		t.Fatalf("defaults: listen %q store %+v", cfg.Listen, cfg.Store)
	}
	if cfg.Timeouts.Connect.D() != 5*time.Second || cfg.Timeouts.FirstByte.D() != 10*time.Minute || cfg.Timeouts.Idle.D() != 5*time.Minute {
		t.Fatalf("timeout defaults: %+v", cfg.Timeouts)
	}
	if cfg.Limits.MaxHeldAnswerBytes != 64<<10 {
		t.Fatalf("max_held_answer_bytes default: %d", cfg.Limits.MaxHeldAnswerBytes)
	}
	if cfg.Timeouts.IdleConn.D() != 4*time.Second {
		t.Fatalf("idle_conn default: %v", cfg.Timeouts.IdleConn.D())
	}
	if cfg.Timeouts.Write.D() != time.Minute {
		t.Fatalf("write default: %v", cfg.Timeouts.Write.D())
	}
	if cfg.Retry != (Retry{Attempts: 3, BudgetPercent: 20, BudgetMinPerSecond: 3}) {
		t.Fatalf("retry defaults: %+v", cfg.Retry)
	}
	if cfg.Health.Failures != 3 || cfg.Limits.MaxBodyBytes != 32<<20 || cfg.Upstreams[0].MaxConns != 512 {
		t.Fatalf("defaults: %+v %+v %+v", cfg.Health, cfg.Limits, cfg.Upstreams[0])
	}
}

func TestParseConfigStoreDurability(t *testing.T) {
	for _, level := range []string{"process", "machine"} {
		cfg, err := Parse([]byte(minimalConfig+"store: {durability: "+level+"}\n"), env(map[string]string{"KEY_A": "a", "UP": "u"}))
		if err != nil {
			t.Fatalf("%s: %v", level, err)
		}
		if cfg.Store.Durability != level {
			t.Fatalf("store.durability = %q, want %q", cfg.Store.Durability, level)
		}
	}
}

// The redis section: defaults, every field read, the password from the environment, and
// the options the engine is opened with.
func TestParseConfigStoreRedis(t *testing.T) {
	vars := map[string]string{"KEY_A": "a", "UP": "u", "RPW": "s3cret-redis"}
	cfg, err := Parse([]byte(minimalConfig+"store: {engine: redis, addrs: [\"10.0.0.1:6379\"]}\n"), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Store
	if s.Path != "" || s.Durability != "" || *s.Replicas != 1 || s.WaitTimeout.D() != time.Second ||
		s.DialTimeout.D() != 5*time.Second || s.CommandTimeout.D() != 5*time.Second || s.ChunkSize != 256<<10-64 {
		t.Fatalf("redis defaults: %+v", s)
	}
	cfg, err = Parse([]byte(minimalConfig+`store:
  engine: redis
  addrs: ["10.0.0.1:6379", "10.0.0.2:6379"]
  username: gw
  password_env: RPW
  key_prefix: "gw:"
  replicas: 0
  wait_timeout: 250ms
  dial_timeout: 2s
  command_timeout: 3s
  upload_ttl: 1m
responses: {retention: 48h}
`), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	o, err := cfg.Store.RedisOptions(cfg.Responses.Retention)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Addrs) != 2 || o.Username != "gw" || o.Password != "s3cret-redis" || o.KeyPrefix != "gw:" ||
		o.Replicas != 0 || o.WaitTimeout != 250*time.Millisecond || o.DialTimeout != 2*time.Second ||
		o.CommandTimeout != 3*time.Second || o.UploadTTL != time.Minute || o.ResponseTTL != 48*time.Hour || o.TLS != nil {
		t.Fatalf("redis options: %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("the engine refuses what the config accepted: %v", err)
	}
}

func TestParseConfigMissingEnv(t *testing.T) {
	_, err := Parse([]byte(minimalConfig), env(map[string]string{"KEY_A": "x"}))
	if err == nil || !strings.Contains(err.Error(), "upstreams[0].api_key: environment variable UP is not set") {
		t.Fatalf("want an error naming UP at upstreams[0].api_key, got %v", err)
	}
}

// TestParseConfigMissingEnvWithOtherErrors: an unset ${VAR} is one problem among the
// file's others, named by its field path, all reported in one round; a reference in a
// comment needs no variable, and an expanded value keeps the YAML type it spells.
func TestParseConfigMissingEnvWithOtherErrors(t *testing.T) {
	yaml := `
keys:
  - {id: a, key: "${KEY_A}"}   # or "${NOT_NEEDED}"
upstreams:
  - {name: u1, family: delta, base_url: "https://${HOST}/v1", api_key: "${UP}", max_conns: ${CONNS}}
models:
  - {id: m, upstreams: [u2]}
retry: {attempts: 11}
`
	_, err := Parse([]byte(yaml), env(map[string]string{"HOST": "h.example", "CONNS": "8"}))
	if err == nil {
		t.Fatal("want errors")
	}
	msg := err.Error()
	for _, want := range []string{
		"keys[0].key: environment variable KEY_A is not set (line 3)",
		"upstreams[0].api_key: environment variable UP is not set (line 5)",
		`upstreams[0].family: must be alpha, beta or gamma, not "delta"`,
		`models[0].upstreams[0]: unknown upstream "u2"`,
		"retry.attempts",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the errors do not say %q:\n%s", want, msg)
		}
	}
	for _, never := range []string{"NOT_NEEDED", "upstreams[0].max_conns", "upstreams[0].api_key: required", "keys[0]: one of"} {
		if strings.Contains(msg, never) {
			t.Errorf("the errors say %q:\n%s", never, msg)
		}
	}
	cfg, err := Parse([]byte(yaml), env(map[string]string{"KEY_A": "a", "UP": "u", "HOST": "h.example", "CONNS": "8"}))
	if err == nil || cfg != nil {
		t.Fatalf("the family and the model are still wrong: %v", err)
	}
	// Left as written in a flow mapping, the reference does not parse: it is named by line.
	_, err = Parse([]byte("keys: [{id: a, key: ${KEY_A}}]\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "cannot parse YAML") || !strings.Contains(err.Error(), "line 1: environment variable KEY_A is not set") {
		t.Fatalf("an unset variable in a flow mapping: %v", err)
	}
	fixed := strings.NewReplacer("delta", "beta", "[u2]", "[u1]", "attempts: 11", "attempts: 2").Replace(yaml)
	cfg, err = Parse([]byte(fixed), env(map[string]string{"KEY_A": "a", "UP": "u", "HOST": "h.example", "CONNS": "8"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Keys[0].Key != "a" || cfg.Upstreams[0].BaseURL != "https://h.example/v1" || cfg.Upstreams[0].MaxConns != 8 {
		t.Fatalf("expanded: %+v %+v", cfg.Keys[0], cfg.Upstreams[0])
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
	alphaUp := "  - {name: a1, family: alpha, base_url: \"http://127.0.0.1:1/v1\", api_key: topsecret}\n"
	f("unknown fallback", base(okKeys, okUps, "  - {id: m, upstreams: [u1], fallbacks: [nope]}\n"), `models[0].fallbacks[0]: unknown model "nope"`)
	f("fallback to itself", base(okKeys, okUps, "  - {id: m, upstreams: [u1], fallbacks: [m]}\n"), "models[0].fallbacks[0]")
	f("fallback cycle", base(okKeys, okUps, "  - {id: m, upstreams: [u1], fallbacks: [n]}\n  - {id: n, upstreams: [u1], fallbacks: [o]}\n  - {id: o, upstreams: [u1], fallbacks: [m]}\n"),
		`models[0].fallbacks[0]: cycle: model "n" falls back`)
	f("fallback of another family", base(okKeys, okUps+alphaUp, "  - {id: m, upstreams: [u1], fallbacks: [n]}\n  - {id: n, upstreams: [a1]}\n"),
		`models[0].fallbacks[0]: model "n" has no deployment of a family of "m"`)
	f("duplicate fallback", base(okKeys, okUps, "  - {id: m, upstreams: [u1], fallbacks: [n, n]}\n  - {id: n, upstreams: [u1]}\n"), "models[0].fallbacks[1]")
	f("held answer bound too small", base(okKeys, okUps, okModels)+"limits: {max_held_answer_bytes: 100}\n", "limits.max_held_answer_bytes")
	f("held answer bound below off", base(okKeys, okUps, okModels)+"limits: {max_held_answer_bytes: -2}\n", "limits.max_held_answer_bytes")
	f("bad durability", base(okKeys, okUps, okModels)+"store: {durability: fsync}\n", "store.durability")
	f("bad engine", base(okKeys, okUps, okModels)+"store: {engine: mongo}\n", "store.engine")
	f("redis without addrs", base(okKeys, okUps, okModels)+"store: {engine: redis}\n", "store.addrs")
	f("redis bad addr", base(okKeys, okUps, okModels)+"store: {engine: redis, addrs: [\"h:1\", nohostport]}\n", "store.addrs[1]")
	f("redis with path", base(okKeys, okUps, okModels)+"store: {engine: redis, addrs: [\"h:1\"], path: ./d}\n", "store.path")
	f("redis with durability", base(okKeys, okUps, okModels)+"store: {engine: redis, addrs: [\"h:1\"], durability: machine}\n", "store.durability")
	f("redis braces", base(okKeys, okUps, okModels)+"store: {engine: redis, addrs: [\"h:1\"], key_prefix: \"{gw}\"}\n", "store.key_prefix")
	f("redis negative replicas", base(okKeys, okUps, okModels)+"store: {engine: redis, addrs: [\"h:1\"], replicas: -1}\n", "store.replicas")
	f("redis bad wait", base(okKeys, okUps, okModels)+"store: {engine: redis, addrs: [\"h:1\"], wait_timeout: soon}\n", "store.wait_timeout")
	f("redis tiny timeout", base(okKeys, okUps, okModels)+"store: {engine: redis, addrs: [\"h:1\"], command_timeout: 1us}\n", "store.command_timeout")
	f("redis both passwords", base(okKeys, okUps, okModels)+"store: {engine: redis, addrs: [\"h:1\"], password: topsecret, password_env: X}\n", "store.password")
	f("redis password env unset", base(okKeys, okUps, okModels)+"store: {engine: redis, addrs: [\"h:1\"], password_env: NOPE_UNSET}\n", "store.password_env")
	f("redis missing ca", base(okKeys, okUps, okModels)+"store: {engine: redis, addrs: [\"h:1\"], password: topsecret, tls: {ca_file: /nonexistent/ca.pem}}\n", "store.tls")
	f("redis unknown field", base(okKeys, okUps, okModels)+"store: {engine: redis, addrs: [\"h:1\"], pasword: topsecret}\n", "store.pasword")
	f("pebble with addrs", base(okKeys, okUps, okModels)+"store: {addrs: [\"h:1\"]}\n", "store.addrs")
	f("pebble with password", base(okKeys, okUps, okModels)+"store: {password: topsecret}\n", "store.password")
	f("no api_key", base(okKeys, "  - {name: u1, family: beta, base_url: \"http://h/v1\"}\n", okModels), "upstreams[0].api_key")
	f("empty api_key", base(okKeys, "  - {name: u1, family: beta, base_url: \"http://h/v1\", api_key: \"\"}\n", okModels), "upstreams[0].api_key")
	f("bad expiry default", base(okKeys, okUps, okModels)+"files: {default_expires_in: 10m}\n", "files.default_expires_in")
	f("health check without path", base(okKeys, "  - {name: u1, family: beta, base_url: \"http://h/v1\", api_key: k, health_check: {interval: 1s}}\n", okModels), "upstreams[0].health_check.path")
	f("health check bad path", base(okKeys, "  - {name: u1, family: beta, base_url: \"http://h/v1\", api_key: k, health_check: {path: models}}\n", okModels), "upstreams[0].health_check.path")
	f("health check timeout above interval", base(okKeys, "  - {name: u1, family: beta, base_url: \"http://h/v1\", api_key: k, health_check: {path: /models, interval: 1s, timeout: 2s}}\n", okModels), "upstreams[0].health_check.timeout")
	f("decay too short", base(okKeys, okUps, okModels)+"routing: {decay: 10us}\n", "routing.decay")
	f("balance factor 1", base(okKeys, okUps, okModels)+"routing: {balance_factor: 1}\n", "routing.balance_factor")
	f("balance factor below 1", base(okKeys, okUps, okModels)+"routing: {balance_factor: 0.5}\n", "routing.balance_factor")
	f("balance factor not a number", base(okKeys, okUps, okModels)+"routing: {balance_factor: high}\n", "routing.balance_factor: expected a number")
}

// TestRoutingDefaults: the decay and the balance factor have defaults, and a
// balance factor of 0 turns the bound off rather than meaning the default.
func TestRoutingDefaults(t *testing.T) {
	const yaml = "keys: [{id: a, key: k}]\nupstreams: [{name: u1, family: beta, base_url: \"http://h/v1\", api_key: k}]\nmodels: [{id: m, upstreams: [u1]}]\n"
	f := func(extra string, decay time.Duration, balance float64) {
		t.Helper()
		c, err := Parse([]byte(yaml+extra), env(nil))
		if err != nil {
			t.Fatal(err)
		}
		if c.Routing.Decay.D() != decay || c.Routing.Balance() != balance {
			t.Fatalf("%q: decay %v, balance %v; want %v, %v", extra, c.Routing.Decay.D(), c.Routing.Balance(), decay, balance)
		}
	}
	f("", 10*time.Second, 1.25)
	f("routing: {decay: 2s, balance_factor: 2}\n", 2*time.Second, 2)
	f("routing: {balance_factor: 0}\n", 10*time.Second, 0)
}

// TestConfigShapeErrors: a value of the wrong kind or an unknown field is named by its
// field path and what is expected there, never by Go types, and every problem of a file
// is reported in one error.
func TestConfigShapeErrors(t *testing.T) {
	yaml := `
keys:
  - {id: a, key: k}
upstreams:
  - {name: u1, family: beta, base_url: "http://127.0.0.1:1/v1", api_key: k, max_conns: many}
  - {name: u2, family: beta, base_url: "http://127.0.0.1:2/v1"}
models:
  - {id: m, upstream: [u1]}
  - {id: n, upstreams: u1}
  - {id: o, upstreams: [u1, {name: u2, model: provider-o, extra: 1}], image: maybe}
timeouts: {connect: "30"}
health: {failures: [3]}
`
	_, err := Parse([]byte(yaml), env(nil))
	if err == nil {
		t.Fatal("want errors")
	}
	msg := err.Error()
	for _, want := range []string{
		`upstreams[0].max_conns: expected an integer, not "many" (line 5)`,
		`upstreams[1].api_key: required`,
		`models[0].upstream: unknown field (line 8); known fields here: created, default_max_output_tokens, fallbacks, id, image, owned_by, pricing, reasoning, supported_parameters, upstreams`,
		`models[0].upstreams: at least one upstream is required`,
		`models[1].upstreams: expected a list such as [a, b], not "u1" (line 9)`,
		`models[2].upstreams[1].extra: unknown field (line 10); known fields here: model, name, pricing`,
		`models[2].image: expected true or false, not "maybe" (line 10)`,
		`timeouts.connect: expected a duration such as 30s, 5m or 720h, not "30" (line 11)`,
		`health.failures: expected an integer, not a list (line 12)`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the errors do not say %q:\n%s", want, msg)
		}
	}
	for _, never := range []string{"config.", "proxy.", "not found in type", "cannot unmarshal", "!!"} {
		if strings.Contains(msg, never) {
			t.Errorf("the errors mention %q:\n%s", never, msg)
		}
	}
	// models[1].upstreams is wrong in shape: validation of its zero value does not repeat it.
	if n := strings.Count(msg, "models[1].upstreams"); n != 1 {
		t.Errorf("models[1].upstreams is named %d times:\n%s", n, msg)
	}
}

// TestModelUpstreamNames: a deployment of a model is a name, or a name with the provider's
// own model name there; old configs (names only) keep their meaning.
func TestModelUpstreamNames(t *testing.T) {
	yaml := `
keys: [{id: a, key: k}]
upstreams:
  - {name: beta-east, family: beta, base_url: "https://api.openai.com/v1", api_key: k}
  - {name: alpha-1, family: alpha, base_url: "https://api.anthropic.com", api_key: k}
models:
  - id: model-x
    upstreams: [beta-east, {name: alpha-1, model: claude-x}]
  - {id: old, upstreams: [beta-east]}
`
	cfg, err := Parse([]byte(yaml), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Models[0].Upstreams
	if len(got) != 2 || got[0] != (ModelUpstream{Name: "beta-east"}) || got[1] != (ModelUpstream{Name: "alpha-1", Model: "claude-x"}) {
		t.Fatalf("models[0].upstreams = %+v", got)
	}
	if u := cfg.Models[1].Upstreams; len(u) != 1 || u[0] != (ModelUpstream{Name: "beta-east"}) {
		t.Fatalf("models[1].upstreams = %+v", u)
	}
	_, err = Parse([]byte(strings.Replace(yaml, "model: claude-x", `model: "claude x"`, 1)), env(nil))
	if err == nil || !strings.Contains(err.Error(), "models[0].upstreams[1].model") {
		t.Fatalf("a model name with a space: %v", err)
	}
}

// TestREADMEExample: the README's config example is a valid config.
func TestREADMEExample(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "## Configuration")
	if !ok {
		t.Fatal("README has no Configuration section")
	}
	_, rest, _ = strings.Cut(rest, "```yaml\n")
	example, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("README's Configuration section has no yaml block")
	}
	cfg, err := Parse([]byte(example), func(string) (string, bool) { return "example-secret", true })
	if err != nil {
		t.Fatalf("README's example:\n%v", err)
	}
	if u := cfg.Models[0].Upstreams; len(u) != 2 || u[1].Model == "" {
		t.Fatalf("the example shows no per-deployment model name: %+v", u)
	}
}

// A chain of fallbacks without a cycle, of models sharing a family, is valid.
func TestFallbacksValid(t *testing.T) {
	y := `keys: [{id: a, key: k}]
upstreams:
  - {name: u1, family: beta, base_url: "http://127.0.0.1:1/v1", api_key: k}
  - {name: a1, family: alpha, base_url: "http://127.0.0.1:1/v1", api_key: k}
models:
  - {id: m, upstreams: [u1, a1], fallbacks: [n, o]}
  - {id: n, upstreams: [a1], fallbacks: [o]}
  - {id: o, upstreams: [u1, a1]}
`
	cfg, err := Parse([]byte(y), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Models[0].Fallbacks; len(got) != 2 || got[0] != "n" || got[1] != "o" {
		t.Fatalf("fallbacks %v", got)
	}
}
