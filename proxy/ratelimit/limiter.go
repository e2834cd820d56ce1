package ratelimit

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/modelgate/gateway/proxy/config"
)

// Options configure a Limiter; the zero value keeps the limits in memory.
type Options struct {
	// Redis, when set, returns the client of the cluster that holds the
	// requests and tokens buckets shared by every node that uses it with the
	// same KeyPrefix. It returns nil while the cluster is not connected yet:
	// a decision then is a backend failure, admitted or refused as the fail
	// mode says.
	Redis     func() rueidis.Client
	KeyPrefix string
	// Now is the clock; nil means time.Now. With Redis, the nodes' clocks
	// date the shared buckets' refills: keep them in sync (NTP).
	Now func() time.Time
}

// Limiter decides whether a key's call is admitted, and charges it when it
// ends. Build it with New; safe for concurrent use.
type Limiter struct {
	now    func() time.Time
	remote *remote
	table  atomic.Pointer[table]

	mu      sync.Mutex           // Update
	buckets map[bucketID]*bucket // every bucket ever made, under mu

	failOpen atomic.Bool
	timeout  atomic.Int64 // ns, bounds a round trip to Redis
	// failures counts the decisions made without the shared counters, by
	// outcome: [0] admitted (fail open), [1] refused (fail closed).
	failures [2]atomic.Uint64
	// calls counts the round trips to Redis.
	calls atomic.Uint64
}

type bucketID struct{ key, model string }

// table is the limits in force: per key id, its buckets. Immutable.
type table struct {
	keys map[string]*keyBuckets
}

// keyBuckets are a key's bucket over every model (nil without such limits)
// and its buckets per model id.
type keyBuckets struct {
	all    *bucket
	models map[string]*bucket
}

// New returns a limiter with no limits; Update puts the config's in force.
func New(opts Options) *Limiter {
	l := &Limiter{now: opts.Now, buckets: map[bucketID]*bucket{}}
	if l.now == nil {
		l.now = time.Now
	}
	if opts.Redis != nil {
		l.remote = newRemote(opts.Redis, opts.KeyPrefix)
	}
	l.failOpen.Store(true)
	l.timeout.Store(int64(250 * time.Millisecond))
	l.table.Store(&table{})
	return l
}

// Shared reports whether the limits are kept in Redis, across nodes.
func (l *Limiter) Shared() bool { return l.remote != nil }

// Update puts the limits of keys and the fail mode of rl in force. A bucket
// whose key (and model) stays keeps its use: calls in flight, debts and
// allowances; only its limits change.
func (l *Limiter) Update(keys []config.Key, rl config.RateLimit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := &table{keys: make(map[string]*keyBuckets, len(keys))}
	for _, k := range keys {
		if k.Limits == nil {
			continue
		}
		kb := &keyBuckets{}
		if own := k.Limits.Key(); own != (config.RateLimits{}) {
			kb.all = l.bucket(k.ID, "", own)
		}
		for model, ml := range k.Limits.Models {
			if ml == (config.RateLimits{}) {
				continue
			}
			if kb.models == nil {
				kb.models = make(map[string]*bucket, len(k.Limits.Models))
			}
			kb.models[model] = l.bucket(k.ID, model, ml)
		}
		if kb.all != nil || kb.models != nil {
			t.keys[k.ID] = kb
		}
	}
	l.failOpen.Store(rl.Open())
	if d := rl.Timeout.D(); d > 0 {
		l.timeout.Store(int64(d))
	}
	l.table.Store(t)
}

// bucket returns the bucket of key and model with limits lim, made on first
// use; l.mu is held.
func (l *Limiter) bucket(key, model string, lim config.RateLimits) *bucket {
	id := bucketID{key, model}
	b := l.buckets[id]
	if b == nil {
		b = &bucket{key: key, model: model}
		if l.remote != nil {
			b.redisKey = l.remote.key(key, model)
		}
		l.buckets[id] = b
	}
	b.setLimits(lim)
	return b
}

// Ticket is an admitted call's hold on its buckets, released by Done. The
// zero value holds nothing; a Ticket lives in the caller's pooled call.
type Ticket struct {
	b    [2]*bucket
	n    int
	conc [2]bool // b[i]'s concurrency slot is held
}

// Held reports whether the ticket holds buckets: Done must be called.
func (t *Ticket) Held() bool { return t.n > 0 }

// CountsTokens reports whether the call's tokens are charged: its usage must
// be read.
func (t *Ticket) CountsTokens() bool {
	for _, b := range t.b[:t.n] {
		if b.tpm.Load() > 0 {
			return true
		}
	}
	return false
}

