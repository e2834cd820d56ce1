package upstream

import (
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/config"
)

// slowdownRun is one run of TestSlowDeploymentLosesCalls: the share of the
// calls after the slowdown that went to the slowed deployment, and the p99
// time to first byte of those calls.
type slowdownRun struct {
	share       float64
	p99, fast99 time.Duration // of all the calls after, of those to d1
}

// runSlowdown makes calls without a session from workers over a route of two
// simulated deployments, both answering after 5 ms, until before calls are
// done; then d2's first byte comes after 500 ms, and after more calls are
// made. pick chooses each call's deployment.
func runSlowdown(t *testing.T, pick func(r *Route, rnd uint64) int, workers, before, after int) slowdownRun {
	t.Helper()
	var deps []*Deployment
	var sims []*sim.Server
	for _, name := range []string{"d1", "d2"} {
		s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: name, BetaKey: "up-beta", NoRecord: true, ChatBytes: 40})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		s.SetFault(sim.Fault{FirstByteDelay: 5 * time.Millisecond})
		sims = append(sims, s)
		deps = append(deps, New(config.Upstream{Name: name, Family: "beta", BaseURL: "http://" + s.Addr() + "/v1", APIKey: "up-beta", MaxConns: 64},
			config.Timeouts{Connect: config.Duration(5 * time.Second), FirstByte: config.Duration(30 * time.Second), Idle: config.Duration(30 * time.Second),
				Write: config.Duration(30 * time.Second), IdleConn: config.Duration(4 * time.Second)},
			config.Health{Failures: 1000, Cooldown: config.Duration(time.Second)}, config.Limits{MaxResponseBytes: 1 << 20}))
	}
	r, err := NewRoute(deps, 1.25)
	if err != nil {
		t.Fatal(err)
	}
	var (
		next        atomic.Int64 // calls begun
		slowed      atomic.Bool
		mu          sync.Mutex
		ttfb, fast  []time.Duration // of the calls begun after the slowdown, of those to d1
		toSlow, all int
		once        sync.Once
		wg          sync.WaitGroup
	)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var relay Relay
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for {
				n := next.Add(1)
				if n > int64(before+after) {
					return
				}
				if n > int64(before) {
					once.Do(func() { sims[1].SetFault(sim.Fault{FirstByteDelay: 500 * time.Millisecond}); slowed.Store(true) })
				}
				after := slowed.Load()
				i := pick(r, rng.Uint64())
				d := r.deps[i]
				req := AcquireRequest()
				req.Head = d.AppendRequestLine(req.Head, []byte("POST"), "/chat/completions", nil)
				req.Head = d.AppendCredentials(req.Head, false)
				req.Head = AppendHeader(req.Head, []byte("Content-Type"), []byte("application/json"))
				req.Head = EndHead(req.Head, []byte("POST"), len(body))
				req.Body = body
				start := time.Now()
				err := relay.Send(d, req, false, time.Now().Unix())
				took := time.Since(start)
				ReleaseRequest(req)
				if err != nil {
					t.Errorf("call to %s: %v", d.Name(), err)
					return
				}
				relay.Discard()
				if after {
					mu.Lock()
					ttfb = append(ttfb, took)
					all++
					if i == 1 {
						toSlow++
					} else {
						fast = append(fast, took)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	slices.Sort(ttfb)
	slices.Sort(fast)
	if len(ttfb) == 0 || len(fast) == 0 {
		t.Fatal("no call after the slowdown")
	}
	return slowdownRun{share: float64(toSlow) / float64(all), p99: ttfb[len(ttfb)*99/100], fast99: fast[len(fast)*99/100]}
}

// TestSlowDeploymentLosesCalls: two deployments of a model answer after
// 5 ms; then one slows to 500 ms. By peak-EWMA cost it gets under 1 % of the
// calls without a session made after (in practice the few sent before its
// first slow answer arrived), so the p99 time to first byte is the fast
// deployment's; the share and the p99 are logged next to the least-in-flight
// choice's, which sees only the calls the slow deployment holds and, in this
// run, sends it more than 1 %.
func TestSlowDeploymentLosesCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("about 2,400 calls through two simulators")
	}
	const workers, before, after = 4, 400, 1500
	ewma := runSlowdown(t, func(r *Route, rnd uint64) int { return r.chooseCheaper(rnd, 0) }, workers, before, after)
	least := runSlowdown(t, func(r *Route, rnd uint64) int { return r.ring.PickLeast(rnd, 0, r.load) }, workers, before, after)
	t.Logf("after d2 slowed to 500 ms, of %d calls from %d workers: peak-EWMA sent %.1f %% to d2, p99 first byte %v (d1's own %v); least-in-flight %.1f %%, p99 %v (d1's own %v)",
		after, workers, 100*ewma.share, ewma.p99.Round(100*time.Microsecond), ewma.fast99.Round(100*time.Microsecond),
		100*least.share, least.p99.Round(100*time.Microsecond), least.fast99.Round(100*time.Microsecond))
	// Under 1 %, the slow answers stay out of the p99: a count, not a time.
	if ewma.share >= 0.01 {
		t.Fatalf("peak-EWMA sent %.1f %% of the calls to the slowed deployment, want under 1 %%", 100*ewma.share)
	}
}
