package spend

import (
	"context"
	"errors"
	"strconv"
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

// script applies settlements and, when the wanted amount is not zero,
// reserves it of every budget in KEYS or of none. ARGV: want (dollars,
// pico), then per key: cap (dollars, pico), spend to add (dollars, pico),
// reservation to release (dollars, pico), expire-at in Unix ms (0: never).
// It answers {admitted, index of the budget refused (0: none), then per key
// spent (dollars, pico), reserved (dollars, pico)} after the call.
var script = rueidis.NewLuaScript(`
local L = 1000000000000
local function norm(h, l)
  local c = math.floor(l / L)
  return h + c, l - c * L
end
local function le(ah, al, bh, bl) return ah < bh or (ah == bh and al <= bl) end
local wh, wl = tonumber(ARGV[1]), tonumber(ARGV[2])
local check = wh > 0 or wl > 0
local st = {}
for i = 1, #KEYS do
  local a = 3 + (i - 1) * 7
  local v = redis.call('HMGET', KEYS[i], 'sh', 'sl', 'rh', 'rl')
  local sh, sl = norm((tonumber(v[1]) or 0) + tonumber(ARGV[a + 2]), (tonumber(v[2]) or 0) + tonumber(ARGV[a + 3]))
  local rh, rl = norm((tonumber(v[3]) or 0) - tonumber(ARGV[a + 4]), (tonumber(v[4]) or 0) - tonumber(ARGV[a + 5]))
  if rh < 0 then rh, rl = 0, 0 end
  st[i] = {sh, sl, rh, rl, tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 6])}
end
local ok, who = 1, 0
if check then
  for i = 1, #KEYS do
    local s = st[i]
    local th, tl = norm(s[1] + s[3] + wh, s[2] + s[4] + wl)
    if not le(th, tl, s[5], s[6]) then
      ok, who = 0, i
      break
    end
  end
end
local out = {ok, who}
for i = 1, #KEYS do
  local s = st[i]
  if check and ok == 1 then s[3], s[4] = norm(s[3] + wh, s[4] + wl) end
  redis.call('HSET', KEYS[i], 'sh', s[1], 'sl', s[2], 'rh', s[3], 'rl', s[4])
  if s[7] > 0 then redis.call('PEXPIREAT', KEYS[i], s[7]) end
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
}

var (
	errNotConnected = errors.New("spend: redis not connected yet")
	errReply        = errors.New("spend: unexpected reply of the Redis script")
)

// key is the Redis key of b's period that began at start.
func (r *remote) key(b *Budget, start int64) string {
	return r.prefix + "spend:{budgets}:" + b.id + ":" + strconv.FormatInt(start, 10)
}

// reserveShared is Reserve on the shared ledger: one round trip. When Redis
// cannot be reached, the fail mode decides: open admits the call with
// nothing reserved (its cost is still recorded when it settles), closed
// refuses it.
func (l *Ledger) reserveShared(h *Hold, want int64, now time.Time) Verdict {
	for i, b := range h.bs[:h.n] {
		h.start[i] = Period(b.period.Load()).Start(now)
	}
	res, err := l.exec(h, want, 0, 0)
	if err != nil {
		if l.failOpen.Load() {
			l.failures[0].Add(1)
			h.amount = 0
			return Verdict{}
		}
		l.failures[1].Add(1)
		h.reset()
		return Verdict{Unavailable: true}
	}
	l.observe(h, res)
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

// settleShared is Settle on the shared ledger: one round trip. A
// settlement that cannot be recorded is counted as lost: its reservation
// stays held in the shared ledger until the period ends, which errs on the
// side of spending less.
func (l *Ledger) settleShared(h *Hold, cost int64) {
	res, err := l.exec(h, 0, cost, h.amount)
	if err != nil {
		l.lost.Add(1)
		return
	}
	passed := l.observe(h, res)
	l.warn(h.bs[:h.n], passed[:h.n])
}

// observe keeps the shared levels the script answered as the budgets' own,
// and reports which passed 80 % of their cap.
func (l *Ledger) observe(h *Hold, res []int64) (passed [MaxPerCall]bool) {
	for i, b := range h.bs[:h.n] {
		r := res[2+4*i:]
		b.mu.Lock()
		if h.start[i] > b.cur.start {
			b.prev, b.cur = b.cur, level{start: h.start[i]}
		}
		if lv := b.levelOf(h.start[i]); lv != nil {
			lv.spent = r[0]*config.PicoPerUSD + r[1]
			lv.reserved = r[2]*config.PicoPerUSD + r[3]
			passed[i] = lv.passed80(b.cap.Load())
		}
		b.mu.Unlock()
	}
	return passed
}

// exec runs the script over h's budgets within the timeout: reserving want
// (0: none), adding spend and releasing release.
func (l *Ledger) exec(h *Hold, want, spend, release int64) ([]int64, error) {
	keys := make([]string, h.n)
	args := make([]string, 0, 2+7*h.n)
	args = appendAmount(args, want)
	for i, b := range h.bs[:h.n] {
		keys[i] = l.remote.key(b, h.start[i])
		args = appendAmount(args, b.cap.Load())
		args = appendAmount(args, spend)
		args = appendAmount(args, release)
		var at int64
		if end := Period(b.period.Load()).End(h.start[i]); end > 0 {
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
	if len(vals) != 2+4*h.n {
		return nil, errReply
	}
	out := make([]int64, len(vals))
	for i, v := range vals {
		if out[i], err = v.AsInt64(); err != nil {
			return nil, err
		}
	}
	if out[0] != 1 && (out[1] < 1 || out[1] > int64(h.n)) {
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
