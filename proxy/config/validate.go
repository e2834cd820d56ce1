package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelgate/gateway/proxy/family"
)

// problem is one thing wrong with a config, at the field path field.
type problem struct{ field, msg string }

func (p problem) Error() string { return p.field + ": " + p.msg }

// problems collects what validation finds, in the order found.
type problems []problem

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, problem{field, fmt.Sprintf(format, args...)})
}

// err joins the problems into one error, one line each; nil when there are none.
func (p problems) err() error {
	errs := make([]error, len(p))
	for i, x := range p {
		errs[i] = x
	}
	return errors.Join(errs...)
}

// except drops the problems at or under a field of bad: a value of the wrong shape was
// left zero, and what validation says of that zero would only repeat it.
func (p problems) except(bad problems) problems {
	var kept problems
	for _, x := range p {
		covered := false
		for _, b := range bad {
			covered = covered || x.field == b.field || strings.HasPrefix(x.field, b.field+".") || strings.HasPrefix(x.field, b.field+"[")
		}
		if !covered {
			kept = append(kept, x)
		}
	}
	return kept
}

// Validate checks the config; its errors name the offending field.
func (c *Config) Validate() error { return c.validate().err() }

func (c *Config) validate() problems {
	var p problems
	p.store(&c.Store)
	p.listeners(c)
	p.clientCerts(c)
	p.keys(c.Keys)
	ups := p.upstreams(c.Upstreams)
	p.models(c.Models, ups)
	p.groups(c.Groups, ups)
	p.limits(c)
	p.retry(c.Retry)
	p.routing(c.Routing)
	p.rateLimits(c)
	p.admin(c)
	p.tracing(c.Tracing)
	p.budgets(c)
	return p
}

func (p *problems) keys(keys []Key) {
	if len(keys) == 0 {
		p.add("keys", "at least one caller key is required")
	}
	ids := map[string]bool{}
	for i, k := range keys {
		f := fmt.Sprintf("keys[%d]", i)
		switch {
		case k.ID == "":
			p.add(f+".id", "required")
		case strings.ContainsRune(k.ID, 0):
			p.add(f+".id", "must not contain NUL")
		case ids[k.ID]:
			p.add(f+".id", "duplicate id %q", k.ID)
		}
		ids[k.ID] = true
		switch {
		case k.Key == "" && k.SHA256 == "" && k.ClientCert == nil:
			p.add(f, "one of key, sha256 or client_cert is required")
		case k.Key == "" && k.SHA256 == "":
			// client_cert alone: see clientCerts
		case k.Key != "" && k.SHA256 != "":
			p.add(f, "key and sha256 are mutually exclusive")
		case k.SHA256 != "":
			if b, err := hex.DecodeString(k.SHA256); err != nil || len(b) != 32 {
				p.add(f+".sha256", "must be 64 hex digits")
			}
		}
	}
}

// upstreams checks the deployments and returns their families by name.
func (p *problems) upstreams(ups []Upstream) map[string]family.Family {
	fams := map[string]family.Family{}
	for i, u := range ups {
		f := fmt.Sprintf("upstreams[%d]", i)
		if u.Name == "" {
			p.add(f+".name", "required")
		} else if _, dup := fams[u.Name]; dup {
			p.add(f+".name", "duplicate name %q", u.Name)
		}
		fam, ok := family.Parse(u.Family)
		if !ok {
			p.add(f+".family", "must be alpha, beta or gamma, not %q", u.Family)
		}
		fams[u.Name] = fam
		if err := checkBaseURL(u.BaseURL); err != nil {
			p.add(f+".base_url", "%v", err)
		}
		p.upstreamTLS(f, u.TLS, u.BaseURL)
		if u.MaxConns < 0 {
			p.add(f+".max_conns", "must be positive")
		}
		p.healthCheck(f+".health_check", u.HealthCheck)
		if strings.TrimSpace(u.APIKey) == "" {
			p.add(f+".api_key", "required: the deployment's provider key, e.g. api_key: \"${%s_KEY}\"", envName(u.Name))
		}
	}
	return fams
}

func (p *problems) models(models []Model, ups map[string]family.Family) {
	ids := map[string]bool{}
	for i, m := range models {
		f := fmt.Sprintf("models[%d]", i)
		if m.ID == "" {
			p.add(f+".id", "required")
		} else if ids[m.ID] {
			p.add(f+".id", "duplicate id %q", m.ID)
		}
		ids[m.ID] = true
		p.modelUpstreams(f, m.Upstreams, ups)
		if r := m.Reasoning; r != nil {
			p.reasoning(f+".reasoning", r)
		}
	}
	p.fallbacks(models, ups)
}

