package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is the routing configuration: callers, upstream deployments and models.
// It is loaded from one YAML file; see the README for every field.
type Config struct {
	Listen    string     `yaml:"listen"`
	Store     Store      `yaml:"store"`
	Keys      []Key      `yaml:"keys"`
	Upstreams []Upstream `yaml:"upstreams"`
	Models    []Model    `yaml:"models"`
	Groups    []Group    `yaml:"groups"`
	Timeouts  Timeouts   `yaml:"timeouts"`
	Health    Health     `yaml:"health"`
	Routing   Routing    `yaml:"routing"`
	Retry     Retry      `yaml:"retry"`
	Limits    Limits     `yaml:"limits"`
	Responses Responses  `yaml:"responses"`
	Files     Files      `yaml:"files"`
	// RateLimit sets how the keys' rate limits behave when their shared
	// counters cannot be reached; see docs/rate-limits.md.
	RateLimit RateLimit `yaml:"rate_limit"`
	// Admin holds the tokens of the admin API (docs/keys.md).
	Admin Admin `yaml:"admin"`
	// ListenTLS is the host:port of the client listener that speaks TLS, set
	// by TLS; empty: none. Listen may then be off (ListenOff).
	ListenTLS string `yaml:"listen_tls"`
	// TLS is the TLS of ListenTLS.
	TLS *ListenerTLS `yaml:"tls"`
	// Tracing turns OpenTelemetry traces on; nil (the default) leaves them
	// off. See docs/operations.md.
	Tracing *Tracing `yaml:"tracing"`
	// Budgets are the named money budgets that keys share (docs/budgets.md).
	Budgets []Budget `yaml:"budgets"`
}

// Store selects the durable store: the embedded Pebble of one node, or a Redis Cluster
// that many nodes share. Path and Durability are Pebble's; the other fields are Redis'
// (see store.RedisOptions and docs/multi-node.md). Secrets here never reach a log line, a
// page or an error text.
type Store struct {
	Engine string `yaml:"engine"` // "pebble" (the default) or "redis"
	Path   string `yaml:"path"`   // directory of the embedded store
	// Durability is what an acknowledged write survives: "process" (the default: the
	// death of the gateway process, kill -9 included) or "machine" (also a crash of the
	// machine or a power loss: each write waits for an fsync). See store.Durability.
	Durability string `yaml:"durability"`

	// Addrs are host:port addresses of Redis Cluster nodes: any of them, the rest are learned.
	Addrs    []string `yaml:"addrs"`
	Username string   `yaml:"username"` // ACL user; empty: the default user
	Password string   `yaml:"password"`
	// PasswordEnv names an environment variable that holds the password, read when the
	// file is loaded, so that the password need not sit in the file.
	PasswordEnv string    `yaml:"password_env"`
	TLS         *StoreTLS `yaml:"tls"` // nil: plain TCP
	// KeyPrefix starts every key, so that several gateways can share a cluster; no braces.
	KeyPrefix string `yaml:"key_prefix"`
	// Replicas is how many replicas must hold a write before it is acknowledged (WAIT);
	// default 1, 0 acknowledges once the master has it.
	Replicas       *int     `yaml:"replicas"`
	WaitTimeout    Duration `yaml:"wait_timeout"`    // bounds WAIT; default 1s
	DialTimeout    Duration `yaml:"dial_timeout"`    // default 5s
	CommandTimeout Duration `yaml:"command_timeout"` // bounds one call to Redis; default 5s
	// ChunkSize is the size of one stored chunk of file data; default 256 KiB - 64 B.
	ChunkSize int `yaml:"chunk_size"`
	// UploadTTL is how long the chunks of an upload cut by a crash live; default 5m.
	UploadTTL Duration `yaml:"upload_ttl"`

	// Blobs, when set, keeps the bytes of stored files in object storage; the engine keeps
	// their records. nil: the engine keeps the bytes too.
	Blobs *StoreBlobs `yaml:"blobs"`
}

// StoreTLS is the TLS of the connections to Redis.
type StoreTLS struct {
	CAFile     string `yaml:"ca_file"`     // PEM roots; empty: the system's
	ServerName string `yaml:"server_name"` // empty: the host of each address
	CertFile   string `yaml:"cert_file"`   // client certificate (PEM), with KeyFile
	KeyFile    string `yaml:"key_file"`
}

