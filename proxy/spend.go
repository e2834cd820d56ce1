package proxy

import (
	"cmp"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/accesslog"
	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/ratelimit"
	"github.com/modelgate/gateway/proxy/spend"
)

// Money budgets (see proxy/spend and docs/budgets.md): a call of a key with
// budgets reserves an estimate of its cost once its limits admit it, before
// a deployment is picked; a call that does not fit is refused in its
// family's quota answer. finish settles the reservation with the call's
// cost, from the usage its answer reported (or the estimate of usage that
// never came), on every way a call ends.

// spending is the gateway's side of budgets: the ledger, the spend counters
// and the prices in force.
type spending struct {
	ledger *spend.Ledger
	meter  *spend.Meter
	prices atomic.Pointer[priceTable]
}

// priceTable holds the prices of each model id: what a call is charged on a
// deployment, and the highest prices a call of the model may be charged
// (any deployment of it or of its fallbacks), which its reservation uses.
type priceTable struct {
	models map[string]*modelPrices
	// free: no model has a price, on any deployment; every call costs
	// nothing, and a call's end looks up no prices.
	free bool
}

type modelPrices struct {
	base    spend.Prices
	deps    map[string]spend.Prices // by deployment name, where set
	highest spend.Prices
	// maxOut is the output reserved for a call that sends no maximum.
	maxOut int64
}

// defaultMaxOutputTokens is the output a call reserves when neither the
// call nor its model says more.
const defaultMaxOutputTokens = 4096

// setupSpend makes the ledger in the cluster that the rate limits share
// (Options.Limits), else in memory.
func (g *Gateway) setupSpend(shared ratelimit.Options) {
	opts := spend.Options{Now: g.now, Logger: g.log, Redis: shared.Redis, KeyPrefix: shared.KeyPrefix}
	g.spend.ledger = spend.New(opts)
	g.spend.meter = spend.NewMeter(g.obs.set)
	g.obs.set.RegisterMetricsWriter(g.spend.ledger.WritePrometheus)
}

// updateSpend puts cfg's prices in force; its budgets follow through
// keysSwapped, with the keys' snapshot the reload puts in force.
func (g *Gateway) updateSpend(cfg *config.Config) {
	g.spend.prices.Store(newPriceTable(cfg))
}

func newPriceTable(cfg *config.Config) *priceTable {
	t := &priceTable{models: make(map[string]*modelPrices, len(cfg.Models)), free: true}
	byID := make(map[string]*config.Model, len(cfg.Models))
	for i := range cfg.Models {
		m := &cfg.Models[i]
		byID[m.ID] = m
		mp := &modelPrices{base: spend.PricesOf(m.Pricing), maxOut: m.DefaultMaxOutputTokens}
		if mp.maxOut == 0 {
			mp.maxOut = defaultMaxOutputTokens
		}
		for _, u := range m.Upstreams {
			if u.Pricing != nil {
				if mp.deps == nil {
					mp.deps = make(map[string]spend.Prices, len(m.Upstreams))
				}
				p := spend.PricesOf(u.Pricing)
				mp.deps[u.Name] = p
				t.free = t.free && p.Zero()
			}
		}
		t.free = t.free && mp.base.Zero()
		t.models[m.ID] = mp
	}
	for id, mp := range t.models {
		seen := map[string]bool{}
		var walk func(id string)
		walk = func(id string) {
			if seen[id] || byID[id] == nil {
				return
			}
			seen[id] = true
			o := t.models[id]
			mp.highest = highest(mp.highest, o.base)
			for _, p := range o.deps {
				mp.highest = highest(mp.highest, p)
			}
			for _, fb := range byID[id].Fallbacks {
				walk(fb)
			}
		}
		walk(id)
	}
	return t
}

// highest returns the higher of each price of a and b.
func highest(a, b spend.Prices) spend.Prices {
	return spend.Prices{Input: max(a.Input, b.Input), Output: max(a.Output, b.Output),
		CachedInput: max(a.CachedInput, b.CachedInput), CacheWrite: max(a.CacheWrite, b.CacheWrite),
		Reasoning: max(a.Reasoning, b.Reasoning), Image: max(a.Image, b.Image)}
}

// prices returns the prices of the call's model on its deployment, nil for
// a call without a model or when nothing has a price.
func (c *call) prices() *spend.Prices {
	t := c.g.spend.prices.Load()
	if c.model == nil || t.free {
		return nil
	}
	mp := t.models[c.model.id]
	if mp == nil {
		return nil
	}
	if c.dep != nil {
		if p, ok := mp.deps[c.dep.Name()]; ok {
			return &p
		}
	}
	return &mp.base
}

// holds are the calls' budget reservations, taken by the calls whose key
// has a budget and given back once settled.
var holds = sync.Pool{New: func() any { return new(spend.Hold) }}

