package ratelimit

import (
	"context"
	"errors"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/modelgate/gateway/proxy/config"
)

// The shared buckets. Each key's buckets (over every model, and per model)
// are Redis hashes in one hash slot, so one script call decides a call:
// {r, t, at}: the requests and tokens debts at time at, as bucket.go keeps
// them in memory. A node reserves an allowance of requests and tokens and
// spends it locally; it goes back to the shared bucket at the node's next
// call to the script. Keys expire once their debts are repaid.

const (
	// maxBatch bounds the requests one node reserves at once.
	maxBatch = 32
	// batchShare: a reservation is at most 1/batchShare of what the shared
	// bucket has left, so a limit under 2*batchShare per minute, or a bucket
	// near its end, is decided one Redis call per request, exactly.
	batchShare = 64
	// lease is how long a node keeps an allowance before returning it.
	lease = 1000 // ms
	// downFor is how long Redis is left alone for a bucket after a failed
	// round trip of that bucket.
	downFor = 1000 // ms
)

// script decides (ARGV[2] = 1) or only settles (0) a call over the buckets in
// KEYS. ARGV: now (ms), decide, then per bucket: rpm, tpm, requests given
// back, tokens owed (negative: given back), requests wanted. It answers
// {admitted, retry ms, kind refused (1 requests, 2 tokens), index refused,
// then per bucket: requests granted, tokens granted, requests debt, tokens
// debt}. Debts are clamped to MAXD (maxDebt, 2^52) wherever they are read or
// grow, so every number stays an integer below 2^53: exact in Lua's
// doubles, written by redis.call without an exponent (Redis formats them
// with %.17g) and answered as the integer it is.
var script = rueidis.NewLuaScript(`
local W, MAXD = 60000, ` + strconv.FormatInt(maxDebt, 10) + `
local now = tonumber(ARGV[1])
local decide = tonumber(ARGV[2]) == 1
local st = {}
local ok, retry, kind, who = 1, 0, 0, 0
for i = 1, #KEYS do
  local a = 3 + (i - 1) * 5
  local rpm, tpm = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local back, want = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 4])
  local owed = math.min(tonumber(ARGV[a + 3]), MAXD / W)
  local v = redis.call('HMGET', KEYS[i], 'r', 't', 'at')
  local dr, dt = math.min(MAXD, tonumber(v[1]) or 0), math.min(MAXD, tonumber(v[2]) or 0)
  local at = tonumber(v[3]) or now
  local el = math.max(0, now - at)
  dr = math.max(0, dr - el * rpm - back * W)
  dt = math.min(MAXD, math.max(0, dt - el * tpm + owed * W))
  st[i] = {rpm, tpm, dr, dt, want, math.max(at, now)}
  if decide and ok == 1 then
    if rpm > 0 and dr + W > W * rpm then
      ok, kind, who, retry = 0, 1, i, math.ceil((dr + W - W * rpm) / rpm)
    elseif tpm > 0 and dt >= W * tpm then
      ok, kind, who, retry = 0, 2, i, math.floor((dt - W * tpm) / tpm) + 1
    end
  end
end
local out = {ok, retry, kind, who}
for i = 1, #KEYS do
  local rpm, tpm, dr, dt, want, at = unpack(st[i])
  local gr, gt = 0, 0
  if decide and ok == 1 then
    if rpm > 0 then
      gr = math.min(want, math.max(1, math.floor((W * rpm - dr) / W / 64)))
      dr = dr + gr * W
    end
    if tpm > 0 then
      gt = math.max(0, math.floor((W * tpm - dt) / W / 64))
      dt = dt + gt * W
    end
  end
  local ttl = 1000
  if rpm > 0 then ttl = math.max(ttl, math.ceil(dr / rpm) + 1000) end
  if tpm > 0 then ttl = math.max(ttl, math.ceil(dt / tpm) + 1000) end
  redis.call('HSET', KEYS[i], 'r', dr, 't', dt, 'at', at)
  redis.call('PEXPIRE', KEYS[i], ttl)
  out[#out + 1] = gr
  out[#out + 1] = gt
  out[#out + 1] = dr
  out[#out + 1] = dt
end
return out
`)

// remote is the Redis side of a Limiter.
type remote struct {
	client func() rueidis.Client // nil while not connected
	prefix string
}

func newRemote(client func() rueidis.Client, prefix string) *remote {
	return &remote{client: client, prefix: prefix}
}

// errNotConnected is the failure of a decision made before the cluster's
// client exists.
var errNotConnected = errors.New("ratelimit: redis not connected yet")

