package spend

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/config"
)

const usd int64 = config.PicoPerUSD

type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock { c := &clock{}; c.ns.Store(t.UnixNano()); return c }
func (c *clock) now() time.Time   { return time.Unix(0, c.ns.Load()) }
func (c *clock) set(t time.Time)  { c.ns.Store(t.UnixNano()) }

func TestCostPerFamilyShape(t *testing.T) {
	pr := PricesOf(&config.Pricing{Input: config.USD(3 * usd), Output: config.USD(15 * usd), CachedInput: config.USD(usd * 3 / 10),
		CacheWrite: config.USD(usd * 375 / 100), Image: config.USD(usd * 4 / 100)})
	if pr.Input != 3_000_000 || pr.Reasoning != pr.Output || pr.CachedInput != 300_000 || pr.CacheWrite != 3_750_000 {
		t.Fatalf("prices per token: %+v", pr)
	}
	u := Usage{Input: 1000, Output: 200, Cached: 400, CacheWrite: 100, Reasoning: 50, Images: 2}
	f := func(s Shape, want int64) {
		t.Helper()
		if got := pr.Cost(&u, s); got != want {
			t.Errorf("shape %+v: cost %d, want %d", s, got, want)
		}
	}
	images := 2 * (usd * 4 / 100)
	// alpha: input, cache reads and cache writes apart; output holds thinking
	f(Shape{}, 1000*3_000_000+400*300_000+100*3_750_000+200*15_000_000+50*15_000_000+images)
	// beta: input holds the cached, output the reasoning
	f(Shape{CachedInInput: true, ReasoningInOutput: true}, 600*3_000_000+400*300_000+100*3_750_000+150*15_000_000+50*15_000_000+images)
	// gamma: input holds the cached; thoughts apart
	f(Shape{CachedInInput: true}, 600*3_000_000+400*300_000+100*3_750_000+200*15_000_000+50*15_000_000+images)
	r := config.USD(20 * usd)
	pr = PricesOf(&config.Pricing{Output: config.USD(15 * usd), Reasoning: &r})
	u = Usage{Output: 100, Reasoning: 40}
	if got, want := pr.Cost(&u, Shape{ReasoningInOutput: true}), int64(60*15_000_000+40*20_000_000); got != want {
		t.Errorf("reasoning priced apart: %d, want %d", got, want)
	}
	var zero Prices
	if !zero.Zero() || zero.Cost(&u, Shape{}) != 0 {
		t.Error("a model without a price must cost 0")
	}
}

func TestPeriodStart(t *testing.T) {
	at := time.Date(2026, 11, 28, 23, 59, 59, 0, time.FixedZone("x", 3600)) // 22:59:59 UTC, a Saturday
	for _, c := range []struct {
		p    Period
		want time.Time
	}{
		{Day, time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)},
		{Week, time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC)},
		{Month, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)},
		{Total, time.Unix(0, 0)},
	} {
		if got := c.p.Start(at); got != c.want.Unix() {
			t.Errorf("%s start: %v, want %v", c.p, time.Unix(got, 0).UTC(), c.want)
		}
	}
	if end := Month.End(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix()); end != time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC).Unix() {
		t.Errorf("month end %v", time.Unix(end, 0).UTC())
	}
}

