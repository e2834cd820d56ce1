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

	inflight atomic.Int64
	rejected [numKinds]atomic.Uint64
	// Limits as atomics, for metrics read without the mutex.
	rpm, tpm, conc atomic.Int64
}

func (b *bucket) setLimits(l config.RateLimits) {
	b.mu.Lock()
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
		v.ReqReset = time.Duration((b.reqDebt+r-1)/r) * time.Millisecond
	}
	if t := b.lim.TokensPerMinute; t > 0 {
		v.TokRemaining = max(0, (window*t-b.tokDebt)/window)
		v.TokReset = time.Duration((b.tokDebt+t-1)/t) * time.Millisecond
	}
	v.RetryAfter = time.Duration(v.retryAfterMs) * time.Millisecond
}
