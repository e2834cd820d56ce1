package store

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/rueidis"
)

// luaScript is a Lua script run in one hash slot (every key of it shares the owner's tag),
// so it applies atomically.
type luaScript struct {
	src  string
	sha1 string
}

func newLuaScript(src string) *luaScript {
	sum := sha1.Sum([]byte(src))
	return &luaScript{src: src, sha1: hex.EncodeToString(sum[:])}
}

// eval runs sc with EVALSHA, or EVAL when the node does not know it yet. When acked is set and
// Replicas is not 0, WAIT follows on the same connection and must confirm the write.
func (s *Redis) eval(what string, sc *luaScript, acked bool, keys []string, args ...string) (rueidis.RedisResult, error) {
	build := func(sha bool) rueidis.Completed {
		if sha {
			return s.c.B().Evalsha().Sha1(sc.sha1).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
		}
		return s.c.B().Eval().Script(sc.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	}
	run := func(sha bool) (rueidis.RedisResult, error) {
		if acked {
			return s.doAcked(what, build(sha))
		}
		ctx, cancel := s.ctx()
		defer cancel()
		res := s.c.Do(ctx, build(sha))
		if err := res.Error(); err != nil && !rueidis.IsRedisNil(err) {
			return res, redisErr(what, err)
		}
		return res, nil
	}
	fault := s.faultOf(sc)
	if fault == faultUnsent {
		return lostReply(what)
	}
	res, err := run(true)
	if re, ok := rueidis.IsRedisErr(res.Error()); ok && re.IsNoScript() {
		res, err = run(false)
	}
	if fault == faultLostReply {
		return lostReply(what)
	}
	return res, err
}

// evalFault is a failure that tests inject into eval (Redis.testFault).
type evalFault int

const (
	faultNone      evalFault = iota
	faultUnsent              // the call fails before it reaches Redis
	faultLostReply           // the script runs, its reply is lost
)

func (s *Redis) faultOf(sc *luaScript) evalFault {
	if s.testFault == nil {
		return faultNone
	}
	return s.testFault(sc)
}

// lostReply is the outcome of a call whose reply never came.
func lostReply(what string) (rueidis.RedisResult, error) {
	err := context.DeadlineExceeded
	return rueidis.NewErrorResult(err), redisErr(what, err)
}

// replyLost reports whether res is the failure of a call whose reply never came (time-out,
// connection lost), so that the command may have run or not.
func replyLost(res rueidis.RedisResult) bool {
	err := res.Error()
	if err == nil || rueidis.IsRedisNil(err) {
		return false
	}
	_, replied := rueidis.IsRedisErr(err)
	return !replied
}

// claimScript starts an upload: KEYS meta, claim, staging; ARGV token, UploadTTL in ms.
// It returns 1, or 0 when the id is taken by a file or by another upload in progress.
var claimScript = newLuaScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if not redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end
redis.call('DEL', KEYS[3])
return 1`)

// commitScript makes an uploaded file visible: KEYS meta, data, index, claim, staging; ARGV
// token, metadata, expiry in Unix ms (0: never), index member, number of chunks. It returns
// 1, or 0 when the claim was lost (it expired: the upload stalled) or the chunks are not all
// there; the metadata, the data and the index entry appear together or not at all.
var commitScript = newLuaScript(`
if redis.call('GET', KEYS[4]) ~= ARGV[1] then return 0 end
local n = tonumber(ARGV[5])
if redis.call('LLEN', KEYS[5]) ~= n then return 0 end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local exp = tonumber(ARGV[3])
redis.call('DEL', KEYS[2])
if n > 0 then redis.call('RENAME', KEYS[5], KEYS[2]) end
local fresh = redis.call('EXISTS', KEYS[3]) == 0
redis.call('ZADD', KEYS[3], 0, ARGV[4])
if exp > 0 then
  redis.call('SET', KEYS[1], ARGV[2], 'PXAT', exp)
  if n > 0 then redis.call('PEXPIREAT', KEYS[2], exp) end
  if fresh then redis.call('PEXPIREAT', KEYS[3], exp) else redis.call('PEXPIREAT', KEYS[3], exp, 'GT') end
else
  redis.call('SET', KEYS[1], ARGV[2])
  if n > 0 then redis.call('PERSIST', KEYS[2]) end
  redis.call('PERSIST', KEYS[3])
end
redis.call('DEL', KEYS[4])
return 1`)

// settleScript learns whether a commit whose reply was lost ran: KEYS meta, claim, staging;
// ARGV token. When the claim is still this upload's, the commit has not run, and the script
// removes the claim and the staging so that a commit still on its way finds no claim and
// does nothing: it returns 0. Otherwise the commit ran when the metadata is there (the claim
// made the id this upload's): the script writes the metadata again, unchanged, so that a
// WAIT after it on the same connection also covers the commit, and returns 1. Else the claim
// expired before the commit: 0.
var settleScript = newLuaScript(`
if redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2], KEYS[3])
  return 0
end
local m = redis.call('GET', KEYS[1])
if not m then return 0 end
redis.call('SET', KEYS[1], m, 'KEEPTTL')
return 1`)

// dropScript takes back an upload the client was told failed, committed or not: KEYS meta,
// data, index, claim, staging; ARGV file id, token. It removes the claim and the staging
// when the claim is still this upload's (so that a commit on its way does nothing) and the
// file with its index entry. It returns 1 when it removed a file, else 0; run twice, it
// does nothing the second time.
var dropScript = newLuaScript(`
if redis.call('GET', KEYS[4]) == ARGV[2] then redis.call('DEL', KEYS[4], KEYS[5]) end
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
redis.call('DEL', KEYS[2])
for _, x in ipairs(redis.call('ZRANGEBYLEX', KEYS[3], '[' .. ARGV[1] .. ':', '(' .. ARGV[1] .. ';')) do
  redis.call('ZREM', KEYS[3], x)
end
return 1`)

// abortScript removes what a failed upload wrote: KEYS claim, staging; ARGV token. The claim
// goes only if it is still this upload's.
var abortScript = newLuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
end
return 1`)

// deleteScript removes a file: KEYS meta, data, index; ARGV file id. It returns the metadata
// it removed, or nil when there was none.
var deleteScript = newLuaScript(`
local m = redis.call('GET', KEYS[1])
if not m then return false end
redis.call('DEL', KEYS[1], KEYS[2])
for _, x in ipairs(redis.call('ZRANGEBYLEX', KEYS[3], '[' .. ARGV[1] .. ':', '(' .. ARGV[1] .. ';')) do
  redis.call('ZREM', KEYS[3], x)
end
return m`)

// readScript returns the metadata and every chunk of a file from one view: KEYS meta, data.
// It returns nil when there is no metadata.
var readScript = newLuaScript(`
local m = redis.call('GET', KEYS[1])
if not m then return false end
local d = redis.call('LRANGE', KEYS[2], 0, -1)
table.insert(d, 1, m)
return d`)

// pruneScript drops index entries whose metadata is gone (the file expired): KEYS index, then
// the metadata key of each entry; ARGV the entries. It returns the entries it dropped.
var pruneScript = newLuaScript(`
local gone = {}
for i, x in ipairs(ARGV) do
  if redis.call('EXISTS', KEYS[i + 1]) == 0 and redis.call('ZREM', KEYS[1], x) == 1 then
    table.insert(gone, x)
  end
end
return gone`)
