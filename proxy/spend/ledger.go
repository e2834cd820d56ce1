package spend

import (
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/modelgate/gateway/proxy/config"
)

// MaxPerCall bounds the budgets one call spends: its key's own and the
// named budgets the key shares (config allows MaxPerCall-1 of those).
const MaxPerCall = 8

// Options configure a Ledger; the zero value keeps budgets in memory.
type Options struct {
	// Redis, when set, returns the client of the cluster that holds the
	// budgets shared by every node that uses it with the same KeyPrefix; nil
	// while it is not connected (a reservation then fails as the fail mode
	// says).
	Redis     func() rueidis.Client
	KeyPrefix string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives the line of a budget that passes 80 %; nil: slog.Default().
	Logger *slog.Logger
}

// Ledger holds the budgets in force and what was spent and reserved of them
// in their current (and previous) period. Build it with New; safe for
// concurrent use.
type Ledger struct {
	now    func() time.Time
	log    *slog.Logger
	remote *remote
	table  atomic.Pointer[table]

	mu      sync.Mutex         // Update
	budgets map[string]*Budget // every budget ever made, by its internal name

	failOpen atomic.Bool
	// failures counts the reservations made without the shared ledger, by
	// outcome: [0] admitted (fail open), [1] refused (fail closed); lost the
	// round trips of settlements that failed (they are sent again).
	failures [2]atomic.Uint64
	lost     atomic.Uint64
	calls    atomic.Uint64
}

// table is the budgets in force, per key id, in lock order. Immutable.
type table struct {
	keys  map[string][]*Budget
	named []*Budget // the named budgets and the keys' own, for reports
}

// Budget is one cap: a key's own, or a named budget shared by keys. Its
// cap and period change on reload; what was spent stays.
type Budget struct {
	name string // the key id of a key's own budget, else the budget's name
	own  bool
	seq  int    // lock order
	id   string // internal and Redis name: "k:" + key id or "b:" + name

	cap    atomic.Int64  // pico-USD
	period atomic.Uint32 // Period

	mu        sync.Mutex
	cur, prev level
	refused   atomic.Uint64
}

// level is what was spent and reserved of a budget in the period that began
// at start. With Redis it is the shared level as this node last saw it.
type level struct {
	start, spent, reserved int64
	warned                 bool // the 80 % line was logged for this period
}

// New returns a ledger with no budgets; Update puts the config's in force.
func New(opts Options) *Ledger {
	l := &Ledger{now: opts.Now, log: opts.Logger, budgets: map[string]*Budget{}}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if opts.Redis != nil {
		l.remote = &remote{client: opts.Redis, prefix: opts.KeyPrefix}
		l.remote.timeout.Store(int64(250 * time.Millisecond))
	}
	l.failOpen.Store(true)
	l.table.Store(&table{})
	return l
}

// Shared reports whether the budgets are kept in Redis, across nodes.
func (l *Ledger) Shared() bool { return l.remote != nil }

// Update puts the budgets of keys and named in force, and the fail mode of
// rl. A budget that stays keeps what was spent of it; only its cap and
// period change (a new period starts from nothing).
func (l *Ledger) Update(keys []config.Key, named []config.Budget, rl config.RateLimit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	byName := make(map[string]*Budget, len(named))
	t := &table{keys: make(map[string][]*Budget, len(keys))}
	for _, nb := range named {
		b := l.budget("b:"+nb.Name, nb.Name, false, nb.USD, nb.Period)
		byName[nb.Name] = b
		t.named = append(t.named, b)
	}
	for _, k := range keys {
		var bs []*Budget
		if k.Budget != nil {
			b := l.budget("k:"+k.ID, k.ID, true, k.Budget.USD, k.Budget.Period)
			bs = append(bs, b)
			t.named = append(t.named, b)
		}
		for _, name := range k.Budgets {
			if b := byName[name]; b != nil && len(bs) < MaxPerCall {
				bs = append(bs, b)
			}
		}
		if len(bs) > 0 {
			slices.SortFunc(bs, func(a, b *Budget) int { return a.seq - b.seq })
			t.keys[k.ID] = bs
		}
	}
	l.failOpen.Store(rl.Open())
	if l.remote != nil && rl.Timeout.D() > 0 {
		l.remote.timeout.Store(int64(rl.Timeout.D()))
	}
	l.table.Store(t)
}

// budget returns the budget of id, made on first use, with cap and period
// set; l.mu is held.
func (l *Ledger) budget(id, name string, own bool, usd config.USD, period string) *Budget {
	b := l.budgets[id]
	if b == nil {
		b = &Budget{name: name, own: own, seq: len(l.budgets), id: id}
		l.budgets[id] = b
	}
	b.cap.Store(int64(usd))
	b.period.Store(uint32(ParsePeriod(period)))
	return b
}

// Applies reports whether a key's calls spend a budget.
func (l *Ledger) Applies(key string) bool { return len(l.table.Load().keys[key]) > 0 }

// Hold is a call's reservation on its budgets, ended by Settle. The zero
// value holds nothing; a Hold lives in the caller's pooled call.
type Hold struct {
	bs     [MaxPerCall]*Budget
	start  [MaxPerCall]int64 // the period each reservation was made in
	n      int
	amount int64 // reserved of each budget, pico-USD
}

// Held reports whether h holds budgets: Settle must be called.
func (h *Hold) Held() bool { return h.n > 0 }

// Reserved returns the amount the hold reserved, in pico-USD.
func (h *Hold) Reserved() int64 { return h.amount }

func (h *Hold) reset() { *h = Hold{} }

