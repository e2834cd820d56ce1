package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"
)

// Bounds of LazyRedis' backoff between two attempts to open the engine.
const (
	lazyFirstBackoff = 100 * time.Millisecond
	lazyMaxBackoff   = 2 * time.Second
)

// LazyRedis is a Store on the Redis engine that need not be reachable when the gateway
// starts: OpenRedisLazy opens the engine in the background, retrying with a bounded
// backoff, and until it is open every call fails with ErrUnavailable. Once open, calls go to
// the engine, whose client reconnects by itself when a node comes and goes.
//
// Create it with OpenRedisLazy; the zero value is not usable. It is safe for concurrent use.
type LazyRedis struct {
	opts    RedisOptions
	log     *slog.Logger
	eng     atomic.Pointer[Redis]
	lastErr atomic.Pointer[error] // why the last attempt to open failed
	stop    chan struct{}         // closed by Close
	done    chan struct{}         // closed when the opening goroutine ends
}

var _ Store = (*LazyRedis)(nil)

// OpenRedisLazy validates opts and opens the engine: at once when a node answers, else in
// the background. It fails only for options that Validate refuses. log receives a line
// when an attempt fails for a new reason and when the engine opens; nil means slog.Default.
func OpenRedisLazy(opts RedisOptions, log *slog.Logger) (*LazyRedis, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	l := &LazyRedis{opts: opts, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	e, err := OpenRedis(opts)
	if err == nil {
		l.eng.Store(e)
		close(l.done)
		return l, nil
	}
	l.failed(err, "")
	go l.open()
	return l, nil
}

// open retries OpenRedis until it succeeds or Close is called.
func (l *LazyRedis) open() {
	defer close(l.done)
	wait := lazyFirstBackoff
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		e, err := OpenRedis(l.opts)
		if err == nil {
			l.eng.Store(e)
			l.log.Info("store: redis connected")
			return
		}
		l.failed(err, RedisReason(*l.lastErr.Load()))
		wait = min(2*wait, lazyMaxBackoff)
		t.Reset(wait)
	}
}

// failed records err and logs it when its reason differs from prev.
func (l *LazyRedis) failed(err error, prev string) {
	l.lastErr.Store(&err)
	if r := RedisReason(err); r != prev {
		l.log.Warn("store: cannot connect to redis, retrying in the background", "reason", r, "err", err)
	}
}

// Client returns the open engine's cluster client (see Redis.Client), or nil while the
// engine is not open yet.
func (l *LazyRedis) Client() rueidis.Client {
	if e := l.eng.Load(); e != nil {
		return e.c
	}
	return nil
}

// KeyPrefix returns the prefix every key of the engine starts with.
func (l *LazyRedis) KeyPrefix() string { return l.opts.KeyPrefix }

// engine returns the open engine or the ErrUnavailable of a call made before it opened.
func (l *LazyRedis) engine() (*Redis, error) {
	if e := l.eng.Load(); e != nil {
		return e, nil
	}
	return nil, fmt.Errorf("store: redis not connected yet: %w", ErrUnavailable)
}

// Check reports whether the store can serve now: nil, or an ErrUnavailable whose text says
// why in words (see RedisReason).
func (l *LazyRedis) Check(ctx context.Context) error {
	e := l.eng.Load()
	if e == nil {
		return fmt.Errorf("%w: not connected yet: %s", ErrUnavailable, RedisReason(*l.lastErr.Load()))
	}
	return e.Check(ctx)
}

// Close stops the background attempts and closes the engine if it opened.
func (l *LazyRedis) Close() error {
	close(l.stop)
	<-l.done
	if e := l.eng.Load(); e != nil {
		return e.Close()
	}
	return nil
}

// Check asks a node of the cluster for its state: nil when the cluster serves every slot,
// else an ErrUnavailable whose text says why in words (see RedisReason). A standalone
// server is asked for a PING.
func (s *Redis) Check(ctx context.Context) error {
	info, err := s.c.Do(ctx, s.c.B().ClusterInfo().Build()).ToString()
	if re, ok := rueidis.IsRedisErr(err); ok && strings.Contains(re.Error(), "cluster support disabled") {
		err = s.c.Do(ctx, s.c.B().Ping().Build()).Error()
		info = "cluster_state:ok"
	}
	if err != nil {
		return fmt.Errorf("%w: %s", ErrUnavailable, RedisReason(err))
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return fmt.Errorf("%w: the redis cluster does not serve every slot (cluster_state not ok)", ErrUnavailable)
	}
	return nil
}

