package ratelimit

import (
	"context"
	"errors"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/redis/rueidis"
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
	// downFor is how long Redis is left alone after a failed round trip.
	downFor = 1000 // ms
)

// script decides (ARGV[2] = 1) or only settles (0) a call over the buckets in
// KEYS. ARGV: now (ms), decide, then per bucket: rpm, tpm, requests given
// back, tokens owed (negative: given back), requests wanted. It answers
// {admitted, retry ms, kind refused (1 requests, 2 tokens), index refused,
// then per bucket: requests granted, tokens granted, requests debt, tokens
// debt}. Numbers stay integers below 2^53: exact in Lua's doubles.
var script = rueidis.NewLuaScript(`
local W = 60000
local now = tonumber(ARGV[1])
local decide = tonumber(ARGV[2]) == 1
local st = {}
local ok, retry, kind, who = 1, 0, 0, 0
for i = 1, #KEYS do
  local a = 3 + (i - 1) * 5
  local rpm, tpm = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local back, owed, want = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  local v = redis.call('HMGET', KEYS[i], 'r', 't', 'at')
  local dr, dt, at = tonumber(v[1]) or 0, tonumber(v[2]) or 0, tonumber(v[3]) or now
  local el = math.max(0, now - at)
  dr = math.max(0, dr - el * rpm - back * W)
  dt = math.max(0, dt - el * tpm + owed * W)
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

// decideShared spends from the local allowances, or reserves more; a bucket
// that Redis refused refuses locally until the call would be due. Every b.mu
// is held.
func (l *Limiter) decideShared(bs []*bucket, now int64) Verdict {
	var sh [2]*bucket
	n, need := 0, false
	for _, b := range bs {
		if !b.shared() {
			continue
		}
		if now < b.blockedUntil {
			return refusal(b, b.blockedKind, b.blockedUntil-now, now)
		}
		sh[n], n = b, n+1
		need = need || now >= b.leaseEnd ||
			(b.lim.RequestsPerMinute > 0 && b.reqLeft < 1) || (b.lim.TokensPerMinute > 0 && b.tokLeft <= 0)
	}
	if n == 0 {
		return Verdict{}
	}
	if need {
		return l.sync(sh[:n], now, true)
	}
	spend(sh[:n])
	return Verdict{}
}

func spend(bs []*bucket) {
	for _, b := range bs {
		if b.lim.RequestsPerMinute > 0 {
			b.reqLeft--
		}
	}
}

// sync runs the script over bs, giving back their allowances and settling
// the tokens they owe; with decide, it also decides a call and reserves new
// allowances. Every b.mu is held.
func (l *Limiter) sync(bs []*bucket, now int64, decide bool) Verdict {
	if now < l.downUntil.Load() {
		return l.unavailable(bs, now, decide)
	}
	res, err := l.exec(bs, now, decide)
	if err != nil {
		l.downUntil.Store(now + downFor)
		forgetAllowances(bs)
		return l.unavailable(bs, now, decide)
	}
	for i, b := range bs {
		r := res[4+4*i:]
		b.reqLeft, b.tokLeft, b.reqDebt, b.tokDebt, b.at = r[0], r[1], r[2], r[3], now
		b.leaseEnd = now + lease
	}
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
	spend(bs)
	return Verdict{}
}

// forgetAllowances settles bs after a round trip whose outcome is unknown (a
// timeout may come after Redis ran the script) on the side that never admits
// more than the limit: what was given back counts as given back, tokens owed
// are owed still (sent again, at worst charged twice).
func forgetAllowances(bs []*bucket) {
	for _, b := range bs {
		b.reqLeft = 0
		b.tokLeft = min(b.tokLeft, 0)
	}
}

// exec runs the script within the limiter's timeout and returns its integers.
func (l *Limiter) exec(bs []*bucket, now int64, decide bool) ([]int64, error) {
	var keys [2]string
	args := make([]string, 0, 2+5*len(bs))
	args = append(args, strconv.FormatInt(now, 10), "0")
	if decide {
		args[1] = "1"
	}
	for i, b := range bs {
		keys[i] = b.redisKey
		args = append(args, strconv.FormatInt(b.lim.RequestsPerMinute, 10), strconv.FormatInt(b.lim.TokensPerMinute, 10),
			strconv.FormatInt(max(b.reqLeft, 0), 10), strconv.FormatInt(-b.tokLeft, 10), strconv.Itoa(maxBatch))
	}
	c := l.remote.client()
	if c == nil {
		return nil, errNotConnected
	}
	l.calls.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(l.timeout.Load()))
	defer cancel()
	vals, err := script.Exec(ctx, c, keys[:len(bs)], args).ToArray()
	if err != nil {
		return nil, err
	}
	if len(vals) != 4+4*len(bs) {
		return nil, errReply
	}
	out := make([]int64, len(vals))
	for i, v := range vals {
		if out[i], err = v.AsInt64(); err != nil {
			return nil, err
		}
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
func (l *Limiter) pushOwed(bs []*bucket, now int64) {
	var sh [2]*bucket
	n := 0
	for _, b := range bs {
		if b.tpm.Load() > 0 {
			sh[n], n = b, n+1
		}
	}
	for _, b := range sh[:n] {
		b.mu.Lock()
	}
	l.sync(sh[:n], now, false)
	for _, b := range sh[:n] {
		b.mu.Unlock()
	}
}
