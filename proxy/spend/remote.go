package spend

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/modelgate/gateway/proxy/config"
)

// The shared ledger. A budget's period is a Redis hash, {sh, sl, rh, rl}:
// what was spent and what is reserved, each as two integers (whole dollars
// and the pico-USD below a dollar), so that every number the script adds or
// compares stays below 2^53 and is exact in Lua's doubles. Every budget
// lives in one hash slot (the {budgets} tag), so that one script call
// reserves a call's cost of all its budgets, or of none: one shard serves
// the budgets of every node. A period's hash expires a week after the
// period ends.

// keepAfter is how long a period's spend stays readable after its end.
const keepAfter = 7 * 24 * time.Hour

// Settlements travel with the next round trip: a call that ends queues its
// settlement, which the next reservation's script call of any budget carries
// (every budget is in one hash slot), or, when no reservation comes within
// flushDelay, a script call of its own. A call thus costs one round trip
// under load. A queued settlement only holds a reservation a little longer
// (the side that refuses), or records an overshoot a little later.
const (
	flushDelay = 20 * time.Millisecond
	// retryDelay is how long settlements whose round trip failed wait
	// before they are sent again.
	retryDelay = time.Second
)

// script applies settlements and reserves what is wanted of every budget
// that wants some, or of none. ARGV, per key: cap (dollars, pico), spend to
// add (dollars, pico), reservation to release (dollars, pico), amount
// wanted (dollars, pico), expire-at in Unix ms (0: never). It answers
// {admitted, index of the budget refused (0: none), then per key spent
// (dollars, pico), reserved (dollars, pico)} after the call.
var script = rueidis.NewLuaScript(`
local L = 1000000000000
local function norm(h, l)
  local c = math.floor(l / L)
  return h + c, l - c * L
end
local function le(ah, al, bh, bl) return ah < bh or (ah == bh and al <= bl) end
local st = {}
for i = 1, #KEYS do
  local a = 1 + (i - 1) * 9
  local v = redis.call('HMGET', KEYS[i], 'sh', 'sl', 'rh', 'rl')
  local sh, sl = norm((tonumber(v[1]) or 0) + tonumber(ARGV[a + 2]), (tonumber(v[2]) or 0) + tonumber(ARGV[a + 3]))
  local rh, rl = norm((tonumber(v[3]) or 0) - tonumber(ARGV[a + 4]), (tonumber(v[4]) or 0) - tonumber(ARGV[a + 5]))
  if rh < 0 then rh, rl = 0, 0 end
  st[i] = {sh, sl, rh, rl, tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 6]), tonumber(ARGV[a + 7]), tonumber(ARGV[a + 8])}
end
local ok, who = 1, 0
for i = 1, #KEYS do
  local s = st[i]
  if s[7] > 0 or s[8] > 0 then
    local th, tl = norm(s[1] + s[3] + s[7], s[2] + s[4] + s[8])
    if not le(th, tl, s[5], s[6]) then
      ok, who = 0, i
      break
    end
  end
end
local out = {ok, who}
for i = 1, #KEYS do
  local s = st[i]
  if ok == 1 then s[3], s[4] = norm(s[3] + s[7], s[4] + s[8]) end
  redis.call('HSET', KEYS[i], 'sh', s[1], 'sl', s[2], 'rh', s[3], 'rl', s[4])
  if s[9] > 0 then redis.call('PEXPIREAT', KEYS[i], s[9]) end
  out[#out + 1] = s[1]
  out[#out + 1] = s[2]
  out[#out + 1] = s[3]
  out[#out + 1] = s[4]
end
return out
`)

// remote is the Redis side of a Ledger.
type remote struct {
	client  func() rueidis.Client // nil while not connected
	prefix  string
	timeout atomic.Int64 // ns, bounds a round trip

	mu      sync.Mutex
	pending map[string]*op // queued settlements, by Redis key
	armed   bool           // a flush is due
}

// op is what one script call does to one budget's period.
type op struct {
	key                  string
	b                    *Budget
	start                int64
	spend, release, want int64
}

var (
	errNotConnected = errors.New("spend: redis not connected yet")
	errReply        = errors.New("spend: unexpected reply of the Redis script")
)

// key is the Redis key of b's period that began at start.
func (r *remote) key(b *Budget, start int64) string {
	return r.prefix + "spend:{budgets}:" + b.id + ":" + strconv.FormatInt(start, 10)
}

// reserveShared is Reserve on the shared ledger: one round trip, which also
// carries the settlements queued. When Redis cannot be reached, the fail
// mode decides: open admits the call with nothing reserved (its cost is
// still recorded when it settles), closed refuses it.
func (l *Ledger) reserveShared(h *Hold, want int64, now time.Time) Verdict {
	ops := make([]op, h.n, h.n+4)
	for i, b := range h.bs[:h.n] {
		h.start[i] = Period(b.period.Load()).Start(now)
		ops[i] = op{key: l.remote.key(b, h.start[i]), b: b, start: h.start[i], want: want}
	}
	batch := l.remote.take()
	ops = merge(ops, batch)
	res, err := l.exec(ops)
	if err != nil {
		l.remote.requeue(l, batch)
		if l.failOpen.Load() {
			l.failures[0].Add(1)
			h.amount = 0
			return Verdict{}
		}
		l.failures[1].Add(1)
		h.reset()
		return Verdict{Unavailable: true}
	}
	l.observe(ops, res)
	if res[0] == 1 {
		return Verdict{}
	}
	b := h.bs[res[1]-1]
	b.mu.Lock()
	v := b.refusal(&b.cur, b.cap.Load(), want)
	b.mu.Unlock()
	h.reset()
	return v
}

