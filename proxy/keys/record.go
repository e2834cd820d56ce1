package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelgate/gateway/proxy/config"
)

// Record is a key made at runtime as the store holds it (JSON). It holds the SHA-256 of the
// secret, never the secret. Its zero value is not a valid record.
type Record struct {
	ID        string     `json:"id"`
	Name      string     `json:"name,omitempty"`
	Digest    string     `json:"sha256"` // hex SHA-256 of the current secret
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Blocked   bool       `json:"blocked,omitempty"`
	// Models are the model ids the key may call, '*' matching any run of characters;
	// nil means every model.
	Models   []string          `json:"models,omitempty"`
	Limits   *Limits           `json:"limits,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Previous are the digests of earlier secrets that still work until their time
	// (a rotation's overlap).
	Previous []Previous `json:"previous,omitempty"`
	// Budget caps the key's own spend; Budgets name the config's budgets its calls also
	// spend (docs/budgets.md). Records written before they existed hold neither.
	Budget  *Budget  `json:"budget,omitempty"`
	Budgets []string `json:"budgets,omitempty"`
}

// Budget is a key's own budget, in the config's shape (config.KeyBudget) with the amount
// as its exact decimal text of USD.
type Budget struct {
	USD    string `json:"usd"`
	Period string `json:"period,omitempty"`
}

// Config returns b in the config's type, nil for nil or an amount that does not parse.
func (b *Budget) Config() *config.KeyBudget {
	if b == nil {
		return nil
	}
	usd, err := config.ParseUSD(b.USD)
	if err != nil {
		return nil
	}
	return &config.KeyBudget{USD: usd, Period: b.Period}
}

// BudgetOf returns kb in the records' type, nil for nil.
func BudgetOf(kb *config.KeyBudget) *Budget {
	if kb == nil {
		return nil
	}
	return &Budget{USD: kb.USD.String(), Period: kb.Period}
}

// Previous is an earlier secret of a rotated key and the time it stops working.
type Previous struct {
	Digest string    `json:"sha256"`
	Until  time.Time `json:"until"`
}

// Limits are a key's rate limits, in the config's shape (config.KeyLimits) with JSON names.
type Limits struct {
	RequestsPerMinute int64                 `json:"requests_per_minute,omitempty"`
	TokensPerMinute   int64                 `json:"tokens_per_minute,omitempty"`
	Concurrent        int64                 `json:"concurrent,omitempty"`
	Models            map[string]RateLimits `json:"models,omitempty"`
}

// RateLimits are the limits of one bucket, as config.RateLimits.
type RateLimits struct {
	RequestsPerMinute int64 `json:"requests_per_minute,omitempty"`
	TokensPerMinute   int64 `json:"tokens_per_minute,omitempty"`
	Concurrent        int64 `json:"concurrent,omitempty"`
}

// Config returns l in the config's type, nil for nil.
func (l *Limits) Config() *config.KeyLimits {
	if l == nil {
		return nil
	}
	kl := &config.KeyLimits{RequestsPerMinute: l.RequestsPerMinute, TokensPerMinute: l.TokensPerMinute, Concurrent: l.Concurrent}
	if len(l.Models) > 0 {
		kl.Models = make(map[string]config.RateLimits, len(l.Models))
		for m, r := range l.Models {
			kl.Models[m] = config.RateLimits{RequestsPerMinute: r.RequestsPerMinute, TokensPerMinute: r.TokensPerMinute, Concurrent: r.Concurrent}
		}
	}
	return kl
}

// LimitsOf returns kl in the records' type, nil for nil.
func LimitsOf(kl *config.KeyLimits) *Limits {
	if kl == nil {
		return nil
	}
	l := &Limits{RequestsPerMinute: kl.RequestsPerMinute, TokensPerMinute: kl.TokensPerMinute, Concurrent: kl.Concurrent}
	if len(kl.Models) > 0 {
		l.Models = make(map[string]RateLimits, len(kl.Models))
		for m, r := range kl.Models {
			l.Models[m] = RateLimits(r)
		}
	}
	return l
}

// Encode returns the stored form of r.
func (r *Record) Encode() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic("BUG: a key record does not marshal: " + err.Error())
	}
	return b
}

// Decode reads a stored record of id.
func Decode(id string, data []byte) (*Record, error) {
	r := new(Record)
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("cannot decode key %q: %w", id, err)
	}
	if r.ID != id {
		return nil, fmt.Errorf("cannot decode key %q: the record says %q", id, r.ID)
	}
	if _, err := parseDigest(r.Digest); err != nil {
		return nil, fmt.Errorf("cannot decode key %q: %w", id, err)
	}
	if b := r.Budget; b != nil && (b.Config() == nil || config.PeriodProblem(b.Period) != "") {
		return nil, fmt.Errorf("cannot decode key %q: budget of %q USD per %q", id, b.USD, b.Period)
	}
	return r, nil
}

// Digest is the SHA-256 of a secret.
type Digest = [sha256.Size]byte

// DigestOf returns the hex SHA-256 of secret, as a record holds it.
func DigestOf(secret string) string {
	d := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(d[:])
}

func parseDigest(s string) (Digest, error) {
	var d Digest
	if n, err := hex.Decode(d[:], []byte(s)); err != nil || n != len(d) || len(s) != 2*len(d) {
		return d, fmt.Errorf("sha256 %q is not 64 hex digits", s)
	}
	return d, nil
}