// Admit decides a call of key id for model (a configured model id, or ""):
// admitted, it fills t, which Done must release; refused, t holds nothing.
// Keys without limits are admitted at once. It does not allocate when the
// decision is made locally.
func (l *Limiter) Admit(key, model string, t *Ticket) Verdict {
	kb := l.table.Load().keys[key]
	if kb == nil {
		return Verdict{}
	}
	t.n = 0
	if kb.all != nil {
		t.b[t.n], t.n = kb.all, t.n+1
	}
	if mb := kb.models[model]; mb != nil && model != "" {
		t.b[t.n], t.n = mb, t.n+1
	}
	if t.n == 0 {
		return Verdict{}
	}
	now := l.now().UnixMilli()
	if v := t.takeSlots(now); !v.Admitted() {
		return v
	}
	v := l.decide(t.b[:t.n], now)
	if !v.Admitted() {
		t.drop()
	}
	return v
}

// takeSlots takes a concurrency slot in each bucket that limits them.
func (t *Ticket) takeSlots(now int64) Verdict {
	for i, b := range t.b[:t.n] {
		c := b.conc.Load()
		if c <= 0 {
			continue
		}
		if b.inflight.Add(1) > c {
			b.inflight.Add(-1)
			b.rejected[KindConcurrent].Add(1)
			t.drop()
			v := Verdict{Kind: KindConcurrent, retryAfterMs: 1000}
			b.mu.Lock()
			v.describe(b, now)
			b.mu.Unlock()
			return v
		}
		t.conc[i] = true
	}
	return Verdict{}
}

// drop frees the ticket's concurrency slots and lets go of its buckets.
func (t *Ticket) drop() {
	for i := range t.conc {
		if t.conc[i] {
			t.b[i].inflight.Add(-1)
			t.conc[i] = false
		}
	}
	t.n, t.b = 0, [2]*bucket{}
}

// decide takes one request from every bucket, or none: in memory, or from
// the local allowances reserved from Redis (reserving more when they are out).
func (l *Limiter) decide(bs []*bucket, now int64) Verdict {
	if l.remote != nil {
		return l.decideShared(bs, now)
	}
	lockAll(bs)
	v := decideLocal(bs, now)
	unlockAll(bs)
	return v
}

// lockAll locks the buckets of a call, in the order a Ticket holds them
// (the key's over every model, then its model's) everywhere.
func lockAll(bs []*bucket) {
	for _, b := range bs {
		b.mu.Lock()
	}
}

func unlockAll(bs []*bucket) {
	for _, b := range bs {
		b.mu.Unlock()
	}
}

// decideLocal is the in-memory decision; every b.mu is held.
func decideLocal(bs []*bucket, now int64) Verdict {
	for _, b := range bs {
		b.refill(now)
		if k, ms := b.check(); k != KindNone {
			return refusal(b, k, ms, now)
		}
	}
	for _, b := range bs {
		if b.lim.RequestsPerMinute > 0 {
			b.reqDebt += window
		}
	}
	return Verdict{}
}

// refusal counts and describes b's refusal of kind k; b.mu is held.
func refusal(b *bucket, k Kind, retryMs, now int64) Verdict {
	b.rejected[k].Add(1)
	v := Verdict{Kind: k, retryAfterMs: retryMs}
	v.describe(b, now)
	return v
}

// Done ends an admitted call: its concurrency slots are freed and tokens
// (input + output of the answer; 0 when it reported none) are charged to
// the buckets that limit tokens, at most MaxCallTokens. t holds nothing
// afterwards.
func (l *Limiter) Done(t *Ticket, tokens int64) {
	held, n := t.b, t.n
	t.drop()
	bs := held[:n]
	if tokens <= 0 {
		return
	}
	tokens = min(tokens, MaxCallTokens)
	now := l.now().UnixMilli()
	var owed bool
	for _, b := range bs {
		if b.tpm.Load() <= 0 {
			continue
		}
		b.mu.Lock()
		if l.remote == nil {
			b.refill(now)
			b.tokDebt = min(b.tokDebt+tokens*window, maxDebt)
		} else {
			b.tokLeft = max(b.tokLeft-tokens, -maxOwed)
			owed = owed || b.tokLeft < 0
		}
		b.mu.Unlock()
	}
	if owed {
		l.pushOwed(bs, now)
	}
}

var errReply = errors.New("ratelimit: unexpected reply of the Redis script")
