package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/keys"
	"github.com/modelgate/gateway/store"
)

// Bounds of what the admin API takes.
const (
	// MaxBody is the largest request body.
	MaxBody = 1 << 20
	// MaxNameLen is the longest name, in bytes.
	MaxNameLen = 256
	// MaxModels is the most model patterns of a key, each at most MaxModelLen bytes.
	MaxModels   = 256
	MaxModelLen = 256
	// MaxMetadata is the most metadata entries; keys and values are bounded too.
	MaxMetadata         = 64
	MaxMetadataKeyLen   = 64
	MaxMetadataValueLen = 512
	// MaxOverlap is the longest rotation overlap.
	MaxOverlap = 7 * 24 * time.Hour
	// MaxExpiry is how far ahead an expiry may be.
	MaxExpiry = 10 * 366 * 24 * time.Hour
	// MaxPageLimit is the largest page of a listing; DefaultPageLimit when none is asked.
	MaxPageLimit     = 1000
	DefaultPageLimit = 100
)

// fieldError is an input the API refuses: the path of the field and why.
type fieldError struct {
	Field, Message string
}

func (e *fieldError) Error() string { return e.Field + ": " + e.Message }

func badField(field, format string, args ...any) *fieldError {
	return &fieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// keyInput is the body of a create or an update: each field is kept raw, so that an
// absent field (nil) differs from null (cleared).
type keyInput struct {
	ID        json.RawMessage `json:"id"`
	Name      json.RawMessage `json:"name"`
	Models    json.RawMessage `json:"models"`
	Limits    json.RawMessage `json:"limits"`
	ExpiresAt json.RawMessage `json:"expires_at"`
	Metadata  json.RawMessage `json:"metadata"`
	Budget    json.RawMessage `json:"budget"`
	Budgets   json.RawMessage `json:"budgets"`
}

// change is a validated keyInput, ready to apply to a record.
type change struct {
	id                                                string
	setName, setModels, setLimits, setExpiry, setMeta bool
	name                                              string
	models                                            []string
	limits                                            *keys.Limits
	expiresAt                                         *time.Time
	metadata                                          map[string]string
	setBudget, setBudgets                             bool
	budget                                            *keys.Budget
	budgets                                           []string
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// decodeStrict decodes raw into v, refusing unknown fields and trailing data; an error
// names the field at path.
func decodeStrict(raw []byte, v any, path string) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	err := d.Decode(v)
	if err == nil && d.More() {
		err = errors.New("unexpected data after the JSON value")
	}
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		f := join(path, te.Field)
		if f == "" {
			f = "body"
		}
		return badField(f, "expected %s, not %s", describeType(te.Type.String()), te.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, _ = strconv.Unquote(name)
		f := join(path, name)
		if name == "" {
			f = join(path, `""`)
		}
		return badField(f, "unknown field")
	}
	if path == "" {
		path = "body"
	}
	return badField(path, "invalid JSON: %v", err)
}

func describeType(t string) string {
	switch {
	case strings.HasPrefix(t, "int"):
		return "an integer"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map"), strings.Contains(t, "."):
		return "an object"
	case t == "bool":
		return "true or false"
	}
	return t
}

func join(path, field string) string {
	switch {
	case field == "":
		return path
	case path == "":
		return field
	}
	return path + "." + field
}

// parseKeyInput reads and validates a body of create (creating) or update. models are the
// configured model ids, against which patterns and per-model limits are checked; budgets
// the names of the configured budgets, which a key's budgets must be.
func parseKeyInput(body []byte, creating bool, models, budgets []string, now time.Time) (*change, error) {
	var in keyInput
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if err := decodeStrict(body, &in, ""); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
	}{{"id", in.ID}, {"name", in.Name}, {"models", in.Models}, {"limits", in.Limits}, {"expires_at", in.ExpiresAt}, {"metadata", in.Metadata},
		{"budget", in.Budget}, {"budgets", in.Budgets}} {
		if !utf8.Valid(f.raw) {
			return nil, badField(f.name, "is not valid UTF-8")
		}
	}
	c := &change{}
	if in.ID != nil {
		if !creating {
			return nil, badField("id", "cannot be changed")
		}
		if err := decodeStrict(in.ID, &c.id, "id"); err != nil {
			return nil, err
		}
		if !store.ValidKeyID(c.id) {
			return nil, badField("id", "must be 1 to %d bytes of UTF-8 without spaces, control characters or any of { } / ? # %%", store.MaxKeyIDLen)
		}
	}
	steps := []func(*keyInput, *change) error{
		func(in *keyInput, c *change) error { return c.parseName(in.Name) },
		func(in *keyInput, c *change) error { return c.parseModels(in.Models, models) },
		func(in *keyInput, c *change) error { return c.parseLimits(in.Limits, models) },
		func(in *keyInput, c *change) error { return c.parseExpiry(in.ExpiresAt, now) },
		func(in *keyInput, c *change) error { return c.parseMetadata(in.Metadata) },
		func(in *keyInput, c *change) error { return c.parseBudget(in.Budget) },
		func(in *keyInput, c *change) error { return c.parseBudgets(in.Budgets, budgets) },
	}
	for _, step := range steps {
		if err := step(&in, c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *change) parseName(raw json.RawMessage) error {
	if raw == nil {
		return nil
	}
	c.setName = true
	if isNull(raw) {
		return nil
	}
	if err := decodeStrict(raw, &c.name, "name"); err != nil {
		return err
	}
	if !printable(c.name, MaxNameLen) {
		return badField("name", "must be at most %d bytes of UTF-8 without control characters", MaxNameLen)
	}
	return nil
}

func (c *change) parseModels(raw json.RawMessage, configured []string) error {
	if raw == nil {
		return nil
	}
	c.setModels = true
	if isNull(raw) {
		return nil
	}
	var items []json.RawMessage
	if err := decodeStrict(raw, &items, "models"); err != nil {
		return err
	}
	if len(items) > MaxModels {
		return badField("models", "at most %d patterns", MaxModels)
	}
	c.models = make([]string, len(items))
	for i, item := range items {
		f := fmt.Sprintf("models[%d]", i)
		if err := decodeStrict(item, &c.models[i], f); err != nil {
			return err
		}
		m := c.models[i]
		if m == "" || !printable(m, MaxModelLen) {
			return badField(f, "must be 1 to %d bytes of UTF-8 without control characters", MaxModelLen)
		}
		if !keys.MatchesAny(m, configured) {
			return badField(f, "%q matches no configured model", m)
		}
	}
	return nil
}

func (c *change) parseLimits(raw json.RawMessage, configured []string) error {
	if raw == nil {
		return nil
	}
	c.setLimits = true
	if isNull(raw) {
		return nil
	}
	c.limits = new(keys.Limits)
	if err := decodeStrict(raw, c.limits, "limits"); err != nil {
		return err
	}
	if err := checkRateLimits("limits", keys.RateLimits{RequestsPerMinute: c.limits.RequestsPerMinute,
		TokensPerMinute: c.limits.TokensPerMinute, Concurrent: c.limits.Concurrent}); err != nil {
		return err
	}
	for id, l := range c.limits.Models {
		f := "limits.models." + id
		known := false
		for _, m := range configured {
			known = known || m == id
		}
		if !known {
			return badField(f, "unknown model %q: limits are set per configured model id", id)
		}
		if err := checkRateLimits(f, l); err != nil {
			return err
		}
	}
	return nil
}

func checkRateLimits(path string, l keys.RateLimits) error {
	for _, b := range []struct {
		name   string
		v, max int64
	}{
		{"requests_per_minute", l.RequestsPerMinute, config.MaxRequestsPerMinute},
		{"tokens_per_minute", l.TokensPerMinute, config.MaxTokensPerMinute},
		{"concurrent", l.Concurrent, config.MaxConcurrent},
	} {
		if b.v < 0 || b.v > b.max {
			return badField(path+"."+b.name, "must be between 0 (no limit) and %d", b.max)
		}
	}
	return nil
}

func (c *change) parseExpiry(raw json.RawMessage, now time.Time) error {
	if raw == nil {
		return nil
	}
	c.setExpiry = true
	if isNull(raw) {
		return nil
	}
	var s string
	if err := decodeStrict(raw, &s, "expires_at"); err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	switch {
	case err != nil:
		return badField("expires_at", "expected a time such as 2030-01-02T15:04:05Z, not %q", s)
	case !t.After(now):
		return badField("expires_at", "must be in the future")
	case t.Sub(now) > MaxExpiry:
		return badField("expires_at", "must be within 10 years")
	}
	t = t.UTC()
	c.expiresAt = &t
	return nil
}

func (c *change) parseMetadata(raw json.RawMessage) error {
	if raw == nil {
		return nil
	}
	c.setMeta = true
	if isNull(raw) {
		return nil
	}
	var items map[string]json.RawMessage
	if err := decodeStrict(raw, &items, "metadata"); err != nil {
		return err
	}
	if len(items) > MaxMetadata {
		return badField("metadata", "at most %d entries, not %d", MaxMetadata, len(items))
	}
	c.metadata = make(map[string]string, len(items))
	for k, item := range items {
		var v string
		if err := decodeStrict(item, &v, "metadata."+k); err != nil {
			return err
		}
		c.metadata[k] = v
		if k == "" || !printable(k, MaxMetadataKeyLen) {
			return badField("metadata", "a key must be 1 to %d bytes of UTF-8 without control characters", MaxMetadataKeyLen)
		}
		if !printable(v, MaxMetadataValueLen) {
			return badField("metadata."+k, "must be at most %d bytes of UTF-8 without control characters", MaxMetadataValueLen)
		}
	}
	return nil
}

// parseBudget reads a key's own budget, {"usd": 2.5, "period": "day"}: the amount a
// decimal number of USD (a JSON number or its text), checked as the config checks it.
func (c *change) parseBudget(raw json.RawMessage) error {
	if raw == nil {
		return nil
	}
	c.setBudget = true
	if isNull(raw) {
		return nil
	}
	var in struct {
		USD    json.RawMessage `json:"usd"`
		Period string          `json:"period"`
	}
	if err := decodeStrict(raw, &in, "budget"); err != nil {
		return err
	}
	if in.USD == nil || isNull(in.USD) {
		return badField("budget.usd", "required")
	}
	text := string(bytes.TrimSpace(in.USD))
	if s, err := strconv.Unquote(text); err == nil {
		text = s
	}
	usd, err := config.ParseUSD(text)
	if err != nil {
		return badField("budget.usd", "invalid amount %q", text)
	}
	if msg := config.PeriodProblem(in.Period); msg != "" {
		return badField("budget.period", "%s", msg)
	}
	c.budget = keys.BudgetOf(&config.KeyBudget{USD: usd, Period: in.Period})
	return nil
}

// parseBudgets reads the names of the configured budgets a key's calls also spend.
func (c *change) parseBudgets(raw json.RawMessage, configured []string) error {
	if raw == nil {
		return nil
	}
	c.setBudgets = true
	if isNull(raw) {
		return nil
	}
	if err := decodeStrict(raw, &c.budgets, "budgets"); err != nil {
		return err
	}
	known := make(map[string]bool, len(configured))
	for _, name := range configured {
		known[name] = true
	}
	var first error
	config.CheckKeyBudgets(c.budgets, known, func(i int, msg string) {
		if first != nil {
			return
		}
		if i < 0 {
			first = badField("budgets", "%s", msg)
		} else {
			first = badField(fmt.Sprintf("budgets[%d]", i), "%s", msg)
		}
	})
	if len(c.budgets) == 0 {
		c.budgets = nil
	}
	return first
}

// apply sets the fields c carries on r.
func (c *change) apply(r *keys.Record) {
	if c.setName {
		r.Name = c.name
	}
	if c.setModels {
		r.Models = c.models
	}
	if c.setLimits {
		r.Limits = c.limits
	}
	if c.setExpiry {
		r.ExpiresAt = c.expiresAt
	}
	if c.setMeta {
		r.Metadata = c.metadata
	}
	if c.setBudget {
		r.Budget = c.budget
	}
	if c.setBudgets {
		r.Budgets = c.budgets
	}
}

// parseOverlap reads the body of a rotation: {"overlap": "10m"}, or nothing for none.
func parseOverlap(body []byte) (time.Duration, error) {
	var in struct {
		Overlap *string `json:"overlap"`
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return 0, nil
	}
	if err := decodeStrict(body, &in, ""); err != nil {
		return 0, err
	}
	if in.Overlap == nil {
		return 0, nil
	}
	d, err := time.ParseDuration(*in.Overlap)
	switch {
	case err != nil:
		return 0, badField("overlap", "expected a duration such as 10m or 24h, not %q", *in.Overlap)
	case d < 0 || d > MaxOverlap:
		return 0, badField("overlap", "must be between 0s and %s", MaxOverlap)
	}
	return d, nil
}

// parseEmpty refuses a body where none is expected (block, unblock): an empty object or
// nothing.
func parseEmpty(body []byte) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	var in struct{}
	return decodeStrict(body, &in, "")
}

// printable reports whether s is at most max bytes of UTF-8 without control characters.
func printable(s string, max int) bool {
	if len(s) > max || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < ' ' || r == 0x7f {
			return false
		}
	}
	return true
}
