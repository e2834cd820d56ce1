package ratelimit

import (
	"bytes"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/config"
)

// clock is a manual clock: tests move it, so no decision depends on how fast
// the machine runs.
type clock struct{ ms atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ms.Store(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli())
	return c
}

func (c *clock) now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *clock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }
func keyWith(id string, l config.KeyLimits) config.Key {
	return config.Key{ID: id, Key: id, Limits: &l}
}

func newLimiter(t testing.TB, keys ...config.Key) (*Limiter, *clock) {
	c := newClock()
	l := New(Options{Now: c.now})
	l.Update(keys, config.RateLimit{})
	return l, c
}

func TestRequestsPerMinuteExact(t *testing.T) {
	l, clk := newLimiter(t, keyWith("a", config.KeyLimits{RequestsPerMinute: 60}), keyWith("b", config.KeyLimits{RequestsPerMinute: 60}))
	var tk Ticket
	for i := range 60 {
		if v := l.Admit("a", "", &tk); !v.Admitted() {
			t.Fatalf("call %d refused: %+v", i+1, v)
		}
		l.Done(&tk, 0)
	}
	v := l.Admit("a", "", &tk)
	if v.Kind != KindRequests || v.RetryAfter != time.Second || v.ReqRemaining != 0 || v.ReqReset != time.Minute || tk.Held() {
		t.Fatalf("61st call: %+v, held %v", v, tk.Held())
	}
	if v := l.Admit("b", "", &tk); !v.Admitted() {
		t.Fatalf("another key refused: %+v", v)
	}
	l.Done(&tk, 0)
	if v := l.Admit("unlimited", "", &tk); !v.Admitted() || tk.Held() {
		t.Fatalf("a key without limits: %+v", v)
	}
	clk.advance(999 * time.Millisecond)
	if v := l.Admit("a", "", &tk); v.Admitted() || v.RetryAfter != time.Millisecond {
		t.Fatalf("after 999ms: %+v", v)
	}
	clk.advance(time.Millisecond)
	if v := l.Admit("a", "", &tk); !v.Admitted() {
		t.Fatalf("after 1s one more call is due: %+v", v)
	}
	l.Done(&tk, 0)
	if v := l.Admit("a", "", &tk); v.Admitted() {
		t.Fatal("only one call per second after the burst")
	}
}

func TestTokensPerMinuteChargedAfterTheAnswer(t *testing.T) {
	l, clk := newLimiter(t, keyWith("a", config.KeyLimits{TokensPerMinute: 100}))
	var tk Ticket
	for _, tokens := range []int64{60, 60} {
		if v := l.Admit("a", "", &tk); !v.Admitted() {
			t.Fatalf("refused with budget left: %+v", v)
		}
		if !tk.CountsTokens() {
			t.Fatal("a tokens limit must ask for the usage")
		}
		l.Done(&tk, tokens)
	}
	// 120 of 100 spent: refused until 20 tokens are repaid, 12 s at 100/min.
	v := l.Admit("a", "", &tk)
	if v.Kind != KindTokens || v.RetryAfter != 12*time.Second+time.Millisecond || v.TokRemaining != 0 || v.TokReset != 72*time.Second {
		t.Fatalf("over the token budget: %+v", v)
	}
	clk.advance(12*time.Second + time.Millisecond)
	if v := l.Admit("a", "", &tk); !v.Admitted() {
		t.Fatalf("budget repaid: %+v", v)
	}
	l.Done(&tk, 0)
}

func TestConcurrentSlotsAreReleased(t *testing.T) {
	l, _ := newLimiter(t, keyWith("a", config.KeyLimits{Concurrent: 2, RequestsPerMinute: 1000}))
	var t1, t2, t3 Ticket
	for _, tk := range []*Ticket{&t1, &t2} {
		if v := l.Admit("a", "", tk); !v.Admitted() {
			t.Fatalf("refused under the limit: %+v", v)
		}
	}
	if v := l.Admit("a", "", &t3); v.Kind != KindConcurrent || v.RetryAfter != time.Second || t3.Held() {
		t.Fatalf("third at once: %+v", v)
	}
	l.Done(&t1, 0)
	if v := l.Admit("a", "", &t3); !v.Admitted() {
		t.Fatalf("a slot was freed: %+v", v)
	}
	l.Done(&t2, 0)
	l.Done(&t3, 0)
	if n := l.table.Load().keys["a"].all.inflight.Load(); n != 0 {
		t.Fatalf("%d slots leaked", n)
	}
	// A call refused by its requests limit gives its slot back.
	l2, _ := newLimiter(t, keyWith("a", config.KeyLimits{Concurrent: 5, RequestsPerMinute: 1}))
	l2.Admit("a", "", &t1)
	if v := l2.Admit("a", "", &t2); v.Kind != KindRequests {
		t.Fatalf("second call: %+v", v)
	}
	if n := l2.table.Load().keys["a"].all.inflight.Load(); n != 1 {
		t.Fatalf("in flight %d, want 1", n)
	}
}