// Key is one caller. At most one of Key and SHA256 is set, and ClientCert
// when neither is.
type Key struct {
	ID     string `yaml:"id"`
	Key    string `yaml:"key"`
	SHA256 string `yaml:"sha256"`
	// Limits bound the caller's calls; nil or zero fields mean no limit.
	Limits *KeyLimits `yaml:"limits"`
	// ClientCert lets a client certificate stand for the caller, instead of
	// or beside Key and SHA256; see KeyClientCert.
	ClientCert *KeyClientCert `yaml:"client_cert"`
	// Budget caps the key's own spend; Budgets names the shared budgets
	// (Config.Budgets) that its calls also spend. See docs/budgets.md.
	Budget  *KeyBudget `yaml:"budget"`
	Budgets []string   `yaml:"budgets"`
}

// KeyLimits are a key's rate limits over every model, and per model id. A
// zero field is no limit of that kind. See docs/rate-limits.md.
type KeyLimits struct {
	RequestsPerMinute int64 `yaml:"requests_per_minute"`
	TokensPerMinute   int64 `yaml:"tokens_per_minute"`
	Concurrent        int64 `yaml:"concurrent"`
	// Models holds further limits of the key's calls of one model, by model
	// id; a call must be within both its key's and its model's.
	Models map[string]RateLimits `yaml:"models"`
}

// Key returns the limits over every model.
func (k *KeyLimits) Key() RateLimits {
	return RateLimits{RequestsPerMinute: k.RequestsPerMinute, TokensPerMinute: k.TokensPerMinute, Concurrent: k.Concurrent}
}

// RateLimits are the limits of one bucket of calls.
type RateLimits struct {
	// RequestsPerMinute bounds the calls admitted; a burst of up to this many
	// is admitted at once, then one per 60s/RequestsPerMinute.
	RequestsPerMinute int64 `yaml:"requests_per_minute"`
	// TokensPerMinute bounds input + output tokens, charged from the usage
	// each answer reports; a call is admitted while the budget is not spent.
	TokensPerMinute int64 `yaml:"tokens_per_minute"`
	// Concurrent bounds the calls in flight at once, per gateway node.
	Concurrent int64 `yaml:"concurrent"`
}

// RateLimit sets the behaviour of rate limits kept in a shared store.
type RateLimit struct {
	// FailOpen admits calls when the shared counters cannot be reached
	// (default true); false refuses them with 503.
	FailOpen *bool `yaml:"fail_open"`
	// Timeout bounds one round trip to the shared counters; default 250ms.
	Timeout Duration `yaml:"timeout"`
}

// Open reports whether calls are admitted while the shared counters cannot be
// reached.
func (r RateLimit) Open() bool { return r.FailOpen == nil || *r.FailOpen }

// Upstream is one deployment of a provider.
type Upstream struct {
	Name    string `yaml:"name"`
	Family  string `yaml:"family"`
	BaseURL string `yaml:"base_url"`
	APIKey  string `yaml:"api_key"`
	// MaxConns bounds the pooled connections to this deployment (default 512).
	MaxConns int `yaml:"max_conns"`
	// HealthCheck probes the deployment in the background; off unless its
	// path is set.
	HealthCheck HealthCheck `yaml:"health_check"`
	// TLS sets a private CA, server name and client certificate for an https
	// base URL; zero: the system's roots, no client certificate.
	TLS UpstreamTLS `yaml:"tls"`
	// Provider names the provider in traces (gen_ai.provider.name); default
	// from the family: anthropic, openai, gcp.gemini.
	Provider string `yaml:"provider"`
}

// HealthCheck is a deployment's active health check: a GET of Path (after
// the base URL's path) with the deployment's credentials every Interval,
// answered 2xx within Timeout; Failures failed probes in a row exclude the
// deployment, one that succeeds ends its exclusion. See docs/routing.md.
type HealthCheck struct {
	Path     string   `yaml:"path"`     // e.g. /models; empty: no probes
	Interval Duration `yaml:"interval"` // default 10s
	Timeout  Duration `yaml:"timeout"`  // default 2s
	Failures int      `yaml:"failures"` // failed probes in a row that exclude; default 2
}