// Verdict is a reservation's outcome: admitted, or refused by the budget
// named (its cap and what is left of it), or refused because the shared
// ledger cannot be reached and the ledger fails closed.
type Verdict struct {
	Refused          bool
	Unavailable      bool
	Budget           string // the refusing budget's key id or name
	Own              bool   // it is the key's own budget
	Period           Period
	Limit, Remaining int64
	Reserved         int64 // what the call asked for
}

// Reserve reserves want pico-USD of every budget of key's calls, or none:
// admitted, h holds the reservation, which Settle must end; refused, h
// holds nothing. Keys without budgets are admitted at once and h holds
// nothing. In memory it does not allocate.
func (l *Ledger) Reserve(key string, want int64, h *Hold) Verdict {
	bs := l.table.Load().keys[key]
	if len(bs) == 0 {
		return Verdict{}
	}
	h.n = copy(h.bs[:], bs)
	h.amount = want
	now := l.now()
	if l.remote != nil {
		return l.reserveShared(h, want, now)
	}
	lockAll(bs) // not h's copy: a refusal resets h
	defer unlockAll(bs)
	for _, b := range bs {
		lv := b.roll(now)
		if c := b.cap.Load(); lv.spent+lv.reserved+want > c {
			h.reset()
			return b.refusal(lv, c, want)
		}
	}
	for i, b := range bs {
		b.cur.reserved += want
		h.start[i] = b.cur.start
	}
	return Verdict{}
}

// roll starts the budget's current period when now is past its start, and
// returns its level; b.mu is held. A period made longer on reload (a day to
// a month) starts earlier: what was spent since the old start counts in it.
func (b *Budget) roll(now time.Time) *level {
	s := Period(b.period.Load()).Start(now)
	switch {
	case s > b.cur.start:
		b.prev, b.cur = b.cur, level{start: s}
	case s < b.cur.start:
		b.cur.start = s
	}
	return &b.cur
}

// refusal counts and describes b's refusal of want; b.mu is held.
func (b *Budget) refusal(lv *level, limit, want int64) Verdict {
	b.refused.Add(1)
	return Verdict{Refused: true, Budget: b.name, Own: b.own, Period: Period(b.period.Load()),
		Limit: limit, Remaining: max(0, limit-lv.spent-lv.reserved), Reserved: want}
}

// levelOf returns the level of the period that began at start: the
// current one, the previous one, or nil for an older one; b.mu is held.
func (b *Budget) levelOf(start int64) *level {
	switch {
	case start >= b.cur.start:
		return &b.cur
	case start >= b.prev.start:
		return &b.prev
	}
	return nil
}

// Settle ends the call's reservation: cost (its actual cost, pico-USD)
// replaces it in every budget's period it was reserved in. h holds nothing
// afterwards.
func (l *Ledger) Settle(h *Hold, cost int64) {
	if !h.Held() {
		return
	}
	if l.remote != nil {
		l.settleShared(h, cost)
		h.reset()
		return
	}
	var warn [MaxPerCall]bool
	held := h.bs[:h.n]
	for i, b := range held {
		b.mu.Lock()
		if lv := b.levelOf(h.start[i]); lv != nil {
			lv.reserved -= h.amount
			lv.spent += cost
			warn[i] = lv.passed80(b.cap.Load())
		}
		b.mu.Unlock()
	}
	l.warn(held, warn[:h.n])
	h.reset()
}

// passed80 reports, once per period, that the level passed 80 % of limit.
func (lv *level) passed80(limit int64) bool {
	if lv.warned || limit <= 0 || lv.spent*5 < limit*4 {
		return false
	}
	lv.warned = true
	return true
}

// warn logs the budgets of bs that passed 80 % of their cap.
func (l *Ledger) warn(bs []*Budget, passed []bool) {
	for i, b := range bs {
		if !passed[i] {
			continue
		}
		b.mu.Lock()
		spent, limit := b.cur.spent, b.cap.Load()
		b.mu.Unlock()
		what := "budget"
		if b.own {
			what = "key"
		}
		l.log.Warn("budget passed 80% of its cap", what, b.name, "period", Period(b.period.Load()).String(),
			"spent_usd", config.USD(spent).String(), "limit_usd", config.USD(limit).String())
	}
}

// lockAll locks budgets in their order (seq) everywhere.
func lockAll(bs []*Budget) {
	for _, b := range bs {
		b.mu.Lock()
	}
}

func unlockAll(bs []*Budget) {
	for _, b := range bs {
		b.mu.Unlock()
	}
}

// Line is one budget's state, for the status page, the admin API and metrics.
type Line struct {
	Name                   string
	Own                    bool // a key's own budget; Name is the key id
	Period                 Period
	Start                  int64 // Unix second the current period began
	Limit, Spent, Reserved int64 // pico-USD
	Refused                uint64
}

// Remaining is what is left of the cap, at least 0.
func (ln *Line) Remaining() int64 { return max(0, ln.Limit-ln.Spent-ln.Reserved) }

// Report returns the state of every budget in force (with Redis, as this
// node last saw the shared ledger).
func (l *Ledger) Report() []Line {
	now := l.now()
	t := l.table.Load()
	out := make([]Line, 0, len(t.named))
	for _, b := range t.named {
		b.mu.Lock()
		lv := b.cur
		if Period(b.period.Load()).Start(now) != lv.start {
			lv = level{start: Period(b.period.Load()).Start(now)}
		}
		b.mu.Unlock()
		out = append(out, Line{Name: b.name, Own: b.own, Period: Period(b.period.Load()), Start: lv.start,
			Limit: b.cap.Load(), Spent: lv.spent, Reserved: lv.reserved, Refused: b.refused.Load()})
	}
	return out
}