// fallbacks checks every model's fallbacks: known models, not repeated, each
// with a deployment of a family the model has, and no chain that leads back
// to the model it left.
func (p *problems) fallbacks(models []Model, ups map[string]family.Family) {
	byID := make(map[string]*Model, len(models))
	for i := range models {
		byID[models[i].ID] = &models[i]
	}
	families := func(m *Model) (fs [family.Count]bool) {
		for _, mu := range m.Upstreams {
			if fam, ok := ups[mu.Name]; ok {
				fs[fam] = true
			}
		}
		return fs
	}
	for i := range models {
		m := &models[i]
		mine := families(m)
		seen := map[string]bool{}
		for j, id := range m.Fallbacks {
			at := fmt.Sprintf("models[%d].fallbacks[%d]", i, j)
			fb, ok := byID[id]
			switch {
			case !ok:
				p.add(at, "unknown model %q", id)
				continue
			case id == m.ID:
				p.add(at, "the model falls back to itself")
				continue
			case seen[id]:
				p.add(at, "duplicate fallback %q", id)
				continue
			}
			seen[id] = true
			shared, theirs := false, families(fb)
			for fam := range mine {
				shared = shared || (mine[fam] && theirs[fam])
			}
			if !shared {
				p.add(at, "model %q has no deployment of a family of %q", id, m.ID)
			}
			if fallsBackTo(byID, id, m.ID, map[string]bool{}) {
				p.add(at, "cycle: model %q falls back, through its fallbacks, to %q", id, m.ID)
			}
		}
	}
}

// fallsBackTo reports whether the chain of fallbacks from id reaches target.
func fallsBackTo(byID map[string]*Model, id, target string, visited map[string]bool) bool {
	if visited[id] {
		return false
	}
	visited[id] = true
	m := byID[id]
	if m == nil {
		return false
	}
	for _, next := range m.Fallbacks {
		if next == target || fallsBackTo(byID, next, target, visited) {
			return true
		}
	}
	return false
}

// modelUpstreams checks one model's deployments: known, not repeated, and at
// most 64 of a family (the size of an affinity ring).
func (p *problems) modelUpstreams(f string, mus []ModelUpstream, ups map[string]family.Family) {
	if len(mus) == 0 {
		p.add(f+".upstreams", "at least one upstream is required")
	}
	perFamily := [family.Count]int{}
	seen := map[string]bool{}
	for j, mu := range mus {
		name, at := mu.Name, fmt.Sprintf("%s.upstreams[%d]", f, j)
		fam, ok := ups[name]
		switch {
		case name == "":
			p.add(at+".name", "required: the name of one of upstreams[]")
		case !ok:
			p.add(at, "unknown upstream %q", name)
		case seen[name]:
			p.add(at, "duplicate upstream %q", name)
		default:
			perFamily[fam]++
		}
		seen[name] = true
		if mu.Model != "" && !validModelName(mu.Model) {
			p.add(at+".model", "must be printable characters without spaces, not %q", mu.Model)
		}
	}
	for fam, n := range perFamily {
		if n > 64 {
			p.add(f+".upstreams", "at most 64 %s upstreams per model", family.Family(fam))
		}
	}
}

var knownEfforts = map[string]bool{
	"none": true, "minimal": true, "low": true, "medium": true, "high": true, "xhigh": true, "max": true,
}

func (p *problems) reasoning(f string, r *Reasoning) {
	if len(r.SupportedEfforts) == 0 {
		p.add(f+".supported_efforts", "at least one effort is required")
	}
	efforts := map[string]bool{}
	for j, e := range r.SupportedEfforts {
		if !knownEfforts[e] {
			p.add(fmt.Sprintf("%s.supported_efforts[%d]", f, j), "unknown effort %q", e)
		}
		efforts[e] = true
	}
	if r.DefaultEffort == "" {
		p.add(f+".default_effort", "required")
	} else if !efforts[r.DefaultEffort] {
		p.add(f+".default_effort", "%q is not among supported_efforts", r.DefaultEffort)
	}
}

func (p *problems) groups(groups []Group, ups map[string]family.Family) {
	names := map[string]bool{}
	for i, g := range groups {
		f := fmt.Sprintf("groups[%d]", i)
		if !validGroupName(g.Name) {
			p.add(f+".name", "must be 1-64 characters of [A-Za-z0-9_.-], not %q", g.Name)
		} else if names[g.Name] {
			p.add(f+".name", "duplicate group %q", g.Name)
		}
		names[g.Name] = true
		for j, name := range g.Upstreams {
			if _, ok := ups[name]; !ok {
				p.add(fmt.Sprintf("%s.upstreams[%d]", f, j), "unknown upstream %q", name)
			}
		}
	}
}