// key is the Redis key of the bucket of key and model: the key id's hash
// is the hash tag, so that a key's buckets share a slot whatever its id holds.
func (r *remote) key(key, model string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	k := r.prefix + "rl:{" + strconv.FormatUint(h.Sum64(), 16) + "}:"
	if model == "" {
		return k + "all"
	}
	return k + "m:" + model
}

// shared reports whether b's limits are kept in Redis (concurrency is not).
func (b *bucket) shared() bool { return b.lim.RequestsPerMinute > 0 || b.lim.TokensPerMinute > 0 }

// decideShared spends from the local allowances, or reserves more in a round
// trip to Redis made without the buckets' locks. A call that needs Redis
// while a round trip of its buckets is in flight waits for that one (bounded
// by the timeout) and decides again, so that callers of one key do not all
// ask at once. A bucket that Redis refused refuses locally until the call
// would be due; one whose last round trip failed decides by the fail mode
// for downFor, and no other bucket is concerned.
func (l *Limiter) decideShared(bs []*bucket, now int64) Verdict {
	for {
		lockAll(bs)
		v, busy := l.decideLocked(bs, now)
		unlockAll(bs)
		if busy == nil {
			return v
		}
		<-busy.done
		now = l.now().UnixMilli()
	}
}

// decideLocked decides with every b.mu held (released during a round trip),
// or returns the round trip in flight to wait for before deciding again.
func (l *Limiter) decideLocked(bs []*bucket, now int64) (Verdict, *trip) {
	var sh [2]*bucket
	n, need := 0, false
	for _, b := range bs {
		if !b.shared() {
			continue
		}
		if now < b.blockedUntil {
			return refusal(b, b.blockedKind, b.blockedUntil-now, now), nil
		}
		sh[n], n = b, n+1
		need = need || b.needsTrip(now)
	}
	if !need {
		spend(sh[:n], nil)
		return Verdict{}, nil
	}
	for _, b := range sh[:n] {
		if now < b.downUntil {
			return l.unavailable(sh[:n], now, true), nil
		}
	}
	for _, b := range sh[:n] {
		if b.flight != nil {
			return Verdict{}, b.flight
		}
	}
	return l.roundTrip(bs, sh[:n], now, true), nil
}

// needsTrip reports whether a call needs Redis: the allowance is spent or
// its lease is over; b.mu is held.
func (b *bucket) needsTrip(now int64) bool {
	return now >= b.leaseEnd || (b.lim.RequestsPerMinute > 0 && b.reqLeft < 1) ||
		(b.lim.TokensPerMinute > 0 && b.tokLeft <= 0)
}

// spend takes a call's request from the allowances of bs, under the limits
// lim (nil: theirs).
func spend(bs []*bucket, lim *[2]config.RateLimits) {
	for i, b := range bs {
		rpm := b.lim.RequestsPerMinute
		if lim != nil {
			rpm = lim[i].RequestsPerMinute
		}
		if rpm > 0 {
			b.reqLeft--
		}
	}
}

// trip is one round trip to Redis for the buckets of a call (the key's, or
// the key's and its model's: one hash slot), with what it gives back and
// what it owes, taken from them when it starts.
type trip struct {
	bs         [2]*bucket
	n          int
	lim        [2]config.RateLimits
	gen        [2]uint64
	back, owed [2]int64 // requests given back; tokens owed (< 0: given back)
	done       chan struct{}
}

// roundTrip runs the script over bs, giving back their allowances and
// settling the tokens they owe; with decide, it also decides a call and
// reserves new allowances. The locks of held (bs among them) are held on
// entry and on return, not during the round trip; no round trip of bs is
// in flight.
func (l *Limiter) roundTrip(held, bs []*bucket, now int64, decide bool) Verdict {
	t := &trip{n: len(bs), done: make(chan struct{})}
	for i, b := range bs {
		t.bs[i], t.lim[i], t.gen[i] = b, b.lim, b.gen
		t.back[i], t.owed[i] = max(b.reqLeft, 0), -b.tokLeft
		b.reqLeft, b.tokLeft, b.flight = 0, 0, t
	}
	unlockAll(held)
	res, err := l.exec(t, now, decide)
	lockAll(held)
	defer t.land()
	if err != nil {
		t.fail(l.now().UnixMilli())
		return l.unavailable(bs, now, decide)
	}
	t.settle(res, now)
	if !decide {
		return Verdict{}
	}
	if res[0] != 1 {
		k := KindRequests
		if res[2] == 2 {
			k = KindTokens
		}
		b := bs[res[3]-1]
		// Nothing is due before then: a client that keeps calling is
		// refused here, not by a round trip each.
		b.blockedUntil, b.blockedKind = now+res[1], k
		return refusal(b, k, res[1], now)
	}
	spend(bs, &t.lim)
	return Verdict{}
}

