package upstream

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/affinity"
	"github.com/modelgate/gateway/proxy/config"
)

// newTestRoute is a route over n deployments named d0.. with balance, whose
// calls in flight are the test's loads.
func newTestRoute(t testing.TB, n int, balance float64, loads []int64) *Route {
	t.Helper()
	deps := make([]*Deployment, n)
	for i := range deps {
		deps[i] = New(config.Upstream{Name: fmt.Sprintf("d%d", i), Family: "beta", BaseURL: "http://127.0.0.1:1/v1", APIKey: "k", MaxConns: 1},
			config.Timeouts{}, config.Health{Failures: 1, Cooldown: config.Duration(time.Hour)}, config.Limits{})
	}
	r, err := NewRoute(deps, balance)
	if err != nil {
		t.Fatal(err)
	}
	if loads != nil {
		r.load = func(i int) int64 { return loads[i] }
	}
	return r
}

// TestPeakEWMA: a sample above the average replaces it at once; one below
// pulls it down by 1-exp(-Δt/τ); read, the average decays by exp(-Δt/τ).
func TestPeakEWMA(t *testing.T) {
	var e peakEWMA
	e.tau.Store(int64(time.Second))
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > want*1e-9 {
			t.Fatalf("%s: %v, want %v", what, time.Duration(got), time.Duration(want))
		}
	}
	if e.value(0) != 0 || e.cost(0, 0) != 0 || e.cost(2, 0) != unsampledCost+2 {
		t.Fatalf("no sample: value %v, cost idle %v, busy %v", e.value(0), e.cost(0, 0), e.cost(2, 0))
	}
	s := int64(time.Second)
	e.observe(10*time.Millisecond, s)
	near("first sample", e.value(s), float64(10*time.Millisecond))
	e.observe(500*time.Millisecond, s+1)
	near("peak", e.value(s+1), float64(500*time.Millisecond))
	e.observe(5*time.Millisecond, 2*s+1)
	w := math.Exp(-1)
	near("decay towards a lower sample", e.value(2*s+1), 500e6*w+5e6*(1-w))
	v := e.value(2*s + 1)
	near("read one τ later", e.value(3*s+1), v*w)
	near("cost", e.cost(3, 3*s+1), v*w*4)
}

// TestCheaperAvoidsSlow: of two deployments with the same calls in flight,
// the one with the slower first bytes loses every pick it is drawn against,
// and wins again once its average has decayed below the other's.
func TestCheaperAvoidsSlow(t *testing.T) {
	r := newTestRoute(t, 2, 1.25, []int64{3, 3})
	now := monoNow()
	r.deps[0].ttfb.observe(5*time.Millisecond, now)
	r.deps[1].ttfb.observe(500*time.Millisecond, now)
	for i := range 1000 {
		if got := r.chooseCheaper(uint64(i), 0); got != 0 {
			t.Fatalf("pick %d went to the slow deployment", i)
		}
	}
	// At τ = 1ms, 50 ms later the slow one's 500 ms has decayed to nothing.
	r.deps[1].SetDecay(time.Millisecond)
	r.deps[1].ttfb.stamp.Store(now - int64(50*time.Millisecond))
	slow := 0
	for i := range 1000 {
		if r.chooseCheaper(uint64(i), 0) == 1 {
			slow++
		}
	}
	if slow < 900 {
		t.Fatalf("decayed, the once slow deployment won %d of 1000 picks", slow)
	}
}

// TestCheaperProbesUnsampled: a deployment without a sample is tried while
// idle, then left alone while its first call is under way.
func TestCheaperProbesUnsampled(t *testing.T) {
	loads := []int64{0, 0}
	r := newTestRoute(t, 2, 1.25, loads)
	r.deps[0].ttfb.observe(time.Millisecond, monoNow())
	for i := range 100 {
		if r.chooseCheaper(uint64(i), 0) != 1 {
			t.Fatal("an idle deployment without a sample is not tried")
		}
	}
	loads[1] = 1
	loads[0] = 50
	for i := range 100 {
		if r.chooseCheaper(uint64(i), 0) != 0 {
			t.Fatal("a deployment whose first call is under way got another")
		}
	}
}