// limits checks the client write timeout, health, body limit and file
// expiry settings.
func (p *problems) limits(c *Config) {
	if c.Timeouts.ClientWriteIdle.D() < 100*time.Millisecond {
		p.add("timeouts.client_write_idle", "must be at least 100ms")
	}
	if c.Health.Failures < 1 {
		p.add("health.failures", "must be at least 1")
	}
	if c.Limits.MaxBodyBytes < 1<<10 {
		p.add("limits.max_body_bytes", "must be at least 1024")
	}
	if c.Limits.MaxImageBodyBytes < 1<<10 {
		p.add("limits.max_image_body_bytes", "must be at least 1024")
	}
	if c.Limits.MaxBufferedBodyBytes < 1<<10 {
		p.add("limits.max_buffered_body_bytes", "must be at least 1024")
	}
	if c.Limits.MaxResponseBytes < 1<<10 {
		p.add("limits.max_response_bytes", "must be at least 1024")
	}
	if v := c.Limits.MaxHeldAnswerBytes; v != -1 && (v < 1<<10 || v > 16<<20) {
		p.add("limits.max_held_answer_bytes", "must be -1 (off) or between 1024 and 16777216")
	}
	if d := c.Files.DefaultExpiresIn.D(); d < time.Hour || d > 90*24*time.Hour {
		p.add("files.default_expires_in", "must be between 1h and 2160h (the upload limits)")
	}
}

func (p *problems) retry(r Retry) {
	if r.Attempts < 1 || r.Attempts > 10 {
		p.add("retry.attempts", "must be between 1 and 10")
	}
	if r.BudgetPercent < 0 || r.BudgetPercent > 100 {
		p.add("retry.budget_percent", "must be between 0 and 100")
	}
	if r.BudgetMinPerSecond < 0 {
		p.add("retry.budget_min_per_second", "must not be negative")
	}
}

func (p *problems) healthCheck(f string, hc HealthCheck) {
	if hc.Path == "" {
		if hc != (HealthCheck{}) {
			p.add(f+".path", "required when health_check is set, e.g. /models")
		}
		return
	}
	if !strings.HasPrefix(hc.Path, "/") || strings.ContainsAny(hc.Path, " \r\n\t#") {
		p.add(f+".path", "must be a path beginning with /, such as /models, not %q", hc.Path)
	}
	if d := hc.Interval.D(); d < 10*time.Millisecond {
		p.add(f+".interval", "must be at least 10ms")
	}
	if d := hc.Timeout.D(); d <= 0 || d > hc.Interval.D() {
		p.add(f+".timeout", "must be above 0 and at most the interval")
	}
	if hc.Failures < 1 {
		p.add(f+".failures", "must be at least 1")
	}
}

func (p *problems) routing(r Routing) {
	if d := r.Decay.D(); d < time.Millisecond || d > time.Hour {
		p.add("routing.decay", "must be between 1ms and 1h")
	}
	if b := r.Balance(); b != 0 && (b <= 1 || b > 100 || math.IsNaN(b)) {
		p.add("routing.balance_factor", "must be above 1 and at most 100, or 0 to keep sessions put whatever the load")
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

// validModelName reports whether s can name a model at a provider: printable ASCII or
// UTF-8 letters, no spaces or control characters.
func validModelName(s string) bool {
	for _, r := range s {
		if r <= ' ' || r == 0x7f || r == utf8.RuneError {
			return false
		}
	}
	return len(s) <= 256
}

// envName suggests an environment variable for a deployment's key: BETA_EAST for beta-east.
func envName(name string) string {
	b := []byte(strings.ToUpper(name))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "UPSTREAM"
	}
	return string(b)
}

// Bounds of rate limits: the counters' arithmetic (a minute in milliseconds
// times the limit) stays exact in a float64, as Redis' Lua computes it.
const (
	maxRequestsPerMinute = 100_000_000
	maxTokensPerMinute   = 1_000_000_000
	maxConcurrent        = 1_000_000
)

// rateLimits checks every key's limits and the rate_limit section.
func (p *problems) rateLimits(c *Config) {
	models := make(map[string]bool, len(c.Models))
	for _, m := range c.Models {
		models[m.ID] = true
	}
	for i, k := range c.Keys {
		if k.Limits == nil {
			continue
		}
		f := fmt.Sprintf("keys[%d].limits", i)
		p.rateLimit(f, k.Limits.Key())
		for id, l := range k.Limits.Models {
			at := f + ".models." + id
			if !models[id] {
				p.add(at, "unknown model %q: limits are set per configured model id", id)
			}
			p.rateLimit(at, l)
		}
	}
	if t := c.RateLimit.Timeout.D(); t < time.Millisecond || t > 10*time.Second {
		p.add("rate_limit.timeout", "must be between 1ms and 10s")
	}
}

func (p *problems) rateLimit(f string, l RateLimits) {
	if l.RequestsPerMinute < 0 || l.RequestsPerMinute > maxRequestsPerMinute {
		p.add(f+".requests_per_minute", "must be between 0 (no limit) and %d", maxRequestsPerMinute)
	}
	if l.TokensPerMinute < 0 || l.TokensPerMinute > maxTokensPerMinute {
		p.add(f+".tokens_per_minute", "must be between 0 (no limit) and %d", maxTokensPerMinute)
	}
	if l.Concurrent < 0 || l.Concurrent > maxConcurrent {
		p.add(f+".concurrent", "must be between 0 (no limit) and %d", maxConcurrent)
	}
}
