package proxy

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Family is an upstream protocol family.
type Family uint8

const (
	// Alpha speaks the Anthropic Messages and Files protocols.
	Alpha Family = iota
	// Beta speaks the OpenAI Chat, Responses, Images and Files protocols.
	Beta
	// Gamma speaks the Gemini generateContent protocol.
	Gamma
	numFamilies
)

var familyNames = [numFamilies]string{"alpha", "beta", "gamma"}

func (f Family) String() string {
	if f < numFamilies {
		return familyNames[f]
	}
	return "unknown"
}

func parseFamily(s string) (Family, bool) {
	for i, n := range familyNames {
		if s == n {
			return Family(i), true
		}
	}
	return 0, false
}

// Config is the routing configuration: callers, upstream deployments and models.
// It is loaded from one YAML file; see the README for every field.
type Config struct {
	Listen    string           `yaml:"listen"`
	Store     StoreConfig      `yaml:"store"`
	Keys      []KeyConfig      `yaml:"keys"`
	Upstreams []UpstreamConfig `yaml:"upstreams"`
	Models    []ModelConfig    `yaml:"models"`
	Groups    []GroupConfig    `yaml:"groups"`
	Timeouts  TimeoutConfig    `yaml:"timeouts"`
	Health    HealthConfig     `yaml:"health"`
	Limits    LimitConfig      `yaml:"limits"`
	Responses ResponsesConfig  `yaml:"responses"`
	Files     FilesConfig      `yaml:"files"`
}

// StoreConfig selects the durable store.
type StoreConfig struct {
	Engine string `yaml:"engine"` // "pebble" (the default)
	Path   string `yaml:"path"`   // directory of the embedded store
}

// KeyConfig is one caller. Exactly one of Key and SHA256 is set.
type KeyConfig struct {
	ID     string `yaml:"id"`
	Key    string `yaml:"key"`
	SHA256 string `yaml:"sha256"`
}

// UpstreamConfig is one deployment of a provider.
type UpstreamConfig struct {
	Name    string `yaml:"name"`
	Family  string `yaml:"family"`
	BaseURL string `yaml:"base_url"`
	APIKey  string `yaml:"api_key"`
	// MaxConns bounds the pooled connections to this deployment (default 512).
	MaxConns int `yaml:"max_conns"`
}

// ModelConfig is one routable model.
type ModelConfig struct {
	ID                  string           `yaml:"id"`
	Upstreams           []string         `yaml:"upstreams"`
	Image               bool             `yaml:"image"`
	OwnedBy             string           `yaml:"owned_by"`
	Created             int64            `yaml:"created"`
	SupportedParameters []string         `yaml:"supported_parameters"`
	Reasoning           *ReasoningConfig `yaml:"reasoning"`
}

// ReasoningConfig is shown in the model list.
type ReasoningConfig struct {
	SupportedEfforts  []string `yaml:"supported_efforts"`
	DefaultEffort     string   `yaml:"default_effort"`
	DefaultEnabled    bool     `yaml:"default_enabled"`
	SupportsMaxTokens bool     `yaml:"supports_max_tokens"`
	Mandatory         bool     `yaml:"mandatory"`
}

// GroupConfig names a subset of deployments, addressed by the /gamma/{group} and
// /alpha/{group} path forms.
type GroupConfig struct {
	Name      string   `yaml:"name"`
	Upstreams []string `yaml:"upstreams"`
}

// TimeoutConfig bounds the time spent on an upstream call.
type TimeoutConfig struct {
	Connect   Duration `yaml:"connect"`    // dial; default 5s
	FirstByte Duration `yaml:"first_byte"` // request sent → first answer byte; default 10m
	Idle      Duration `yaml:"idle"`       // between two reads of a streamed answer; default 5m
}

// HealthConfig sets when a failing deployment is excluded, and for how long.
type HealthConfig struct {
	Failures int      `yaml:"failures"` // consecutive failures that exclude; default 3
	Cooldown Duration `yaml:"cooldown"` // how long it stays excluded; default 10s
}

