package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// The callers' key records on Redis live in one hash slot, under the hash tag {gwkeys}, so
// that a change, the version it raises and its entry in the change log are one atomic
// script (P is KeyPrefix):
//
//	P{gwkeys}:recs    → hash of id → record
//	P{gwkeys}:ver     → the version, raised by one at each change
//	P{gwkeys}:log     → sorted set of the ids changed, scored by the version of their last change
//	P{gwkeys}:floor   → the highest version trimmed from the log (0: none)
//	P{gwkeys}:chan    → the shard channel on which each change's version is announced
//
// A node that knows version L asks for the ids scored above L with their records; when L is
// below the floor (it missed more than the log holds) it reloads the whole hash.

// keysLogMax is how many ids the change log keeps.
var keysLogMax = 10000 // a variable for the tests

type redisKeyNames struct{ recs, ver, log, floor, channel string }

func (s *Redis) keyNames() redisKeyNames {
	p := s.opts.KeyPrefix + "{gwkeys}:"
	return redisKeyNames{recs: p + "recs", ver: p + "ver", log: p + "log", floor: p + "floor", channel: p + "chan"}
}

// changeKeyScript: KEYS recs, ver, log, floor; ARGV id, mode (put or del), data, prev,
// whether prev is given (1 or 0), the log's length. It returns the new version, or -1 (not
// found), -2 (conflict), -3 (exists).
var changeKeyScript = newLuaScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if ARGV[2] == 'del' then
  if not cur then return -1 end
  if cur ~= ARGV[4] then return -2 end
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  if ARGV[5] == '0' then
    if cur then return -3 end
  elseif cur ~= ARGV[4] then return -2 end
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
local v = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[3], v, ARGV[1])
local over = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[6])
if over > 0 then
  local old = redis.call('ZRANGE', KEYS[3], over - 1, over - 1, 'WITHSCORES')
  redis.call('SET', KEYS[4], old[2])
  redis.call('ZREMRANGEBYRANK', KEYS[3], 0, over - 1)
