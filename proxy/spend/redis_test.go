package spend

import (
	"context"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/store/redistest"
)

// The shared ledger on the real Redis Cluster (6 nodes on loopback, first
// port 7161, a cluster of its own: store's pause test stops masters on 7151).
var cluster = redistest.Cluster{Port: 7161}

func TestMain(m *testing.M) {
	code := m.Run()
	cluster.Stop()
	os.Exit(code)
}

// sharedLedgers returns n ledgers on one fresh key prefix, as n nodes.
func sharedLedgers(t *testing.T, n int, clk *clock, keys []config.Key, named []config.Budget) []*Ledger {
	t.Helper()
	client := redistest.Client(t, cluster.Addrs(t))
	prefix := "spendtest-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	ls := make([]*Ledger, n)
	for i := range ls {
		ls[i] = New(Options{Redis: func() rueidis.Client { return client }, KeyPrefix: prefix, Now: clk.now})
		ls[i].Update(keys, named, config.RateLimit{Timeout: config.Duration(10 * time.Second)})
	}
	return ls
}

// Three nodes, 30 concurrent callers of one team budget: the settled spend
// never passes the cap when no call costs more than it reserved, and every
// reservation is released.
func TestSharedLedgerExact(t *testing.T) {
	clk := newClock(time.Now()) // Redis expires a period's hash by the wall clock
	keys := []config.Key{{ID: "a", Budgets: []string{"team"}, Budget: &config.KeyBudget{USD: config.USD(900_000 * usd), Period: "month"}},
		{ID: "b", Budgets: []string{"team"}}}
	// A cap past 2^53 pico-USD ($9007): the script's arithmetic must stay exact.
	const limit = 12_345*usd + 678_901_234_567
	ls := sharedLedgers(t, 3, clk, keys, []config.Budget{{Name: "team", USD: config.USD(limit), Period: "day"}})
	const cost = 99*usd + 123_456_789_011 // reserved 100 dollars and a bit each
	var wg sync.WaitGroup
	var mu sync.Mutex
	settled := int64(0)
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, key := ls[i%3], []string{"a", "b"}[i%2]
			for range 10 {
				var h Hold
				if v := l.Reserve(key, 100*usd+1, &h); v.Refused || v.Unavailable {
					continue
				}
				l.Settle(&h, cost)
				mu.Lock()
				settled += cost
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	trips := uint64(0)
	for _, l := range ls {
		trips += l.RoundTrips()
		l.Flush()
	}
	t.Logf("%d reservations took %d round trips, their settlements carried", 300, trips)
	if trips > 300+300/10 { // a settlement alone when no reservation came within 20 ms
		t.Errorf("%d round trips for 300 reservations and their settlements: settlements are not carried", trips)
	}
	var h Hold
	v := ls[0].Reserve("b", 1, &h)
	ls[0].Settle(&h, 0)
	ls[0].Flush() // reads the shared levels
	ln := spentOf(ls[0], "team")
	t.Logf("budget %s, settled %s (%d calls), reserved %s, last reservation %+v", config.USD(limit), config.USD(ln.Spent),
		settled/cost, config.USD(ln.Reserved), v)
	if ln.Spent != settled || ln.Reserved != 0 {
		t.Fatalf("the shared ledger holds %d spent, %d reserved; the callers settled %d", ln.Spent, ln.Reserved, settled)
	}
	if ln.Spent > limit || limit-ln.Spent > 100*usd+1 {
		t.Fatalf("spent %d of %d: over the cap, or refused while a call fit", ln.Spent, limit)
	}
	if own := spentOf(ls[0], "a"); own.Spent%cost != 0 || own.Spent == 0 {
		t.Fatalf("key a's own budget: %+v", own)
	}
}

// A period rolls over on the shared ledger as in memory: a new day's key.
func TestSharedLedgerRollOver(t *testing.T) {
	// A minute before the next UTC midnight: Redis expires a period's hash
	// by the wall clock, so the test's days are near it.
	midnight := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	clk := newClock(midnight.Add(-time.Minute))
	keys := []config.Key{{ID: "a", Budget: &config.KeyBudget{USD: config.USD(10 * usd), Period: "day"}}}
	ls := sharedLedgers(t, 2, clk, keys, nil)
	var h, late Hold
	if v := ls[0].Reserve("a", 9*usd, &h); v.Refused {
		t.Fatal(v)
	}
	ls[0].Settle(&h, 9*usd)
	ls[0].Flush()
	if v := ls[1].Reserve("a", 2*usd, &h); !v.Refused || v.Remaining != usd {
		t.Fatalf("the other node sees the spend: %+v", v)
	}
	ls[1].Reserve("a", usd, &late)
	clk.set(midnight)
	if v := ls[1].Reserve("a", 9*usd, &h); v.Refused {
		t.Fatalf("a new day: %+v", v)
	}
	ls[1].Settle(&late, 2*usd) // reserved yesterday, settles yesterday
	ls[1].Settle(&h, 3*usd)
	ls[1].Flush()
	ls[0].Reserve("a", 0, &h)
	ls[0].Settle(&h, 0)
	ls[0].Flush()
	if ln := spentOf(ls[0], "a"); ln.Spent != 3*usd || ln.Reserved != 0 {
		t.Fatalf("today: %+v", ln)
	}
	client := redistest.Client(t, cluster.Addrs(t))
	yesterday := ls[0].remote.key(ls[0].table.Load().keys["a"][0], midnight.Add(-24*time.Hour).Unix())
	got, err := client.Do(context.Background(), client.B().Hmget().Key(yesterday).Field("sh", "rh").Build()).AsStrSlice()
	if err != nil || got[0] != "11" || got[1] != "0" {
		t.Fatalf("yesterday's hash %s: %v %v", yesterday, got, err)
	}
	ttl, err := client.Do(context.Background(), client.B().Pexpiretime().Key(yesterday).Build()).AsInt64()
	if want := midnight.Add(7 * 24 * time.Hour).UnixMilli(); err != nil || ttl != want {
		t.Fatalf("yesterday's hash expires at %d, want %d (%v)", ttl, want, err)
	}
}

// Redis unreachable: the reservation fails open or closed as rate_limit.fail_open says.
func TestSharedLedgerFailMode(t *testing.T) {
	clk := newClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	keys := []config.Key{{ID: "a", Budget: &config.KeyBudget{USD: config.USD(10 * usd)}}}
	l := New(Options{Redis: func() rueidis.Client { return nil }, Now: clk.now})
	l.Update(keys, nil, config.RateLimit{})
	var h Hold
	if v := l.Reserve("a", usd, &h); v.Refused || v.Unavailable || !h.Held() || h.Reserved() != 0 {
		t.Fatalf("fail open: %+v", v)
	}
	l.Settle(&h, usd)
	closed := false
	l.Update(keys, nil, config.RateLimit{FailOpen: &closed})
	if v := l.Reserve("a", usd, &h); !v.Unavailable || h.Held() {
		t.Fatalf("fail closed: %+v", v)
	}
	l.Flush()
	if open, shut, lost := l.failures[0].Load(), l.failures[1].Load(), l.lost.Load(); open != 1 || shut != 1 || lost < 1 {
		t.Fatalf("failures open %d closed %d lost %d", open, shut, lost)
	}
}