// merge adds the queued settlements of batch to ops, into the op of the
// same key where there is one (a key appears once in a script call).
func merge(ops []op, batch map[string]*op) []op {
	for k, p := range batch {
		found := false
		for i := range ops {
			if ops[i].key == k {
				ops[i].spend += p.spend
				ops[i].release += p.release
				found = true
			}
		}
		if !found {
			ops = append(ops, *p)
		}
	}
	return ops
}

// settleShared is Settle on the shared ledger: the settlement is queued for
// the next round trip (see flushDelay).
func (l *Ledger) settleShared(h *Hold, cost int64) {
	r := l.remote
	r.mu.Lock()
	if r.pending == nil {
		r.pending = make(map[string]*op, 8)
	}
	for i, b := range h.bs[:h.n] {
		k := r.key(b, h.start[i])
		p := r.pending[k]
		if p == nil {
			p = &op{key: k, b: b, start: h.start[i]}
			r.pending[k] = p
		}
		p.spend += cost
		p.release += h.amount
	}
	arm := !r.armed
	r.armed = true
	r.mu.Unlock()
	if arm {
		time.AfterFunc(flushDelay, l.flush)
	}
}

// take returns the queued settlements and queues no more.
func (r *remote) take() map[string]*op {
	r.mu.Lock()
	defer r.mu.Unlock()
	batch := r.pending
	r.pending = nil
	return batch
}

// requeue queues again the settlements of a round trip that failed, sent
// again after retryDelay. Its outcome is unknown (a timeout may come after
// Redis ran the script): they may count twice, on the side that refuses.
func (r *remote) requeue(l *Ledger, batch map[string]*op) {
	if len(batch) == 0 {
		return
	}
	l.lost.Add(1)
	r.mu.Lock()
	if r.pending == nil {
		r.pending = make(map[string]*op, len(batch))
	}
	for k, p := range batch {
		if q := r.pending[k]; q != nil {
			q.spend += p.spend
			q.release += p.release
		} else {
			r.pending[k] = p
		}
	}
	r.armed = true
	r.mu.Unlock()
	time.AfterFunc(retryDelay, l.flush)
}

// flush sends the queued settlements that no reservation carried.
func (l *Ledger) flush() {
	r := l.remote
	r.mu.Lock()
	batch := r.pending
	r.pending, r.armed = nil, false
	r.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	ops := merge(make([]op, 0, len(batch)), batch)
	res, err := l.exec(ops)
	if err != nil {
		r.requeue(l, batch)
		return
	}
	l.observe(ops, res)
}

// RoundTrips returns the script calls made to Redis.
func (l *Ledger) RoundTrips() uint64 { return l.calls.Load() }

// Flush sends the settlements queued for the shared ledger now, for a
// process that stops; a no-op in memory.
func (l *Ledger) Flush() {
	if l.remote != nil {
		l.flush()
	}
}

// observe keeps the shared levels the script answered as the budgets' own,
// and logs those that passed 80 % of their cap.
func (l *Ledger) observe(ops []op, res []int64) {
	for i := range ops {
		o, r := &ops[i], res[2+4*i:]
		b := o.b
		b.mu.Lock()
		if o.start > b.cur.start {
			b.prev, b.cur = b.cur, level{start: o.start}
		}
		passed := false
		if lv := b.levelOf(o.start); lv != nil {
			lv.spent = r[0]*config.PicoPerUSD + r[1]
			lv.reserved = r[2]*config.PicoPerUSD + r[3]
			passed = lv.passed80(b.cap.Load())
		}
		b.mu.Unlock()
		if passed {
			l.warn([]*Budget{b}, []bool{true})
		}
	}
}

// exec runs the script over ops within the timeout.
func (l *Ledger) exec(ops []op) ([]int64, error) {
	keys := make([]string, len(ops))
	args := make([]string, 0, 9*len(ops))
	for i := range ops {
		o := &ops[i]
		keys[i] = o.key
		args = appendAmount(args, o.b.cap.Load())
		args = appendAmount(args, o.spend)
		args = appendAmount(args, o.release)
		args = appendAmount(args, o.want)
		var at int64
		if end := Period(o.b.period.Load()).End(o.start); end > 0 {
			at = end*1000 + keepAfter.Milliseconds()
		}
		args = append(args, strconv.FormatInt(at, 10))
	}
	c := l.remote.client()
	if c == nil {
		return nil, errNotConnected
	}
	l.calls.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(l.remote.timeout.Load()))
	defer cancel()
	vals, err := script.Exec(ctx, c, keys, args).ToArray()
	if err != nil {
		return nil, err
	}
	if len(vals) != 2+4*len(ops) {
		return nil, errReply
	}
	out := make([]int64, len(vals))
	for i, v := range vals {
		if out[i], err = v.AsInt64(); err != nil {
			return nil, err
		}
	}
	if out[0] != 1 && (out[1] < 1 || out[1] > int64(len(ops))) {
		return nil, errReply
	}
	return out, nil
}

// appendAmount appends a non-negative amount as its whole dollars and the
// pico-USD below a dollar.
func appendAmount(args []string, v int64) []string {
	v = max(v, 0)
	return append(args, strconv.FormatInt(v/config.PicoPerUSD, 10), strconv.FormatInt(v%config.PicoPerUSD, 10))
}