// reserveSpend reserves the call's estimated cost of its key's budgets,
// answering a refusal itself. A call that makes no model generate (a
// retrieve, an input tokens count) costs nothing and reserves nothing.
func (c *call) reserveSpend() bool {
	l := c.g.spend.ledger
	if !generates[c.ep] || !l.Applies(c.keyID) {
		return true
	}
	c.hold = holds.Get().(*spend.Hold)
	v := l.Reserve(c.keyID, c.estimatedCost(), c.hold)
	if !v.Refused && !v.Unavailable {
		return true
	}
	c.refuseSpend(&v)
	return false
}

// estimatedCost is what the call may cost at most, as far as its request
// tells: its input from the body's bytes (bytesPerInputToken, the bound of
// the limits' estimate) at the highest input price of the model, its
// output from the maximum the request sets (else the model's default) at
// the highest output price, and its images at the image price.
func (c *call) estimatedCost() int64 {
	if c.model == nil {
		return 0
	}
	mp := c.g.spend.prices.Load().models[c.model.id]
	if mp == nil {
		return 0
	}
	p := &mp.highest
	in := int64(len(c.body)+bytesPerInputToken-1) / bytesPerInputToken
	out := c.maxOutputTokens()
	if out <= 0 {
		out = mp.maxOut
	}
	u := spend.Usage{Input: in, Output: out, Images: c.images()}
	worst := spend.Prices{Input: max(p.Input, p.CachedInput, p.CacheWrite), Output: max(p.Output, p.Reasoning), Image: p.Image}
	return worst.Cost(&u, spend.Shape{})
}

// maxOutputTokens returns the output maximum the request sets, 0 when none.
func (c *call) maxOutputTokens() int64 {
	b := c.body
	switch c.ep {
	case epChat:
		if n := memberCount(b, "max_completion_tokens"); n > 0 {
			return n
		}
		return memberCount(b, "max_tokens")
	case epResponsesCreate, epResponsesCompact:
		return memberCount(b, "max_output_tokens")
	case epMessages:
		return memberCount(b, "max_tokens")
	case epGenerateContent:
		return memberCount(parse.Member(b, "generationConfig"), "maxOutputTokens")
	}
	return 0
}

// images returns the images a call asks for: n (default 1) on the images
// endpoint, 0 elsewhere.
func (c *call) images() int64 {
	if c.ep != epImages {
		return 0
	}
	if n := memberCount(c.body, "n"); n > 0 {
		return n
	}
	return 1
}

// memberCount reads obj's top-level member key as a positive integer of at
// most 12 digits; 0 when it is absent or not one.
func memberCount(obj []byte, key string) int64 {
	v := parse.Member(obj, key)
	if len(v) > 12 {
		return 0
	}
	n, _ := parse.Count(v)
	return n
}

// refuseSpend answers a call its budget does not fit with the family's
// answer to a spent balance, which the SDKs do not retry: beta 429
// insufficient_quota, gamma 429 RESOURCE_EXHAUSTED, alpha 400 "credit
// balance is too low"; 503 when the shared ledger cannot be reached and
// the gateway fails closed.
func (c *call) refuseSpend(v *spend.Verdict) {
	if v.Unavailable {
		c.fail(&Error{Status: 503, Reason: "budget_unavailable", RetryAfter: 1,
			Message: "the gateway cannot check this key's budget now; retry shortly"})
		return
	}
	e := &Error{Status: 429, Reason: "budget_exceeded", Message: budgetMessage(c.keyID, v)}
	switch c.family {
	case family.Beta:
		e.Type, e.Code = "insufficient_quota", "insufficient_quota"
		e.Message = "You exceeded your current quota: " + e.Message
	case family.Alpha:
		e.Status = 400
		e.Message = "Your credit balance is too low to access the API: " + e.Message
	}
	c.fail(e)
	c.ctx.Response.Header.Set("x-should-retry", "false")
}

func budgetMessage(key string, v *spend.Verdict) string {
	scope := "budget '" + v.Budget + "'"
	if v.Own {
		scope = "key '" + key + "'"
	}
	per := " per " + v.Period.String()
	if v.Period == spend.Total {
		per = " in total"
	}
	return scope + " allows $" + config.USD(v.Limit).String() + per + " and has $" +
		config.USD(v.Remaining).String() + " left; this call may cost up to $" + config.USD(v.Reserved).String()
}

// settleSpend ends the call's reservation with its cost and counts it.
func (g *Gateway) settleSpend(c *call) {
	c.spent = 0
	p := c.prices()
	if p != nil && !p.Zero() {
		c.spent = c.cost(p)
	}
	c.reserved = 0
	if h := c.hold; h != nil {
		c.reserved = h.Reserved()
		g.spend.ledger.Settle(h, c.spent) // which resets h
		c.hold = nil
		holds.Put(h)
	}
	if c.spent > 0 {
		g.spend.meter.Add(c.keyID, c.model.id, c.spent)
	}
}

