package spend

import (
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/promtext"
)

// WritePrometheus writes the budgets in force and their use, in the
// Prometheus text format. A key's own budget is labelled key="<id>", a
// named budget budget="<name>"; labels come from the config, a bounded set.
//
//	gateway_budget_limit_usd{key|budget}              gauge: the cap of the current period
//	gateway_budget_spent_usd{key|budget}              gauge: settled spend of the current period
//	gateway_budget_reserved_usd{key|budget}           gauge: reserved by calls in flight
//	gateway_budget_refusals_total{key|budget}         counter: calls refused by the budget
//	gateway_budget_backend_failures_total{outcome}    counter: reservations made without Redis (open, closed), failed settlement round trips (lost)
//
// With Redis, the levels are the shared ledger as this node last saw it.
func (l *Ledger) WritePrometheus(w io.Writer) {
	lines := l.Report()
	if len(lines) == 0 && l.remote == nil {
		return
	}
	b := make([]byte, 0, 512+300*len(lines))
	for _, m := range [...]struct {
		name, typ, help string
		v               func(*Line) string
	}{
		{"gateway_budget_limit_usd", "gauge", "the budget's cap for its current period, in USD", func(ln *Line) string { return config.USD(ln.Limit).String() }},
		{"gateway_budget_spent_usd", "gauge", "settled spend of the budget's current period, in USD", func(ln *Line) string { return config.USD(ln.Spent).String() }},
		{"gateway_budget_reserved_usd", "gauge", "spend reserved by the calls in flight of the budget, in USD", func(ln *Line) string { return config.USD(ln.Reserved).String() }},
		{"gateway_budget_refusals_total", "counter", "calls refused because they did not fit the budget", func(ln *Line) string { return strconv.FormatUint(ln.Refused, 10) }},
	} {
		b = promtext.AppendMetadata(b, m.name, m.typ, m.help)
		for i := range lines {
			ln := &lines[i]
			b = append(b, m.name...)
			if ln.Own {
				b = append(b, "{key="...)
			} else {
				b = append(b, "{budget="...)
			}
			b = promtext.AppendLabelValue(b, ln.Name)
			b = append(b, "} "...)
			b = append(b, m.v(ln)...)
			b = append(b, '\n')
		}
	}
	b = promtext.AppendMetadata(b, "gateway_budget_backend_failures_total", "counter", "budget reservations made without the shared ledger, by outcome of the fail mode, and round trips of settlements that failed (lost: sent again, may count twice)")
	for i, o := range [...]string{"open", "closed", "lost"} {
		n := l.lost.Load()
		if i < 2 {
			n = l.failures[i].Load()
		}
		b = append(b, `gateway_budget_backend_failures_total{outcome="`...)
		b = append(b, o...)
		b = append(b, `"} `...)
		b = strconv.AppendUint(b, n, 10)
		b = append(b, '\n')
	}
	w.Write(b)
}

// Meter counts the spend of calls per key id and model in
// gateway_spend_usd_total{key,model}. Key ids and models are the config's,
// a bounded set: the map only grows while new pairs are first seen, and a
// lookup reads an immutable map without locking or allocating. Build it
// with NewMeter; safe for concurrent use.
type Meter struct {
	set *metrics.Set
	m   atomic.Pointer[map[meterKey]*metrics.FloatCounter]
	mu  sync.Mutex
}

type meterKey struct{ key, model string }

// NewMeter returns a Meter whose counters live in set.
func NewMeter(set *metrics.Set) *Meter { return &Meter{set: set} }

// Add counts cost (pico-USD) of a call of key on model.
func (m *Meter) Add(key, model string, cost int64) {
	if cost <= 0 {
		return
	}
	m.counter(key, model).Add(float64(cost) / config.PicoPerUSD)
}

func (m *Meter) counter(key, model string) *metrics.FloatCounter {
	k := meterKey{key, model}
	if p := m.m.Load(); p != nil {
		if c := (*p)[k]; c != nil {
			return c
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.m.Load()
	if old != nil && (*old)[k] != nil {
		return (*old)[k]
	}
	name := `gateway_spend_usd_total{key=` + string(promtext.AppendLabelValue(nil, key)) +
		`,model=` + string(promtext.AppendLabelValue(nil, model)) + `}`
	c := m.set.GetOrCreateFloatCounter(name)
	next := make(map[meterKey]*metrics.FloatCounter, 8)
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	next[k] = c
	m.m.Store(&next)
	return c
}