// RedisReason says in words why a call to Redis failed, for a probe's answer or a status
// page: no address, no key and no secret, only the kind of failure.
func RedisReason(err error) string {
	var ne net.Error
	var re *rueidis.RedisError
	switch {
	case err == nil:
		return "no error"
	case errors.As(err, &re):
		return redisReplyReason(re)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "redis refused the connection (no server on the port)"
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "redis did not answer in time"
	case errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET):
		return "redis closed the connection"
	}
	return "redis is unreachable"
}

// redisReplyReason names an error reply by its kind, the first word Redis gives it.
func redisReplyReason(re *rueidis.RedisError) string {
	msg := re.Error()
	kind, _, _ := strings.Cut(msg, " ")
	switch {
	case kind == "WRONGPASS" || kind == "NOAUTH" || kind == "NOPERM" || strings.Contains(msg, "AUTH"):
		return "redis refused the credentials (" + kind + ")"
	case re.IsClusterDown():
		return "the redis cluster is down (CLUSTERDOWN)"
	case re.IsLoading():
		return "redis is loading its data (LOADING)"
	}
	if len(kind) > 32 {
		kind = kind[:32]
	}
	return "redis answered an error (" + kind + ")"
}

// The Store methods: the engine's, or ErrUnavailable while it is not open.

// PutResponse is Redis.PutResponse.
func (l *LazyRedis) PutResponse(r Response) error {
	e, err := l.engine()
	if err != nil {
		return err
	}
	return e.PutResponse(r)
}

// GetResponse is Redis.GetResponse.
func (l *LazyRedis) GetResponse(id string) (Response, error) {
	e, err := l.engine()
	if err != nil {
		return Response{}, err
	}
	return e.GetResponse(id)
}

// DeleteResponse is Redis.DeleteResponse.
func (l *LazyRedis) DeleteResponse(id string) error {
	e, err := l.engine()
	if err != nil {
		return err
	}
	return e.DeleteResponse(id)
}

// ReclaimResponses is Redis.ReclaimResponses. Expiry is native to Redis, so before the
// engine opens there is nothing to reclaim either: it returns 0 and no error, and a
// janitor does not log a failure a minute while Redis is down.
func (l *LazyRedis) ReclaimResponses(createdBefore time.Time) (int, error) {
	if e := l.eng.Load(); e != nil {
		return e.ReclaimResponses(createdBefore)
	}
	return 0, nil
}

// PutFile is Redis.PutFile.
func (l *LazyRedis) PutFile(f File, r io.Reader, maxSize int64) (File, error) {
	e, err := l.engine()
	if err != nil {
		return File{}, err
	}
	return e.PutFile(f, r, maxSize)
}

// GetFile is Redis.GetFile.
func (l *LazyRedis) GetFile(owner, id string, now time.Time) (File, error) {
	e, err := l.engine()
	if err != nil {
		return File{}, err
	}
	return e.GetFile(owner, id, now)
}

// AppendFileData is Redis.AppendFileData.
func (l *LazyRedis) AppendFileData(dst []byte, owner, id string, now time.Time) ([]byte, error) {
	e, err := l.engine()
	if err != nil {
		return dst, err
	}
	return e.AppendFileData(dst, owner, id, now)
}

// DeleteFile is Redis.DeleteFile.
func (l *LazyRedis) DeleteFile(owner, id string) error {
	e, err := l.engine()
	if err != nil {
		return err
	}
	return e.DeleteFile(owner, id)
}

// ListFiles is Redis.ListFiles.
func (l *LazyRedis) ListFiles(owner string, q ListQuery) ([]File, bool, error) {
	e, err := l.engine()
	if err != nil {
		return nil, false, err
	}
	return e.ListFiles(owner, q)
}

// ReclaimExpired is Redis.ReclaimExpired; like ReclaimResponses, 0 and no error before
// the engine opens.
func (l *LazyRedis) ReclaimExpired(now time.Time) (int, error) {
	if e := l.eng.Load(); e != nil {
		return e.ReclaimExpired(now)
	}
	return 0, nil
}

// FileStats is Redis.FileStats; zeros while the engine is not open.
func (l *LazyRedis) FileStats() (count int64, bytes int64) {
	if e := l.eng.Load(); e != nil {
		return e.FileStats()
	}
	return 0, 0
}
