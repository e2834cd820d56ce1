package store

import (
	"time"

	"github.com/redis/rueidis"
)

// PutResponse records r under r.ID with a TTL of ResponseTTL, replacing an earlier record of
// that id, and returns once Replicas replicas hold it.
func (s *Redis) PutResponse(r Response) error {
	if err := validateResponse(&r); err != nil {
		return err
	}
	var buf [128]byte
	val := appendResponse(buf[:0], &r)
	set := s.c.B().Set().Key(s.responseKey(r.ID)).Value(rueidis.BinaryString(val)).
		PxMilliseconds(s.opts.ResponseTTL.Milliseconds()).Build()
	return s.writeAcked("put response", set)
}

// writeAcked runs one keyed write and, when Replicas is set, the WAIT after it on the same
// connection; it fails with ErrUnavailable unless enough replicas confirm.
func (s *Redis) writeAcked(what string, cmd rueidis.Completed) error {
	_, err := s.doAcked(what, cmd)
	return err
}

// doAcked is writeAcked that also returns the reply of cmd.
func (s *Redis) doAcked(what string, cmd rueidis.Completed) (rueidis.RedisResult, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	if s.opts.Replicas == 0 {
		res := s.c.Do(ctx, cmd)
		if err := res.Error(); err != nil && !rueidis.IsRedisNil(err) {
			return res, redisErr(what, err)
		}
		return res, nil
	}
	res := s.c.DoMulti(ctx, cmd, s.waitCmd())
	if err := res[0].Error(); err != nil && !rueidis.IsRedisNil(err) {
		return res[0], redisErr(what, err)
	}
	return res[0], s.checkWait(what, res[1])
}

func (s *Redis) responseKey(id string) string {
	return s.opts.KeyPrefix + "r:" + id
}

// GetResponse returns the record of id, or ErrNotFound.
func (s *Redis) GetResponse(id string) (Response, error) {
	if id == "" || len(id) > MaxResponseIDLen {
		return Response{}, ErrNotFound
	}
	ctx, cancel := s.ctx()
	defer cancel()
	v, err := s.c.Do(ctx, s.c.B().Get().Key(s.responseKey(id)).Build()).AsBytes()
	if rueidis.IsRedisNil(err) {
		return Response{}, ErrNotFound
	}
	if err != nil {
		return Response{}, redisErr("get response", err)
	}
	r := Response{ID: id}
	if err := decodeResponse(v, &r); err != nil {
		return Response{}, err
	}
	return r, nil
}

// DeleteResponse removes the record of id, or returns ErrNotFound; the removal is
// acknowledged like a write.
func (s *Redis) DeleteResponse(id string) error {
	if id == "" || len(id) > MaxResponseIDLen {
		return ErrNotFound
	}
	res, err := s.doAcked("delete response", s.c.B().Del().Key(s.responseKey(id)).Build())
	if err != nil {
		return err
	}
	if n, err := res.AsInt64(); err != nil || n == 0 {
		return ErrNotFound
	}
	return nil
}

// ReclaimResponses does nothing and returns 0: records expire natively after ResponseTTL.
func (s *Redis) ReclaimResponses(time.Time) (int, error) { return 0, nil }