// TestBoundedStaysAndReturns: a session stays on its first choice below the
// bound, goes to its next choice on the ring when the first is at the bound,
// and comes back when the load falls.
func TestBoundedStaysAndReturns(t *testing.T) {
	loads := make([]int64, 4)
	r := newTestRoute(t, 4, 1.25, loads)
	key := affinity.Hash([]byte("session-1"))
	home := r.ring.PickHash(key, 0)
	next := r.ring.PickHash(key, affinity.Set(0).With(home))
	pickOthers(r, 4096) // the session is one of many: light
	if got := r.chooseBounded(key, 0); got != home {
		t.Fatalf("idle: went to %d, want its first choice %d", got, home)
	}
	// 12 in flight, all at home: bound ceil(13 × 1.25 / 4) = 5.
	loads[home] = 12
	if got := r.chooseBounded(key, 0); got != next {
		t.Fatalf("home at 12 of 12: went to %d, want its next choice %d", got, next)
	}
	loads[home] = 4 // 4 of 4: bound ceil(5 × 1.25 / 4) = 2
	if got := r.chooseBounded(key, 0); got != next {
		t.Fatalf("home at 4 of 4: went to %d, want %d", got, next)
	}
	for i := range loads {
		loads[i] = 3 // 12 in flight, evenly: bound 5
	}
	if got := r.chooseBounded(key, 0); got != home {
		t.Fatalf("load fell: went to %d, want back home %d", got, home)
	}
	r.balance = 0
	loads[home] = 1000
	if got := r.chooseBounded(key, 0); got != home {
		t.Fatalf("bound off: went to %d, want home %d", got, home)
	}
}

// pickOthers counts n picks of n other sessions in r's shares.
func pickOthers(r *Route, n int) {
	for i := range n {
		r.shares.add(affinity.Hash(fmt.Appendf(nil, "other-%d", i)))
	}
}

// TestBoundedHeavyFirst: of a heavy and a light session homed on one
// deployment, between the heavy one's limit and the bound only the heavy one
// moves; it stays at its second home while its first choice has no room for
// its weight, and comes back when it has. At the bound the light one moves
// too: the bound holds whatever the weights.
func TestBoundedHeavyFirst(t *testing.T) {
	loads := make([]int64, 4)
	r := newTestRoute(t, 4, 1.25, loads)
	light, heavy := affinity.Hash([]byte("session-0")), uint64(0)
	home := r.ring.PickHash(light, 0)
	for i := 1; heavy == 0; i++ {
		if k := affinity.Hash(fmt.Appendf(nil, "session-%d", i)); r.ring.PickHash(k, 0) == home {
			heavy = k
		}
	}
	next := r.ring.PickHash(heavy, affinity.Set(0).With(home))
	pickOthers(r, 4096)
	for range 1024 { // a quarter of the recent picks: about 100 of the 400 calls in flight
		r.shares.add(heavy)
	}
	set := func(atHome int64) {
		for i := range loads {
			loads[i] = (400 - atHome) / 3
		}
		loads[home] = atHome
	}
	// 400 in flight: bound ceil(401 × 1.25 / 4) = 126, the heavy one's limit
	// 126 - 25 × [0.5, 1) (its weight is above the room of 25.75), so at
	// most 113.5.
	set(110)
	if got := r.chooseBounded(light, 0); got != home {
		t.Fatalf("light at %d of bound 126: went to %d, want home %d", loads[home], got, home)
	}
	set(115)
	if got := r.chooseBounded(light, 0); got != home {
		t.Fatalf("light at %d: went to %d, want home %d", loads[home], got, home)
	}
	if got := r.chooseBounded(heavy, 0); got != next {
		t.Fatalf("heavy at %d: went to %d, want its next choice %d", loads[home], got, next)
	}
	set(90) // below its limit, but without room for its weight: it stays
	if got := r.chooseBounded(heavy, 0); got != next {
		t.Fatalf("heavy moved, home at %d: went to %d, want its second home %d", loads[home], got, next)
	}
	set(60) // room for it
	if got := r.chooseBounded(heavy, 0); got != home {
		t.Fatalf("heavy moved, home at %d: went to %d, want back home %d", loads[home], got, home)
	}
	set(126)
	if got := r.chooseBounded(light, 0); got == home {
		t.Fatalf("light at the bound: stayed home")
	}
}

