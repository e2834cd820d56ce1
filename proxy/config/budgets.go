package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Money: prices and budgets (docs/budgets.md). Amounts are read from their
// decimal text, never through a float, as integers of pico-USD (1e-12 USD):
// a price of up to 6 decimals in USD per million tokens is then a whole
// number of pico-USD per token, and every cost the product of two integers.

// USD is an amount of US dollars in pico-USD, written in YAML as a decimal
// number of dollars ("2.5", "0.075"), with at most 12 decimals.
type USD int64

// PicoPerUSD is the number of USD units in a dollar.
const PicoPerUSD = 1_000_000_000_000

// MaxUSD bounds any amount: a budget of a million dollars, far above any
// cap in use, leaves every sum of amounts within int64.
const MaxUSD = 1_000_000 * PicoPerUSD

var usdType = reflect.TypeFor[USD]()

// UnmarshalYAML reads a decimal amount of dollars.
func (u *USD) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseUSD(n.Value)
	if err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: invalid amount %q", n.Line, n.Value)}}
	}
	*u = USD(v)
	return nil
}

// String formats u as a decimal number of dollars, without trailing zeros.
func (u USD) String() string {
	neg := u < 0
	v := uint64(u)
	if neg {
		v = uint64(-u)
	}
	s := fmt.Sprintf("%d.%012d", v/PicoPerUSD, v%PicoPerUSD)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if neg {
		return "-" + s
	}
	return s
}

var errUSD = errors.New("not a decimal amount")

// ParseUSD reads a decimal amount of dollars as a budget takes it: at most
// 12 decimals and at most MaxUSD.
func ParseUSD(s string) (USD, error) {
	v, err := parseUSD(s)
	return USD(v), err
}

// parseUSD reads a non-negative decimal of at most 12 decimals and at most
// MaxUSD, in pico-USD.
func parseUSD(s string) (int64, error) {
	whole, frac, dot := strings.Cut(strings.TrimSpace(s), ".")
	if whole == "" && frac == "" || len(frac) > 12 || dot && frac == "" || len(whole) > 7 {
		return 0, errUSD
	}
	var v int64
	for _, c := range whole + frac + strings.Repeat("0", 12-len(frac)) {
		if c < '0' || c > '9' {
			return 0, errUSD
		}
		v = v*10 + int64(c-'0')
	}
	if v > MaxUSD {
		return 0, errUSD
	}
	return v, nil
}

// Pricing is what a model's calls cost, in USD per million tokens (Image:
// per image). CachedInput is the price of input tokens read from the
// provider's prompt cache, CacheWrite of those written to it; Reasoning,
// when not set, is Output's. A price left out is 0.
type Pricing struct {
	Input       USD  `yaml:"input"`
	Output      USD  `yaml:"output"`
	CachedInput USD  `yaml:"cached_input"`
	CacheWrite  USD  `yaml:"cache_write"`
	Reasoning   *USD `yaml:"reasoning"`
	Image       USD  `yaml:"image"`
}

// KeyBudget is a key's own budget.
type KeyBudget struct {
	USD    USD    `yaml:"usd"`
	Period string `yaml:"period"` // day, week, month or total (the default)
}

// Budget is a named budget that the keys naming it share.
type Budget struct {
	Name   string `yaml:"name"`
	USD    USD    `yaml:"usd"`
	Period string `yaml:"period"`
}

// MaxKeyBudgets bounds the named budgets of one key, which a call reserves
// of all at once.
const MaxKeyBudgets = 7

// Periods are the spans a budget is reset at: UTC days, ISO weeks (from
// Monday), calendar months, or never.
var Periods = []string{"day", "week", "month", "total"}