// Model is one routable model.
type Model struct {
	ID                  string          `yaml:"id"`
	Upstreams           []ModelUpstream `yaml:"upstreams"`
	Image               bool            `yaml:"image"`
	OwnedBy             string          `yaml:"owned_by"`
	Created             int64           `yaml:"created"`
	SupportedParameters []string        `yaml:"supported_parameters"`
	Reasoning           *Reasoning      `yaml:"reasoning"`
	// Fallbacks are the ids of the models a call goes to, in order, when no
	// deployment of this one could answer it (docs/routing.md).
	Fallbacks []string `yaml:"fallbacks"`
	// Pricing is what the model's tokens cost (docs/budgets.md); nil: nothing.
	Pricing *Pricing `yaml:"pricing"`
	// DefaultMaxOutputTokens is the output a budget reserves for a call that
	// sends no maximum of its own; default 4096.
	DefaultMaxOutputTokens int64 `yaml:"default_max_output_tokens"`
}

// ModelUpstream is one deployment of a model. In YAML it is the deployment's name, or
// {name: alpha-1, model: claude-x} when the provider knows the model by another name there.
type ModelUpstream struct {
	Name string `yaml:"name"`
	// Model is what the deployment calls the model: it replaces the body's top-level model
	// (and the model in a gamma path) on the way there. Empty: the model's id.
	Model string `yaml:"model"`
	// Pricing replaces the model's prices for calls served by this deployment.
	Pricing *Pricing `yaml:"pricing"`
}

// UnmarshalYAML reads a deployment name or a {name, model} mapping.
func (u *ModelUpstream) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		return n.Decode(&u.Name)
	}
	type plain ModelUpstream
	return n.Decode((*plain)(u))
}

// Reasoning is shown in the model list.
type Reasoning struct {
	SupportedEfforts  []string `yaml:"supported_efforts"`
	DefaultEffort     string   `yaml:"default_effort"`
	DefaultEnabled    bool     `yaml:"default_enabled"`
	SupportsMaxTokens bool     `yaml:"supports_max_tokens"`
	Mandatory         bool     `yaml:"mandatory"`
}

// Group names a subset of deployments, addressed by the /gamma/{group} and
// /alpha/{group} path forms.
type Group struct {
	Name      string   `yaml:"name"`
	Upstreams []string `yaml:"upstreams"`
}

// Timeouts bounds the time spent on an upstream call.
type Timeouts struct {
	Connect   Duration `yaml:"connect"`    // dial; default 5s
	FirstByte Duration `yaml:"first_byte"` // request sent → first answer byte; default 10m
	Idle      Duration `yaml:"idle"`       // between two reads of a streamed answer; default 5m
	// Write bounds how long the upstream may take to accept each piece of a
	// request (256 KiB at most) once its write began; default 60s.
	Write Duration `yaml:"write"`
	// ClientWriteIdle drops a client whose connection takes no byte of an
	// answer for this long (see proxy.Gateway.Listener); default 60s.
	ClientWriteIdle Duration `yaml:"client_write_idle"`
	// IdleConn is how long an unused upstream connection is kept for reuse;
	// default 4s, below the 5 s after which Node servers and many load
	// balancers close an idle connection.
	IdleConn Duration `yaml:"idle_conn"`
}

// Health sets when a failing deployment is excluded, and for how long.
type Health struct {
	Failures int      `yaml:"failures"` // consecutive failures that exclude; default 3
	Cooldown Duration `yaml:"cooldown"` // how long it stays excluded; default 10s
}

// Routing sets how a deployment is chosen; see docs/routing.md.
type Routing struct {
	// Decay is the decay constant of each deployment's peak-EWMA time to
	// first byte, by which calls without a session are spread; default 10s.
	Decay Duration `yaml:"decay"`
	// BalanceFactor bounds the calls in flight of a session's deployment to
	// this many times the model's average before its sessions move to their
	// next choice; above 1, or 0 to keep sessions put whatever the load;
	// default 1.25.
	BalanceFactor *float64 `yaml:"balance_factor"`
}