// TestSessionShares: a session's estimate is its share of the recent picks;
// counts halve every shareEpoch picks, so a session that stopped fades.
func TestSessionShares(t *testing.T) {
	var s sessionShares
	heavy := affinity.Hash([]byte("heavy"))
	var got float64
	for i := range 4 * shareEpoch {
		if i%4 == 0 {
			got = s.add(heavy)
		} else {
			s.add(affinity.Hash(fmt.Appendf(nil, "light-%d", i)))
		}
	}
	if got < 0.2 || got > 0.3 {
		t.Fatalf("a quarter of the picks: estimated %.3f", got)
	}
	if got := s.add(affinity.Hash([]byte("light-new"))); got > 0.01 {
		t.Fatalf("a session's first pick after 4096: estimated %.3f", got)
	}
	for i := range 4 * shareEpoch {
		s.add(affinity.Hash(fmt.Appendf(nil, "later-%d", i)))
	}
	if got := s.add(heavy); got > 0.02 {
		t.Fatalf("4 epochs after its last pick: estimated %.3f", got)
	}
	if got := new(sessionShares).add(heavy); got != 1 {
		t.Fatalf("the only pick: estimated %v, want 1", got)
	}
}

// TestSecondHomes: a session's second home is remembered until forgotten or
// taken by another session of the same entry.
func TestSecondHomes(t *testing.T) {
	var h secondHomes
	a, b := uint64(5)<<32|1, uint64(5)<<32|2 // one entry, distinct tags
	if h.get(a) != -1 {
		t.Fatal("empty: a second home")
	}
	h.set(a, 3)
	if h.get(a) != 3 || h.get(b) != -1 {
		t.Fatalf("set: %d and %d", h.get(a), h.get(b))
	}
	h.set(b, -1) // not b's: a's stays
	if h.get(a) != 3 {
		t.Fatal("forgetting another session forgot a's")
	}
	h.set(b, 0)
	if h.get(a) != -1 || h.get(b) != 0 {
		t.Fatalf("taken: %d and %d", h.get(a), h.get(b))
	}
	h.set(b, -1)
	if h.get(b) != -1 {
		t.Fatal("forgotten: still there")
	}
}

// TestBoundedHeavySessions: 10,000 sessions of which 10 send half the calls,
// each call holding its deployment for the next 400 calls (so 400 are in
// flight), on 2, 3 and 4 deployments at balance factors 1.25 and 2. Every
// pick leaves its deployment within the bound, so the busiest deployment's
// in-flight stays within the balance factor of the average (plus the one
// call the ceiling allows); heavy sessions move first, so at most 1 % of the
// sessions ever leave their first choice. A session that moved stays where
// it went: the heavy sessions' calls change deployment less than once in 10.
// The schedule is the test's own: one pick after another on the calls in
// flight it keeps.
func TestBoundedHeavySessions(t *testing.T) {
	f := func(deps int, balance float64) {
		t.Helper()
		h := simulateHeavySessions(t, deps, balance)
		t.Logf("%d deployments, balance %.2f: busiest at most %.3f × the average; %d sessions moved (%d of the 10 heavy ones); %d changes of deployment between a session's calls, %d of them light",
			deps, balance, h.worst, h.moved, h.heavyMoved, h.flaps, h.lightFlaps)
		if limit := balance + float64(deps)/400; h.worst > limit {
			t.Errorf("%d deployments, balance %.2f: the busiest reached %.3f × the average, above %.3f", deps, balance, h.worst, limit)
		}
		if h.moved > 100 {
			t.Errorf("%d deployments, balance %.2f: %d of 10000 sessions moved, want at most 100", deps, balance, h.moved)
		}
		if heavyFlaps := h.flaps - h.lightFlaps; heavyFlaps*10 > h.heavyCalls {
			t.Errorf("%d deployments, balance %.2f: the heavy sessions' calls changed deployment %d times in %d calls, want under 1 in 10",
				deps, balance, heavyFlaps, h.heavyCalls)
		}
	}
	for _, deps := range []int{2, 3, 4} {
		f(deps, 1.25)
		f(deps, 2)
	}
}