func TestPerModelLimits(t *testing.T) {
	l, _ := newLimiter(t, keyWith("a", config.KeyLimits{RequestsPerMinute: 5,
		Models: map[string]config.RateLimits{"m": {RequestsPerMinute: 2}}}))
	var tk Ticket
	for range 2 {
		if v := l.Admit("a", "m", &tk); !v.Admitted() {
			t.Fatalf("model m under its limit: %+v", v)
		}
		l.Done(&tk, 0)
	}
	if v := l.Admit("a", "m", &tk); v.Kind != KindRequests || v.Model != "m" || v.Limits.RequestsPerMinute != 2 {
		t.Fatalf("model m over its limit: %+v", v)
	}
	for range 3 {
		if v := l.Admit("a", "n", &tk); !v.Admitted() {
			t.Fatalf("model n within the key's limit: %+v", v)
		}
		l.Done(&tk, 0)
	}
	// The key's 5 are spent by m's 2 and n's 3.
	if v := l.Admit("a", "n", &tk); v.Kind != KindRequests || v.Model != "" || v.Limits.RequestsPerMinute != 5 {
		t.Fatalf("the key over its limit: %+v", v)
	}
}

func TestReloadKeepsUse(t *testing.T) {
	k := keyWith("a", config.KeyLimits{RequestsPerMinute: 3, Concurrent: 3})
	l, _ := newLimiter(t, k)
	var held [3]Ticket
	for i := range held {
		if v := l.Admit("a", "", &held[i]); !v.Admitted() {
			t.Fatal(v)
		}
	}
	l.Update([]config.Key{k}, config.RateLimit{})
	var tk Ticket
	if v := l.Admit("a", "", &tk); v.Admitted() {
		t.Fatal("a reload that keeps the key forgot its use")
	}
	l.Update([]config.Key{keyWith("a", config.KeyLimits{RequestsPerMinute: 5, Concurrent: 4})}, config.RateLimit{})
	if v := l.Admit("a", "", &tk); !v.Admitted() {
		t.Fatalf("raised limits: %+v", v)
	}
	var fifth Ticket
	if v := l.Admit("a", "", &fifth); v.Kind != KindConcurrent {
		t.Fatalf("3 held across the reload + 1 of 4 in flight: %+v", v)
	}
	l.Done(&tk, 0)
	for i := range held {
		l.Done(&held[i], 0)
	}
	if n := l.table.Load().keys["a"].all.inflight.Load(); n != 0 {
		t.Fatalf("%d slots leaked across the reload", n)
	}
	l.Update(nil, config.RateLimit{})
	if v := l.Admit("a", "", &tk); !v.Admitted() || tk.Held() {
		t.Fatalf("limits removed: %+v", v)
	}
}

func TestExactUnderContention(t *testing.T) {
	l, _ := newLimiter(t, keyWith("a", config.KeyLimits{RequestsPerMinute: 1000}))
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			var tk Ticket
			for range 500 {
				if l.Admit("a", "", &tk).Admitted() {
					admitted.Add(1)
					l.Done(&tk, 0)
				}
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != 1000 {
		t.Fatalf("admitted %d of 4000 at once, want exactly 1000", n)
	}
}

func TestWritePrometheus(t *testing.T) {
	l, _ := newLimiter(t, keyWith("a", config.KeyLimits{RequestsPerMinute: 2, TokensPerMinute: 100, Concurrent: 4,
		Models: map[string]config.RateLimits{"m": {RequestsPerMinute: 1}}}))
	var tk, held Ticket
	l.Admit("a", "m", &tk)
	l.Done(&tk, 30)
	l.Admit("a", "", &held)
	l.Admit("a", "m", &tk)
	var b bytes.Buffer
	l.WritePrometheus(&b)
	for _, want := range []string{
		`gateway_ratelimit_limit{key="a",model="",kind="requests"} 2`,
		`gateway_ratelimit_limit{key="a",model="",kind="tokens"} 100`,
		`gateway_ratelimit_limit{key="a",model="",kind="concurrent"} 4`,
		`gateway_ratelimit_limit{key="a",model="m",kind="requests"} 1`,
		`gateway_ratelimit_used{key="a",model="",kind="requests"} 2`,
		`gateway_ratelimit_used{key="a",model="",kind="tokens"} 30`,
		`gateway_ratelimit_used{key="a",model="",kind="concurrent"} 1`,
		`gateway_ratelimit_rejections_total{key="a",model="",kind="requests"} 1`,
		`gateway_ratelimit_backend_failures_total{outcome="open"} 0`,
		"# TYPE gateway_ratelimit_used gauge",
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("missing %s in\n%s", want, b.String())
		}
	}
}