// Balance is the balance factor, 1.25 when not set.
func (r Routing) Balance() float64 {
	if r.BalanceFactor == nil {
		return 1.25
	}
	return *r.BalanceFactor
}

// Retry sets failover: how many deployments a call may try before the first
// answer byte reaches the client, and the budget that bounds retries to a
// share of traffic. See docs/failover.md.
type Retry struct {
	Attempts           int `yaml:"attempts"`              // deployments tried per call; default 3, 1 turns failover off
	BudgetPercent      int `yaml:"budget_percent"`        // retries per deployment, in % of its calls over 10 s; default 20
	BudgetMinPerSecond int `yaml:"budget_min_per_second"` // retries always allowed per deployment and second; default 3
}

// Limits bounds request bodies per route kind and the upstream answers the
// gateway holds.
type Limits struct {
	MaxBodyBytes      int `yaml:"max_body_bytes"`       // chat, messages, responses; default 32 MiB
	MaxImageBodyBytes int `yaml:"max_image_body_bytes"` // images and generateContent; default 64 MiB
	// MaxResponseBytes bounds a non-streamed upstream answer; a longer one is
	// answered 502. Default 64 MiB: image answers of several b64 PNGs reach ~50 MiB.
	MaxResponseBytes int `yaml:"max_response_bytes"`
	// MaxBufferedBodyBytes bounds the request body bytes held by all calls in
	// flight, every copy a call makes counted (proxy/bodybudget.go); past it a
	// call is answered 503, or 413 when it needs more alone. Default 256 MiB.
	MaxBufferedBodyBytes int `yaml:"max_buffered_body_bytes"`
	// MaxHeldAnswerBytes bounds the rest of a streamed answer that the
	// gateway takes off its upstream connection, once the client stops
	// taking bytes, so that a finished answer does not hold the connection
	// while the client is slow (see upstream.Relay's read-ahead); a longer
	// rest keeps the connection until the client takes it. Each such client
	// holds up to this much. Default 64 KiB; -1 turns it off.
	MaxHeldAnswerBytes int `yaml:"max_held_answer_bytes"`
}

// Responses sets how long ownership records are kept.
type Responses struct {
	Retention Duration `yaml:"retention"` // default 720h (30 days)
}

// Files sets the default expiry of uploaded files.
type Files struct {
	DefaultExpiresIn Duration `yaml:"default_expires_in"` // default 720h (30 days)
}

// Duration is a time.Duration written as a Go duration string ("10s", "5m").
type Duration time.Duration

// UnmarshalYAML reads a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		// A TypeError lets the decoder go on with the rest of the file; Parse reports the
		// field by its path (see shape).
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: invalid duration %q", n.Line, n.Value)}}
	}
	*d = Duration(v)
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Load reads, expands and validates the config file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read config: %w", err)
	}
	cfg, err := Parse(data, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("config %s:\n%w", path, err)
	}
	return cfg, nil
}

// Parse expands ${VAR} references with lookup, decodes the YAML strictly (an unknown field
// is an error) and validates the result. The error lists every problem of the file, each
// naming its field path and what is expected there.
func Parse(data []byte, lookup func(string) (string, bool)) (*Config, error) {
	expanded, unset := expandEnv(data, lookup)
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(expanded), &doc); err != nil {
		var p problems
		p.unsetByLine(unset)
		return nil, errors.Join(fmt.Errorf("cannot parse YAML: %w", err), p.err())
	}
	var cfg Config
	var env, shape problems
	if len(doc.Content) > 0 {
		env.unsetVars(doc.Content[0], "", unset)
		shape.shape(doc.Content[0], "", reflect.TypeFor[Config]())
		// A value of the wrong shape is left zero; the rest is still decoded and validated,
		// so that one run reports every problem of the file.
		_ = doc.Content[0].Decode(&cfg)
	}
	// A value that names an unset variable is reported as that, not as what it spells.
	shape = append(env, shape.except(env)...)
	shape.resolvePassword(&cfg.Store, lookup)
	cfg.EnsureDefaults()
	p := append(shape, cfg.validate().except(shape)...)
	if len(p) > 0 {
		return nil, p.err()
	}
	return &cfg, nil
}