// land ends the trip: its buckets may start another, and the calls that
// wait for it decide again (once the locks held are released).
func (t *trip) land() {
	for _, b := range t.bs[:t.n] {
		b.flight = nil
	}
	close(t.done)
}

// settle puts the script's reply in the trip's buckets: the allowances it
// granted (added to what calls charged meanwhile) and the shared debts. A
// bucket whose limits changed meanwhile keeps no lease: its next decision
// gives the allowance back under the new limits.
func (t *trip) settle(res []int64, now int64) {
	for i, b := range t.bs[:t.n] {
		r := res[4+4*i:]
		b.reqLeft += r[0]
		b.tokLeft += r[1]
		b.reqDebt, b.tokDebt, b.at = r[2], r[3], now
		if b.gen == t.gen[i] {
			b.leaseEnd = now + lease
		}
	}
}

// fail settles the trip's buckets after a round trip whose outcome is
// unknown (a timeout may come after Redis ran the script) on the side that
// never admits more than the limit: what was given back counts as given
// back, tokens owed are owed still (sent again, at worst charged twice).
// Redis is left alone for these buckets until now + downFor.
func (t *trip) fail(now int64) {
	for i, b := range t.bs[:t.n] {
		if t.owed[i] > 0 {
			b.tokLeft = max(b.tokLeft-t.owed[i], -maxOwed)
		}
		b.downUntil = now + downFor
	}
}

// exec runs the script for t within the limiter's timeout and returns its
// integers.
func (l *Limiter) exec(t *trip, now int64, decide bool) ([]int64, error) {
	var keys [2]string
	args := make([]string, 0, 2+5*t.n)
	args = append(args, strconv.FormatInt(now, 10), "0")
	if decide {
		args[1] = "1"
	}
	for i, b := range t.bs[:t.n] {
		keys[i] = b.redisKey
		args = append(args, strconv.FormatInt(t.lim[i].RequestsPerMinute, 10), strconv.FormatInt(t.lim[i].TokensPerMinute, 10),
			strconv.FormatInt(t.back[i], 10), strconv.FormatInt(min(t.owed[i], maxOwed), 10), strconv.Itoa(maxBatch))
	}
	c := l.remote.client()
	if c == nil {
		return nil, errNotConnected
	}
	l.calls.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(l.timeout.Load()))
	defer cancel()
	vals, err := script.Exec(ctx, c, keys[:t.n], args).ToArray()
	if err != nil {
		return nil, err
	}
	if len(vals) != 4+4*t.n {
		return nil, errReply
	}
	out := make([]int64, len(vals))
	for i, v := range vals {
		if out[i], err = v.AsInt64(); err != nil {
			return nil, err
		}
	}
	if out[0] != 1 && (out[3] < 1 || out[3] > int64(t.n)) {
		return nil, errReply
	}
	return out, nil
}

// unavailable decides without the shared counters: by the fail mode, counted.
func (l *Limiter) unavailable(bs []*bucket, now int64, decide bool) Verdict {
	if !decide {
		return Verdict{}
	}
	if l.failOpen.Load() {
		l.failures[0].Add(1)
		return Verdict{}
	}
	l.failures[1].Add(1)
	return refusal(bs[0], KindUnavailable, 1000, now)
}

// pushOwed settles the tokens that calls charged beyond bs' reservations,
// so that other nodes see them now rather than at this node's next call.
// While Redis is down for them, they wait for the next round trip.
func (l *Limiter) pushOwed(bs []*bucket, now int64) {
	var sh [2]*bucket
	n := 0
	for _, b := range bs {
		if b.tpm.Load() > 0 {
			sh[n], n = b, n+1
		}
	}
	for {
		lockAll(sh[:n])
		busy := l.pushLocked(sh[:n], now)
		unlockAll(sh[:n])
		if busy == nil {
			return
		}
		<-busy.done
		now = l.now().UnixMilli()
	}
}

// pushLocked is pushOwed with every b.mu held (released during the round
// trip), or the round trip in flight to wait for before trying again.
func (l *Limiter) pushLocked(bs []*bucket, now int64) *trip {
	owed := false
	for _, b := range bs {
		if now < b.downUntil {
			return nil
		}
		if b.flight != nil {
			return b.flight
		}
		owed = owed || b.tokLeft < 0
	}
	if owed {
		l.roundTrip(bs, bs, now, false)
	}
	return nil
}