func newLedger(t *testing.T, clk *clock, keys []config.Key, named []config.Budget) (*Ledger, *bytes.Buffer) {
	t.Helper()
	var log bytes.Buffer
	l := New(Options{Now: clk.now, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	l.Update(keys, named, config.RateLimit{})
	return l, &log
}

func spentOf(l *Ledger, name string) Line {
	for _, ln := range l.Report() {
		if ln.Name == name {
			return ln
		}
	}
	return Line{}
}

// A reservation that does not fit is refused; settling replaces the
// reservation with the cost; a shared budget refuses for every key.
func TestReserveSettle(t *testing.T) {
	clk := newClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	keys := []config.Key{
		{ID: "a", Budget: &config.KeyBudget{USD: config.USD(10 * usd), Period: "month"}, Budgets: []string{"team"}},
		{ID: "b", Budgets: []string{"team"}},
		{ID: "free"},
	}
	l, _ := newLedger(t, clk, keys, []config.Budget{{Name: "team", USD: config.USD(15 * usd), Period: "day"}})
	var h Hold
	if v := l.Reserve("free", 100*usd, &h); v.Refused || h.Held() {
		t.Fatalf("a key without budgets: %+v held=%v", v, h.Held())
	}
	if v := l.Reserve("a", 8*usd, &h); v.Refused || !h.Held() {
		t.Fatalf("8 of 10: %+v", v)
	}
	var h2 Hold
	if v := l.Reserve("a", 3*usd, &h2); !v.Refused || !v.Own || v.Remaining != 2*usd || h2.Held() {
		t.Fatalf("3 more of the 2 left: %+v", v)
	}
	l.Settle(&h, 5*usd)
	if ln := spentOf(l, "a"); ln.Spent != 5*usd || ln.Reserved != 0 {
		t.Fatalf("after settle: %+v", ln)
	}
	if v := l.Reserve("b", 11*usd, &h2); !v.Refused || v.Own || v.Budget != "team" || v.Remaining != 10*usd {
		t.Fatalf("the team has 10 left: %+v", v)
	}
	if v := l.Reserve("b", 10*usd, &h2); v.Refused {
		t.Fatalf("exactly what is left: %+v", v)
	}
	if v := l.Reserve("a", 1, &h); !v.Refused || v.Budget != "team" {
		t.Fatalf("the team is reserved whole: %+v", v)
	}
	if ln := spentOf(l, "a"); ln.Reserved != 0 {
		t.Fatalf("a refusal by one budget reserves of none: %+v", ln)
	}
	l.Settle(&h2, 0) // the call failed before any upstream: all released
	if ln := spentOf(l, "team"); ln.Spent != 5*usd || ln.Reserved != 0 || ln.Refused != 2 {
		t.Fatalf("team: %+v", ln)
	}
}

// Periods roll over at UTC boundaries; a call reserved in one period
// settles in it; the 80 % line is logged once per period.
func TestPeriodRollOver(t *testing.T) {
	clk := newClock(time.Date(2026, 3, 31, 23, 59, 0, 0, time.UTC))
	keys := []config.Key{{ID: "a", Budget: &config.KeyBudget{USD: config.USD(10 * usd), Period: "day"}}}
	l, log := newLedger(t, clk, keys, nil)
	var h, late Hold
	if v := l.Reserve("a", 9*usd, &h); v.Refused {
		t.Fatal(v)
	}
	l.Settle(&h, 9*usd)
	if v := l.Reserve("a", 2*usd, &h); !v.Refused {
		t.Fatal("2 more of 1 left must be refused")
	}
	if v := l.Reserve("a", usd/2, &late); v.Refused {
		t.Fatal(v)
	}
	if n := strings.Count(log.String(), "passed 80%"); n != 1 {
		t.Fatalf("80%% lines: %d\n%s", n, log)
	}
	clk.set(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	if v := l.Reserve("a", 9*usd, &h); v.Refused {
		t.Fatalf("a new day starts from nothing: %+v", v)
	}
	l.Settle(&late, usd) // reserved yesterday: settles yesterday
	if ln := spentOf(l, "a"); ln.Spent != 0 || ln.Reserved != 9*usd || ln.Start != clk.now().Unix() {
		t.Fatalf("today: %+v", ln)
	}
	l.Settle(&h, 9*usd)
	if n := strings.Count(log.String(), "passed 80%"); n != 2 {
		t.Fatalf("one 80%% line per period, got %d\n%s", n, log)
	}
}

// A reload changes a budget's cap, keeping what was spent of it.
func TestBudgetReload(t *testing.T) {
	clk := newClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	keys := []config.Key{{ID: "a", Budgets: []string{"team"}}}
	l, _ := newLedger(t, clk, keys, []config.Budget{{Name: "team", USD: config.USD(10 * usd), Period: "month"}})
	var h Hold
	l.Reserve("a", 6*usd, &h)
	l.Settle(&h, 6*usd)
	l.Update(keys, []config.Budget{{Name: "team", USD: config.USD(5 * usd), Period: "month"}}, config.RateLimit{})
	if v := l.Reserve("a", 1, &h); !v.Refused || v.Limit != 5*usd {
		t.Fatalf("lowered under its spend: %+v", v)
	}
	l.Update(keys, []config.Budget{{Name: "team", USD: config.USD(20 * usd), Period: "month"}}, config.RateLimit{})
	if v := l.Reserve("a", 14*usd, &h); v.Refused {
		t.Fatalf("raised to 20 with 6 spent: %+v", v)
	}
	if v := l.Reserve("a", 1, &Hold{}); !v.Refused {
		t.Fatal("20 reached")
	}
	l.Update([]config.Key{{ID: "a"}}, nil, config.RateLimit{})
	if l.Applies("a") {
		t.Fatal("budget removed")
	}
	l.Settle(&h, 0) // a call in flight across the reload settles
}

// Concurrent calls never spend more than the cap when each costs at most
// what it reserved.
func TestReserveConcurrent(t *testing.T) {
	clk := newClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	keys := []config.Key{{ID: "a", Budgets: []string{"team"}}, {ID: "b", Budgets: []string{"team"}}}
	l, _ := newLedger(t, clk, keys, []config.Budget{{Name: "team", USD: config.USD(1 * usd), Period: "total"}})
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []string{"a", "b"}[i%2]
			for range 200 {
				var h Hold
				if v := l.Reserve(key, usd/100, &h); v.Refused {
					continue
				}
				l.Settle(&h, usd/100-int64(i)) // at most what was reserved
			}
		}()
	}
	wg.Wait()
	ln := spentOf(l, "team")
	if ln.Spent > usd || ln.Reserved != 0 || ln.Spent < usd-usd/100 {
		t.Fatalf("spent %d of %d, reserved %d", ln.Spent, int64(usd), ln.Reserved)
	}
}