// LimitConfig bounds request bodies per route kind.
type LimitConfig struct {
	MaxBodyBytes      int `yaml:"max_body_bytes"`       // chat, messages, responses; default 32 MiB
	MaxImageBodyBytes int `yaml:"max_image_body_bytes"` // images and generateContent; default 64 MiB
}

// ResponsesConfig sets how long ownership records are kept.
type ResponsesConfig struct {
	Retention Duration `yaml:"retention"` // default 720h (30 days)
}

// FilesConfig sets the default expiry of uploaded files.
type FilesConfig struct {
	DefaultExpiresIn Duration `yaml:"default_expires_in"` // default 720h (30 days)
}

// Duration is a time.Duration written as a Go duration string ("10s", "5m").
type Duration time.Duration

// UnmarshalYAML reads a duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: invalid duration %q", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// LoadConfig reads, expands and validates the config file at path.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read config: %w", err)
	}
	cfg, err := ParseConfig(data, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig expands ${VAR} references with lookup, decodes the YAML strictly
// (an unknown field is an error) and validates the result.
func ParseConfig(data []byte, lookup func(string) (string, bool)) (*Config, error) {
	var missing []string
	expanded := envRef.ReplaceAllStringFunc(string(data), func(ref string) string {
		name := ref[2 : len(ref)-1]
		v, ok := lookup(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("environment variables not set: %s", strings.Join(missing, ", "))
	}
	dec := yaml.NewDecoder(strings.NewReader(expanded))
	dec.KnownFields(true)
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("cannot parse YAML: %w", err)
	}
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// EnsureDefaults fills every zero field that has a default.
func (c *Config) EnsureDefaults() {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.Store.Engine == "" {
		c.Store.Engine = "pebble"
	}
	if c.Store.Path == "" {
		c.Store.Path = "./data"
	}
	setDefault(&c.Timeouts.Connect, 5*time.Second)
	setDefault(&c.Timeouts.FirstByte, 10*time.Minute)
	setDefault(&c.Timeouts.Idle, 5*time.Minute)
	if c.Health.Failures == 0 {
		c.Health.Failures = 3
	}
	setDefault(&c.Health.Cooldown, 10*time.Second)
	if c.Limits.MaxBodyBytes == 0 {
		c.Limits.MaxBodyBytes = 32 << 20
	}
	if c.Limits.MaxImageBodyBytes == 0 {
		c.Limits.MaxImageBodyBytes = 64 << 20
	}
	setDefault(&c.Responses.Retention, 720*time.Hour)
	setDefault(&c.Files.DefaultExpiresIn, 720*time.Hour)
	for i := range c.Upstreams {
		if c.Upstreams[i].MaxConns == 0 {
			c.Upstreams[i].MaxConns = 512
		}
	}
	for i := range c.Models {
		if c.Models[i].OwnedBy == "" {
			c.Models[i].OwnedBy = "system"
		}
	}
}

func setDefault(d *Duration, v time.Duration) {
	if *d == 0 {
		*d = Duration(v)
	}
}

var knownEfforts = map[string]bool{
	"none": true, "minimal": true, "low": true, "medium": true, "high": true, "xhigh": true, "max": true,
}

// Validate checks the config; its errors name the offending field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Store.Engine != "pebble" {
		bad("store.engine", "unsupported engine %q (supported: pebble)", c.Store.Engine)
	}
	if len(c.Keys) == 0 {
		bad("keys", "at least one caller key is required")
	}
	keyIDs := map[string]bool{}
	for i, k := range c.Keys {
		f := fmt.Sprintf("keys[%d]", i)
		switch {
		case k.ID == "":
			bad(f+".id", "required")
		case strings.ContainsRune(k.ID, 0):
			bad(f+".id", "must not contain NUL")
		case keyIDs[k.ID]:
			bad(f+".id", "duplicate id %q", k.ID)
		}
		keyIDs[k.ID] = true
		switch {
		case k.Key == "" && k.SHA256 == "":
			bad(f, "one of key or sha256 is required")
		case k.Key != "" && k.SHA256 != "":
			bad(f, "key and sha256 are mutually exclusive")
		case k.SHA256 != "":
			if b, err := hex.DecodeString(k.SHA256); err != nil || len(b) != 32 {
				bad(f+".sha256", "must be 64 hex digits")
			}
		}
	}
	ups := map[string]Family{}
	for i, u := range c.Upstreams {
		f := fmt.Sprintf("upstreams[%d]", i)
		if u.Name == "" {
			bad(f+".name", "required")
		} else if _, dup := ups[u.Name]; dup {
			bad(f+".name", "duplicate name %q", u.Name)
		}
		fam, ok := parseFamily(u.Family)
		if !ok {
			bad(f+".family", "must be alpha, beta or gamma, not %q", u.Family)
		}
		ups[u.Name] = fam
		if err := checkBaseURL(u.BaseURL); err != nil {
			bad(f+".base_url", "%v", err)
		}
		if u.MaxConns < 0 {
			bad(f+".max_conns", "must be positive")
		}
	}
	modelIDs := map[string]bool{}
	for i, m := range c.Models {
		f := fmt.Sprintf("models[%d]", i)
		if m.ID == "" {
			bad(f+".id", "required")
		} else if modelIDs[m.ID] {
			bad(f+".id", "duplicate id %q", m.ID)
		}
		modelIDs[m.ID] = true
		if len(m.Upstreams) == 0 {
			bad(f+".upstreams", "at least one upstream is required")
		}
		perFamily := [numFamilies]int{}
		seen := map[string]bool{}
		for j, name := range m.Upstreams {
			fam, ok := ups[name]
			switch {
			case !ok:
				bad(fmt.Sprintf("%s.upstreams[%d]", f, j), "unknown upstream %q", name)
			case seen[name]:
				bad(fmt.Sprintf("%s.upstreams[%d]", f, j), "duplicate upstream %q", name)
			default:
				perFamily[fam]++
			}
			seen[name] = true
		}
		for fam, n := range perFamily {
			if n > 64 {
				bad(f+".upstreams", "at most 64 %s upstreams per model", Family(fam))
			}
		}
		if r := m.Reasoning; r != nil {
			validateReasoning(f+".reasoning", r, bad)
		}
	}
	groups := map[string]bool{}
	for i, g := range c.Groups {
		f := fmt.Sprintf("groups[%d]", i)
		if !validGroupName(g.Name) {
			bad(f+".name", "must be 1-64 characters of [A-Za-z0-9_.-], not %q", g.Name)
		} else if groups[g.Name] {
			bad(f+".name", "duplicate group %q", g.Name)
		}
		groups[g.Name] = true
		for j, name := range g.Upstreams {
			if _, ok := ups[name]; !ok {
				bad(fmt.Sprintf("%s.upstreams[%d]", f, j), "unknown upstream %q", name)
			}
		}
	}
	if c.Health.Failures < 1 {
		bad("health.failures", "must be at least 1")
	}
	if c.Limits.MaxBodyBytes < 1<<10 {
		bad("limits.max_body_bytes", "must be at least 1024")
	}
	if c.Limits.MaxImageBodyBytes < 1<<10 {
		bad("limits.max_image_body_bytes", "must be at least 1024")
	}
	if d := c.Files.DefaultExpiresIn.D(); d < time.Hour || d > 90*24*time.Hour {
		bad("files.default_expires_in", "must be between 1h and 2160h (the upload limits)")
	}
	return errors.Join(errs...)
}

func validateReasoning(f string, r *ReasoningConfig, bad func(string, string, ...any)) {
	if len(r.SupportedEfforts) == 0 {
		bad(f+".supported_efforts", "at least one effort is required")
	}
	efforts := map[string]bool{}
	for j, e := range r.SupportedEfforts {
		if !knownEfforts[e] {
			bad(fmt.Sprintf("%s.supported_efforts[%d]", f, j), "unknown effort %q", e)
		}
		efforts[e] = true
	}
	if r.DefaultEffort == "" {
		bad(f+".default_effort", "required")
	} else if !efforts[r.DefaultEffort] {
		bad(f+".default_effort", "%q is not among supported_efforts", r.DefaultEffort)
	}
}

func checkBaseURL(s string) error {
	if s == "" {
		return errors.New("required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("invalid URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme must be http or https, not %q", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("host is required")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return errors.New("must not have a query or fragment")
	}
	return nil
}

func validGroupName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}