// familyShapes says how each family's usage counts nest (see spend.Shape).
var familyShapes = [family.Count]spend.Shape{
	family.Alpha: {},
	family.Beta:  {CachedInInput: true, ReasoningInOutput: true},
	family.Gamma: {CachedInInput: true},
}

// cost is what the call cost at prices p: its reported usage, or, where
// usage is missing (see estimates), the limits' estimate of its input and
// output, priced as uncached input and output; images count when the
// answer succeeded.
func (c *call) cost(p *spend.Prices) int64 {
	if !c.sent {
		return 0
	}
	u := c.up.Usage()
	su := spend.Usage{Input: u.Input, Output: u.Output, Cached: u.Cached, CacheWrite: u.CacheWrite, Reasoning: u.Reasoning}
	if c.ep == epImages && c.status >= 200 && c.status < 300 {
		su.Images = c.images()
	}
	if c.estimates(&u) {
		in, out := c.estimatedTokens(&u)
		su = spend.Usage{Input: max(in, u.Input), Output: out, Images: su.Images}
		return p.Cost(&su, spend.Shape{})
	}
	return p.Cost(&su, familyShapes[c.family])
}

// estimatedTokens is chargedTokens' estimate, input and output apart.
func (c *call) estimatedTokens(u *parse.Usage) (in, out int64) {
	in = u.Input
	if in <= 0 {
		n := int64(len(c.body))
		if c.up.Streaming() {
			n = int64(c.bodyLen)
		}
		in = (n + bytesPerInputToken - 1) / bytesPerInputToken
	}
	out = (c.up.Sent() + bytesPerOutputToken - 1) / bytesPerOutputToken
	if c.up.SSE() {
		out = c.up.Events()
	}
	return in, max(u.Output, out)
}

// addSpendAttrs adds the access line's cost of the call and what it
// reserved, in USD, for a call that cost something or whose key has a budget.
func addSpendAttrs(ln *accesslog.Line, c *call) {
	if c.spent <= 0 && !c.g.spend.ledger.Applies(c.keyID) {
		return
	}
	ln.String("cost_usd", config.USD(c.spent).String())
	ln.String("reserved_usd", config.USD(c.reserved).String())
}

// budgetsPath is the admin API's read of the budgets: spent and remaining
// per key and per named budget, in the current period.
const budgetsPath = "/admin/v1/budgets"

// budgetView is one budget as the admin API and the status page show it;
// amounts are exact decimal strings of USD.
type budgetView struct {
	Key         string `json:"key,omitempty"`
	Budget      string `json:"budget,omitempty"`
	Period      string `json:"period"`
	PeriodStart string `json:"period_start"`
	Limit       string `json:"limit_usd"`
	Spent       string `json:"spent_usd"`
	Reserved    string `json:"reserved_usd"`
	Remaining   string `json:"remaining_usd"`
	Refused     uint64 `json:"refused"`
}

// budgetViews returns every budget in force, keys' own first, by name.
func (g *Gateway) budgetViews() []budgetView {
	lines := g.spend.ledger.Report()
	out := make([]budgetView, 0, len(lines))
	for i := range lines {
		ln := &lines[i]
		v := budgetView{Period: ln.Period.String(), PeriodStart: time.Unix(ln.Start, 0).UTC().Format(time.RFC3339),
			Limit: config.USD(ln.Limit).String(), Spent: config.USD(ln.Spent).String(),
			Reserved: config.USD(ln.Reserved).String(), Remaining: config.USD(ln.Remaining()).String(), Refused: ln.Refused}
		if ln.Own {
			v.Key = ln.Name
		} else {
			v.Budget = ln.Name
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b budgetView) int {
		return cmp.Or(cmp.Compare(a.Budget, b.Budget), cmp.Compare(a.Key, b.Key))
	})
	return out
}

// serveBudgets answers GET /admin/v1/budgets, with an admin token as the
// keys' API: {"budgets": [...]}. With Redis, the levels are the shared
// ledger as this node last saw it.
func (g *Gateway) serveBudgets(ctx *fasthttp.RequestCtx) {
	if _, ok := g.adminTokens.Load().Verify(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)); !ok {
		ctx.Response.Header.Set("WWW-Authenticate", `Bearer realm="admin"`)
		ctx.Error("unauthorized: the admin API needs an admin token (Authorization: Bearer <token>)\n", fasthttp.StatusUnauthorized)
		return
	}
	b, _ := json.Marshal(struct {
		Budgets []budgetView `json:"budgets"`
	}{g.budgetViews()})
	ctx.SetContentType("application/json")
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetBody(append(b, '\n'))
}
