package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelgate/gateway/proxy/config"
)

// window is a minute in milliseconds: the cost of one unit (a request or a
// token) in a bucket's debt, which drains by the limit per millisecond. A
// bucket of limit n holds at most window*n of debt: n units at once.
const window = 60_000

// MaxCallTokens bounds the tokens one call is charged: a larger usage is
// charged as this many. It is the largest tokens_per_minute the config
// accepts, and hundreds of times the largest context window of any model
// (a few million tokens), so no real answer reaches it; an upstream that
// reports more (a bug, or a counter of its own) spends a minute of the
// largest limit, and exhausts any smaller one, rather than breaking the
// arithmetic.
const MaxCallTokens = 1_000_000_000

// maxDebt bounds a bucket's debt (unit-ms), in memory and in Redis: 2^52,
// so that the sums the script makes stay integers below 2^53, exact in the
// doubles of Redis' Lua, and print without an exponent. It takes 75 minutes
// to repay at the largest limit (1e9 per minute), 52 days at a million per
// minute: a debt saturates there, it is not forgiven.
const maxDebt = 1 << 52

// maxOwed bounds the tokens a node owes Redis (charged beyond its
// reservations and not yet settled): their debt is maxDebt.
const maxOwed = maxDebt / window

// Kind names what a call was refused for.
type Kind uint8

const (
	KindNone        Kind = iota // admitted
	KindRequests                // requests per minute
	KindTokens                  // tokens per minute
	KindConcurrent              // concurrent calls
	KindUnavailable             // the shared counters could not be reached (fail closed)
	numKinds
)

var kindNames = [numKinds]string{"none", "requests", "tokens", "concurrent", "unavailable"}

func (k Kind) String() string { return kindNames[k] }

// bucket is the state of one key's limits, over every model or for one
// model. It outlives reloads that keep its key (and model), so use held
// survives them. Safe for concurrent use.
type bucket struct {
	key, model string
	redisKey   string // the Redis key of its shared state

	mu  sync.Mutex
	lim config.RateLimits
	// The debts of requests and tokens, in unit-milliseconds, at time at (ms):
	// the bucket's own in memory, the last known shared one with Redis.
	reqDebt, tokDebt, at int64
	// With Redis: the allowance reserved from the shared bucket and not yet
	// spent. tokLeft < 0 is tokens charged beyond the reservation, owed.
	reqLeft, tokLeft int64
	leaseEnd         int64 // ms: the allowance goes back at the next sync after this
	// With Redis: the shared bucket refused a call for blockedKind until
	// blockedUntil (ms); calls before then are refused without asking it.
	blockedUntil int64
	blockedKind  Kind
	// With Redis: after a failed round trip of this bucket, Redis is not
	// asked for it again before downUntil (ms); its decisions follow the
	// fail mode meanwhile. Other buckets are not concerned.
	downUntil int64
	// With Redis: the round trip in flight for this bucket, nil when none.
	// A decision that needs Redis meanwhile waits for it without b.mu.
	flight *trip
	// gen counts the changes of the requests and tokens limits, so that an
	// allowance reserved under older ones is not kept for a lease.
	gen uint64

	inflight atomic.Int64
	rejected [numKinds]atomic.Uint64
	// Limits as atomics, for metrics read without the mutex.
	rpm, tpm, conc atomic.Int64
}

// setLimits puts l in force. When the requests or tokens limit changes, the
// allowance reserved from Redis under the old one goes back at the bucket's
// next decision, which Redis then takes under the new one: a lowered limit
// holds at once; a refusal under the old limits no longer stands.
func (b *bucket) setLimits(l config.RateLimits) {
	b.mu.Lock()
	if l.RequestsPerMinute != b.lim.RequestsPerMinute || l.TokensPerMinute != b.lim.TokensPerMinute {
		b.gen++
		b.leaseEnd, b.blockedUntil = 0, 0
	}
	b.lim = l
	b.mu.Unlock()
	b.rpm.Store(l.RequestsPerMinute)
	b.tpm.Store(l.TokensPerMinute)
	b.conc.Store(l.Concurrent)
}

// drain returns debt less what rate repays in elapsed ms, at least 0. It never
// overflows: a long idle time repays everything.
func drain(debt, rate, elapsed int64) int64 {
	if debt <= 0 || rate <= 0 {
		return max(debt, 0)
	}
	if elapsed <= 0 {
		return debt
	}
	if elapsed >= (debt+rate-1)/rate {
		return 0
	}
	return debt - elapsed*rate
}

// refill brings the debts to now (ms); b.mu is held.
func (b *bucket) refill(now int64) {
	if now > b.at {
		b.reqDebt = drain(b.reqDebt, b.lim.RequestsPerMinute, now-b.at)
		b.tokDebt = drain(b.tokDebt, b.lim.TokensPerMinute, now-b.at)
		b.at = now
	}
}

// check says whether the bucket admits one more call now, and if not, why
// and in how many ms it would; b.mu is held and the debts are current.
func (b *bucket) check() (Kind, int64) {
	if r := b.lim.RequestsPerMinute; r > 0 && b.reqDebt+window > window*r {
		return KindRequests, (b.reqDebt + window - window*r + r - 1) / r
	}
	if t := b.lim.TokensPerMinute; t > 0 && b.tokDebt >= window*t {
		return KindTokens, (b.tokDebt-window*t)/t + 1
	}
	return KindNone, 0
}

// Verdict is a decision, with what a refused call's answer tells the client.
type Verdict struct {
	Kind       Kind // KindNone: admitted
	RetryAfter time.Duration
	// The limits of the bucket that refused (for KindUnavailable, the key's)
	// and, for the kinds it limits, what is left and when it is whole again.
	Limits       config.RateLimits
	Model        string // "" when the key's limits over every model refused
	ReqRemaining int64
	TokRemaining int64
	ReqReset     time.Duration
	TokReset     time.Duration
	retryAfterMs int64
}

// Admitted reports whether the call may go on.
func (v Verdict) Admitted() bool { return v.Kind == KindNone }

// describe fills what the answer of a refusal shows from b's debts at now;
// b.mu is held.
func (v *Verdict) describe(b *bucket, now int64) {
	b.refill(now)
	v.Limits, v.Model = b.lim, b.model
	if r := b.lim.RequestsPerMinute; r > 0 {
		v.ReqRemaining = max(0, (window*r-b.reqDebt)/window) + max(b.reqLeft, 0)
		v.ReqReset = msDuration((b.reqDebt + r - 1) / r)
	}
	if t := b.lim.TokensPerMinute; t > 0 {
		v.TokRemaining = max(0, (window*t-b.tokDebt)/window)
		v.TokReset = msDuration((b.tokDebt + t - 1) / t)
	}
	v.RetryAfter = msDuration(v.retryAfterMs)
}

// maxWait bounds the durations a Verdict shows: 100 years, far below what a
// time.Duration holds (292 years), so that callers may add to them.
const maxWait = 100 * 365 * 24 * time.Hour

// msDuration returns ms milliseconds, at most maxWait.
func msDuration(ms int64) time.Duration {
	if ms >= int64(maxWait/time.Millisecond) {
		return maxWait
	}
	return time.Duration(ms) * time.Millisecond
}