// TestExtremeUsage: a usage no model reports (an upstream's bug, or the
// 18-digit counts parse accepts) is charged as MaxCallTokens; the key is
// exhausted, not forgiven by an overflow, and the other key is untouched.
func TestExtremeUsage(t *testing.T) {
	f := func(tokens int64) {
		t.Helper()
		l, clk := newLimiter(t, keyWith("a", config.KeyLimits{TokensPerMinute: 1000}), keyWith("b", config.KeyLimits{TokensPerMinute: 1000}))
		var tk Ticket
		if v := l.Admit("a", "", &tk); !v.Admitted() {
			t.Fatal(v)
		}
		l.Done(&tk, tokens)
		v := l.Admit("a", "", &tk)
		// MaxCallTokens at 1,000 per minute: 10^6 minutes to repay.
		const repay = MaxCallTokens / 1000 * time.Minute
		if v.Kind != KindTokens || v.RetryAfter != repay-time.Minute+time.Millisecond || v.TokReset != repay || v.TokRemaining != 0 {
			t.Fatalf("after a usage of %d: %+v, want refused for %v", tokens, v, repay-time.Minute)
		}
		if v := l.Admit("b", "", &tk); !v.Admitted() {
			t.Fatalf("another key: %+v", v)
		}
		l.Done(&tk, 10)
		clk.advance(repay - time.Minute - time.Millisecond)
		if v := l.Admit("a", "", &tk); v.Admitted() {
			t.Fatalf("admitted before the debt of %d tokens is repaid", MaxCallTokens)
		}
		clk.advance(2 * time.Millisecond)
		if v := l.Admit("a", "", &tk); !v.Admitted() {
			t.Fatalf("the debt is repaid: %+v", v)
		}
	}
	f(MaxCallTokens + 1)
	f(999_999_999_999_999_999)
	f(math.MaxInt64)
}

// TestDebtSaturates: the debts of calls in flight that all report the most
// tokens saturate at maxDebt rather than overflow, and the durations a
// refusal shows stay within maxWait.
func TestDebtSaturates(t *testing.T) {
	const inFlight = 160_000 // × MaxCallTokens × window > MaxInt64
	l, clk := newLimiter(t, keyWith("a", config.KeyLimits{TokensPerMinute: 1e9}), keyWith("slow", config.KeyLimits{TokensPerMinute: 1}))
	held := make([]Ticket, inFlight)
	for i := range held {
		if v := l.Admit("a", "", &held[i]); !v.Admitted() {
			t.Fatalf("call %d: %+v", i, v)
		}
	}
	for i := range held {
		l.Done(&held[i], math.MaxInt64)
	}
	var tk Ticket
	v := l.Admit("a", "", &tk)
	if v.Kind != KindTokens || v.TokReset != time.Duration((maxDebt+999_999_999)/1_000_000_000)*time.Millisecond {
		t.Fatalf("after %d calls of the most tokens: %+v, want a debt of %d", inFlight, v, maxDebt)
	}
	clk.advance(v.RetryAfter)
	if v := l.Admit("a", "", &tk); !v.Admitted() {
		t.Fatalf("after the retry-after of a saturated debt: %+v", v)
	}
	l.Admit("slow", "", &tk)
	l.Done(&tk, math.MaxInt64)
	if v := l.Admit("slow", "", &tk); v.Kind != KindTokens || v.RetryAfter != maxWait || v.TokReset != maxWait {
		t.Fatalf("a debt of centuries at 1 token per minute: %+v, want %v", v, maxWait)
	}
}