// budgets checks the named budgets, the keys' budgets and their prices.
func (p *problems) budgets(c *Config) {
	names := map[string]bool{}
	for i, b := range c.Budgets {
		f := fmt.Sprintf("budgets[%d]", i)
		switch {
		case b.Name == "":
			p.add(f+".name", "required")
		case strings.ContainsAny(b.Name, "\x00{}:"):
			p.add(f+".name", "must not contain NUL, braces or colons")
		case names[b.Name]:
			p.add(f+".name", "duplicate name %q", b.Name)
		}
		names[b.Name] = true
		p.period(f+".period", b.Period)
	}
	for i, k := range c.Keys {
		f := fmt.Sprintf("keys[%d]", i)
		if k.Budget != nil {
			p.period(f+".budget.period", k.Budget.Period)
		}
		CheckKeyBudgets(k.Budgets, names, func(j int, msg string) {
			if j < 0 {
				p.add(f+".budgets", "%s", msg)
			} else {
				p.add(fmt.Sprintf("%s.budgets[%d]", f, j), "%s", msg)
			}
		})
	}
	for i, m := range c.Models {
		f := fmt.Sprintf("models[%d]", i)
		p.pricing(f+".pricing", m.Pricing)
		for j, u := range m.Upstreams {
			p.pricing(fmt.Sprintf("%s.upstreams[%d].pricing", f, j), u.Pricing)
		}
		if m.DefaultMaxOutputTokens < 0 {
			p.add(f+".default_max_output_tokens", "must not be negative")
		}
	}
}

// CheckKeyBudgets checks the named budgets of a key against known, the
// names of the config's budgets: bad receives each problem, with the index
// of the name at fault, or -1 when the list is.
func CheckKeyBudgets(names []string, known map[string]bool, bad func(i int, msg string)) {
	if len(names) > MaxKeyBudgets {
		bad(-1, fmt.Sprintf("at most %d budgets per key", MaxKeyBudgets))
	}
	seen := map[string]bool{}
	for j, name := range names {
		switch {
		case !known[name]:
			bad(j, fmt.Sprintf("unknown budget %q", name))
		case seen[name]:
			bad(j, fmt.Sprintf("duplicate budget %q", name))
		}
		seen[name] = true
	}
}

func (p *problems) period(f, period string) {
	if msg := PeriodProblem(period); msg != "" {
		p.add(f, "%s", msg)
	}
}

// PeriodProblem returns why period is not a budget's period, "" when it is
// one (or empty: total).
func PeriodProblem(period string) string {
	switch period {
	case "", "day", "week", "month", "total":
		return ""
	}
	return fmt.Sprintf("must be one of %s, not %q", strings.Join(Periods, ", "), period)
}

// pricing checks that every price per million tokens is a whole number of
// pico-USD per token (at most 6 decimals), so that costs stay exact.
func (p *problems) pricing(f string, pr *Pricing) {
	if pr == nil {
		return
	}
	check := func(name string, v USD) {
		if v%1_000_000 != 0 {
			p.add(f+"."+name, "at most 6 decimals, in USD per million tokens")
		}
	}
	check("input", pr.Input)
	check("output", pr.Output)
	check("cached_input", pr.CachedInput)
	check("cache_write", pr.CacheWrite)
	if pr.Reasoning != nil {
		check("reasoning", *pr.Reasoning)
	}
}

// HasBudget reports whether any key has a budget.
func (c *Config) HasBudget() bool {
	for _, k := range c.Keys {
		if k.Budget != nil || len(k.Budgets) > 0 {
			return true
		}
	}
	return false
}

// Unpriced lists, when a budget applies, the models that some deployment
// serves without a price: their calls cost nothing.
func (c *Config) Unpriced() []string {
	if !c.HasBudget() {
		return nil
	}
	var out []string
	for _, m := range c.Models {
		for _, u := range m.Upstreams {
			if pr := cmpPricing(u.Pricing, m.Pricing); pr == nil || *pr == (Pricing{}) {
				out = append(out, m.ID)
				break
			}
		}
	}
	return out
}

func cmpPricing(a, b *Pricing) *Pricing {
	if a != nil {
		return a
	}
	return b
}