end
return v`)

// keyChangesScript: KEYS recs, ver, log, floor; ARGV the version known. It returns
// {version, 1, id, record or nil, ...} with the ids changed since, or {version, 0} when
// they cannot be told.
var keyChangesScript = newLuaScript(`
local v = tonumber(redis.call('GET', KEYS[2]) or '0')
local from = tonumber(ARGV[1])
if from == v then return {v, 1} end
local floor = tonumber(redis.call('GET', KEYS[4]) or '0')
if from > v or from < floor then return {v, 0} end
local out = {v, 1}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. ARGV[1], '+inf')) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[1], id)
end
return out`)

// listKeysScript: KEYS recs, ver. It returns {version, id, record, ...}.
var listKeysScript = newLuaScript(`
local out = {tonumber(redis.call('GET', KEYS[2]) or '0')}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all do out[i + 1] = all[i] end
return out`)

// PutKey writes data under id when the stored value is prev (see KeyStore), acknowledged
// by Replicas replicas, then announces the version.
func (s *Redis) PutKey(id string, data, prev []byte) (uint64, error) {
	if err := validateKeyRecord(id, data); err != nil {
		return 0, err
	}
	return s.changeKey("put", id, data, prev)
}

// DeleteKey removes id when its stored value is prev (see KeyStore).
func (s *Redis) DeleteKey(id string, prev []byte) (uint64, error) {
	if !ValidKeyID(id) {
		return 0, ErrNotFound
	}
	return s.changeKey("del", id, nil, prev)
}

func (s *Redis) changeKey(mode, id string, data, prev []byte) (uint64, error) {
	k := s.keyNames()
	hasPrev := "0"
	if prev != nil {
		hasPrev = "1"
	}
	what := "change key " + strconv.Quote(id)
	res, err := s.eval(what, changeKeyScript, true, []string{k.recs, k.ver, k.log, k.floor},
		id, mode, string(data), string(prev), hasPrev, strconv.Itoa(keysLogMax))
	if err != nil {
		return 0, err
	}
	v, err := res.AsInt64()
	switch {
	case err != nil:
		return 0, redisErr(what, err)
	case v == -1:
		return 0, fmt.Errorf("cannot %s: %w", what, ErrNotFound)
	case v == -2:
		return 0, fmt.Errorf("cannot %s: %w", what, ErrConflict)
	case v == -3:
		return 0, fmt.Errorf("cannot %s: %w", what, ErrExists)
	}
	s.announceKeys(uint64(v))
	return uint64(v), nil
}

// announceKeys publishes version v on the keys' channel. A lost announcement costs only
// time: every node also checks the version on its own.
func (s *Redis) announceKeys(v uint64) {
	ctx, cancel := s.ctx()
	defer cancel()
	s.c.Do(ctx, s.c.B().Spublish().Channel(s.keyNames().channel).Message(strconv.FormatUint(v, 10)).Build())
}

// GetKey returns the value of id, or ErrNotFound.
func (s *Redis) GetKey(id string) ([]byte, error) {
	if !ValidKeyID(id) {
		return nil, ErrNotFound
	}
	ctx, cancel := s.ctx()
	defer cancel()
	v, err := s.c.Do(ctx, s.c.B().Hget().Key(s.keyNames().recs).Field(id).Build()).AsBytes()
	if rueidis.IsRedisNil(err) {
		return nil, fmt.Errorf("cannot get key %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, redisErr("get key", err)
	}
	return v, nil
}

// ListKeys returns every record and their version, read by one script.
func (s *Redis) ListKeys() ([]KeyRecord, uint64, error) {
	k := s.keyNames()
	res, err := s.eval("list keys", listKeysScript, false, []string{k.recs, k.ver})
	if err != nil {
		return nil, 0, err
	}
	arr, err := res.ToArray()
	if err != nil || len(arr) == 0 || len(arr)%2 != 1 {
		return nil, 0, redisErr("list keys", errors.Join(err, errors.New("malformed reply")))
	}
	v, _ := arr[0].AsInt64()
	recs := make([]KeyRecord, 0, len(arr)/2)
	for i := 1; i+1 < len(arr); i += 2 {
		id, _ := arr[i].ToString()
		data, _ := arr[i+1].AsBytes()
		recs = append(recs, KeyRecord{ID: id, Data: data})
	}
	return recs, uint64(v), nil
}

// KeyChangesSince returns the records changed after since, from the change log.
func (s *Redis) KeyChangesSince(since uint64) (KeyChanges, error) {
	k := s.keyNames()
	res, err := s.eval("read key changes", keyChangesScript, false, []string{k.recs, k.ver, k.log, k.floor},
		strconv.FormatUint(since, 10))
	if err != nil {
		return KeyChanges{}, err
	}
	arr, err := res.ToArray()
	if err != nil || len(arr) < 2 || len(arr)%2 != 0 {
		return KeyChanges{}, redisErr("read key changes", errors.Join(err, errors.New("malformed reply")))
	}
	v, _ := arr[0].AsInt64()
	delta, _ := arr[1].AsInt64()
	ch := KeyChanges{Version: uint64(v), Full: delta == 0}
	for i := 2; i+1 < len(arr); i += 2 {
		id, _ := arr[i].ToString()
		data, err := arr[i+1].AsBytes()
		if err != nil && !rueidis.IsRedisNil(err) {
			return KeyChanges{}, redisErr("read key changes", err)
		}
		ch.Changed = append(ch.Changed, KeyRecord{ID: id, Data: data})
	}
	return ch, nil
}

// WatchKeys subscribes to the keys' shard channel and calls fn with each version
// announced, subscribing again (after a pause of up to a second) when the subscription
// ends: a failover, a cut connection.
func (s *Redis) WatchKeys(ctx context.Context, fn func(version uint64)) error {
	ch := s.keyNames().channel
	pause := 50 * time.Millisecond
	for {
		err := s.c.Receive(ctx, s.c.B().Ssubscribe().Channel(ch).Build(), func(m rueidis.PubSubMessage) {
			if v, err := strconv.ParseUint(m.Message, 10, 64); err == nil {
				fn(v)
			}
		})
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			pause = 50 * time.Millisecond
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// PutKey is Redis.PutKey.
func (l *LazyRedis) PutKey(id string, data, prev []byte) (uint64, error) {
	e, err := l.engine()
	if err != nil {
		return 0, err
	}
	return e.PutKey(id, data, prev)
}

// DeleteKey is Redis.DeleteKey.
func (l *LazyRedis) DeleteKey(id string, prev []byte) (uint64, error) {
	e, err := l.engine()
	if err != nil {
		return 0, err
	}
	return e.DeleteKey(id, prev)
}

// GetKey is Redis.GetKey.
func (l *LazyRedis) GetKey(id string) ([]byte, error) {
	e, err := l.engine()
	if err != nil {
		return nil, err
	}
	return e.GetKey(id)
}

// ListKeys is Redis.ListKeys.
func (l *LazyRedis) ListKeys() ([]KeyRecord, uint64, error) {
	e, err := l.engine()
	if err != nil {
		return nil, 0, err
	}
	return e.ListKeys()
}

// KeyChangesSince is Redis.KeyChangesSince.
func (l *LazyRedis) KeyChangesSince(since uint64) (KeyChanges, error) {
	e, err := l.engine()
	if err != nil {
		return KeyChanges{}, err
	}
	return e.KeyChangesSince(since)
}

// WatchKeys waits for the engine to open, then is Redis.WatchKeys.
func (l *LazyRedis) WatchKeys(ctx context.Context, fn func(version uint64)) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-l.done:
	}
	e, err := l.engine()
	if err != nil {
		return err // closed before it opened
	}
	return e.WatchKeys(ctx, fn)
}

var (
	_ KeyStore = (*Redis)(nil)
	_ KeyStore = (*LazyRedis)(nil)
	_ KeyStore = (*Pebble)(nil)
)