// heavyRun is what simulateHeavySessions saw: the busiest deployment's
// in-flight × the average at its worst, the sessions that ever left their
// first choice (and of those, the heavy ones), and the times a session's
// call went to another deployment than its call before (and of those, the
// light sessions'), and the calls of the heavy sessions.
type heavyRun struct {
	worst                                float64
	moved, heavyMoved, flaps, lightFlaps int
	heavyCalls                           int
}

func simulateHeavySessions(t *testing.T, deps int, balance float64) heavyRun {
	const (
		sessions = 10000
		heavy    = 10
		window   = 400
		calls    = 60000
	)
	loads := make([]int64, deps)
	r := newTestRoute(t, deps, balance, loads)
	keys := make([]uint64, sessions)
	for i := range keys {
		keys[i] = affinity.Hash(fmt.Appendf(nil, "session-%d", i))
	}
	moved := make([]bool, sessions)
	last := make([]int, sessions) // the deployment of each session's call before, -1 before its first
	for i := range last {
		last[i] = -1
	}
	ring := make([]int, window) // the deployment of each call in flight, -1 before the first
	for i := range ring {
		ring[i] = -1
	}
	var h heavyRun
	rng := rand.New(rand.NewPCG(1, 2))
	for c := range calls {
		if d := ring[c%window]; d >= 0 {
			loads[d]-- // the oldest call ends
		}
		s := heavy + rng.IntN(sessions-heavy)
		if rng.IntN(2) == 0 {
			s = rng.IntN(heavy)
			h.heavyCalls++
		}
		d := r.chooseBounded(keys[s], 0)
		if bound := r.bound(0); loads[d] >= bound {
			t.Fatalf("call %d: deployment %d at %d in flight, bound %d", c, d, loads[d], bound)
		}
		loads[d]++
		ring[c%window] = d
		if d != r.ring.PickHash(keys[s], 0) {
			moved[s] = true
		}
		if last[s] >= 0 && last[s] != d {
			h.flaps++
			if s >= heavy {
				h.lightFlaps++
			}
		}
		last[s] = d
		if c >= window {
			m := int64(0)
			for _, l := range loads {
				m = max(m, l)
			}
			h.worst = max(h.worst, float64(m)/(float64(window)/float64(deps)))
		}
	}
	for s, m := range moved {
		if m {
			h.moved++
			if s < heavy {
				h.heavyMoved++
			}
		}
	}
	return h
}

// TestHeadReadSamples: an answer's head is a sample, and so is a timeout;
// a failure's answer (5xx, 429) and other errors are not: a deployment that
// fails fast must not look fast.
func TestHeadReadSamples(t *testing.T) {
	f := func(status int, err error, want bool) {
		t.Helper()
		d := &Deployment{}
		now := monoNow()
		(*observer)(d).HeadRead(now-int64(time.Millisecond), now, status, err)
		if got := d.ttfb.value(monoNow()) != 0; got != want {
			t.Errorf("status %d, err %v: sampled %v, want %v", status, err, got, want)
		}
	}
	f(200, nil, true)
	f(404, nil, true)
	f(503, nil, false)
	f(429, nil, false)
	f(529, nil, false)
	f(0, fasthttp.ErrTimeout, true)
	f(0, io.ErrUnexpectedEOF, false)
}

// TestBoundedConcurrent: picks with sessions from several goroutines, the
// deployments' calls in flight changing under them, share the sketch and
// the second homes without a race (run with -race), and every pick is a
// deployment of the route.
func TestBoundedConcurrent(t *testing.T) {
	r := newTestRoute(t, 4, 1.25, nil)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range 5000 {
				key := affinity.Hash(fmt.Appendf(nil, "session-%d", (c*7+w)%(50+c%3)))
				i, d := r.Pick(key, true, 0)
				if i < 0 || i >= 4 || d != r.deps[i] {
					t.Errorf("pick %d: deployment %d", c, i)
					return
				}
				d.inflight.Add(1)
				if c%3 != 0 {
					d.inflight.Add(-1)
				}
			}
		}()
	}
	wg.Wait()
}
