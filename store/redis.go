package store

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Defaults of RedisOptions.
const (
	DefaultRedisWaitTimeout    = time.Second
	DefaultRedisDialTimeout    = 5 * time.Second
	DefaultRedisCommandTimeout = 5 * time.Second
	DefaultRedisResponseTTL    = 30 * 24 * time.Hour
	DefaultRedisUploadTTL      = 5 * time.Minute
)

// RedisChunkSize is the size of one stored chunk of file data: 64 bytes under 256 KiB, so a
// chunk and Redis' own header fit one 256 KiB allocation (one 8 MiB value costs 10 MiB).
const RedisChunkSize = 256<<10 - 64

// MaxRedisReplicas bounds RedisOptions.Replicas.
const MaxRedisReplicas = 16

// RedisOptions configures OpenRedis. The zero value means the defaults, except Addrs, which
// must name at least one node.
type RedisOptions struct {
	// Addrs are host:port addresses of cluster nodes (any subset: the client learns the rest)
	// or of one standalone server.
	Addrs []string
	// Username and Password authenticate with AUTH (ACL user, or the default user when
	// Username is empty); both empty means no AUTH.
	Username string
	Password string
	// TLS, when not nil, is the configuration of TLS connections to every node; nil means
	// plain TCP. The config layer builds it (CA file, server name, client certificate).
	TLS *tls.Config
	// KeyPrefix starts every key, so that several gateways or tests can share a cluster. It
	// must not hold '{' or '}', which would change the hash slots of the keys.
	KeyPrefix string
	// Replicas is how many replicas must hold a write before it is acknowledged (WAIT);
	// 0 acknowledges once the master has it. A write that fewer replicas confirm within
	// WaitTimeout fails with ErrUnavailable.
	Replicas int
	// WaitTimeout bounds WAIT; 0 means DefaultRedisWaitTimeout.
	WaitTimeout time.Duration
	// DialTimeout bounds connecting to a node; 0 means DefaultRedisDialTimeout.
	DialTimeout time.Duration
	// CommandTimeout bounds every call to Redis (WAIT aside); 0 means
	// DefaultRedisCommandTimeout.
	CommandTimeout time.Duration
	// ResponseTTL is the retention of an ownership record, counted from the PutResponse that
	// wrote it: Redis removes the record by itself then (ReclaimResponses does nothing).
	// 0 means DefaultRedisResponseTTL.
	ResponseTTL time.Duration
	// ChunkSize is the size of one stored chunk of file data and bounds the memory of one
	// upload; 0 means RedisChunkSize. Chunks are read back as stored, whatever it is later.
	ChunkSize int
	// UploadTTL is how long the chunks of an upload in progress live after the last chunk
	// written: an upload cut by a crash leaves them to expire by themselves. An upload whose
	// reader stalls longer than that fails. 0 means DefaultRedisUploadTTL.
	UploadTTL time.Duration
	// Now is the clock of DeleteFile's expiry check; nil means time.Now.
	Now func() time.Time
}

// EnsureDefaults fills the zero fields of o with their defaults.
func (o *RedisOptions) EnsureDefaults() {
	setDefault(&o.WaitTimeout, DefaultRedisWaitTimeout)
	setDefault(&o.DialTimeout, DefaultRedisDialTimeout)
	setDefault(&o.CommandTimeout, DefaultRedisCommandTimeout)
	setDefault(&o.ResponseTTL, DefaultRedisResponseTTL)
	setDefault(&o.UploadTTL, DefaultRedisUploadTTL)
	if o.ChunkSize == 0 {
		o.ChunkSize = RedisChunkSize
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// Validate reports the first field of o that is out of range.
func (o *RedisOptions) Validate() error {
	if len(o.Addrs) == 0 {
		return errors.New("store: Addrs is empty")
	}
	for _, a := range o.Addrs {
		if host, port, err := net.SplitHostPort(a); err != nil || host == "" || port == "" {
			return fmt.Errorf("store: Addrs: %q is not host:port", a)
		}
	}
	if strings.ContainsAny(o.KeyPrefix, "{}") {
		return fmt.Errorf("store: KeyPrefix %q holds a brace", o.KeyPrefix)
	}
	if o.Replicas < 0 || o.Replicas > MaxRedisReplicas {
		return fmt.Errorf("store: Replicas %d is out of range 0..%d", o.Replicas, MaxRedisReplicas)
	}
	if o.ChunkSize < MinChunkSize || o.ChunkSize > MaxChunkSize {
		return fmt.Errorf("store: ChunkSize %d is out of range %d..%d", o.ChunkSize, MinChunkSize, MaxChunkSize)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"WaitTimeout", o.WaitTimeout}, {"DialTimeout", o.DialTimeout}, {"CommandTimeout", o.CommandTimeout},
		{"ResponseTTL", o.ResponseTTL}, {"UploadTTL", o.UploadTTL}} {
		if d.v < time.Millisecond {
			return fmt.Errorf("store: %s %v is under 1ms", d.name, d.v)
		}
	}
	return nil
}

// Redis is the shared Store engine on a Redis Cluster (or one standalone server): every
// gateway node opens it on the same cluster and sees the same records and files.
//
// Key layout (P is KeyPrefix, T the lower-case hex of the owner, so a hash tag holds no brace
// and an owner's keys share one hash slot):
//
//	P r:<response id>        → response record (appendResponse), with a native TTL
//	P {T}f:<file id>         → file metadata (appendFileMeta), expiring at Expires
//	P {T}d:<file id>         → list of the file's chunks, expiring at Expires
//	P {T}i                   → sorted set of "<file id>:<size>", one score: the listing index
//	P {T}u:<file id>         → claim of an upload in progress (its token), short TTL
//	P {T}s:<file id>         → list of the chunks of an upload in progress, short TTL
//	P stats                  → hash of the file counters (files, bytes)
//
// Durability differs from Pebble's fsync: a write that returns nil is held by its master and
// by Replicas replicas (in memory, and on disk as their appendfsync says), so with Replicas 1
// or more it survives the loss of its master; with Replicas 0 a failover can lose it. A call
// that Redis cannot serve fails with ErrUnavailable.
//
// Create it with OpenRedis; the zero value is not usable. It is safe for concurrent use.
type Redis struct {
	c        rueidis.Client
	opts     RedisOptions
	statsKey string // KeyPrefix + "stats"

	mu        sync.Mutex
	unsettled []unsettledUpload // failed uploads Redis did not confirm removed (see dropLater)

	testFault func(sc *luaScript) evalFault // nil outside tests
}

var _ Store = (*Redis)(nil)

// OpenRedis connects to the nodes of opts.Addrs. It fails with ErrUnavailable when none
// answers.
func OpenRedis(opts RedisOptions) (*Redis, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:      opts.Addrs,
		Username:         opts.Username,
		Password:         opts.Password,
		TLSConfig:        opts.TLS,
		Dialer:           net.Dialer{Timeout: opts.DialTimeout},
		ConnWriteTimeout: opts.CommandTimeout,
		ShuffleInit:      true,
		DisableCache:     true,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot connect to redis %q: %w (%w)", opts.Addrs, ErrUnavailable, err)
	}
	return &Redis{c: c, opts: opts, statsKey: opts.KeyPrefix + "stats"}, nil
}

// Client returns the engine's cluster client, so that other shared state of
// the gateway (rate-limit counters) uses the same connections. Keys written
// through it should start with KeyPrefix.
func (s *Redis) Client() rueidis.Client { return s.c }

// KeyPrefix returns the prefix every key of this engine starts with.
func (s *Redis) KeyPrefix() string { return s.opts.KeyPrefix }

// Close closes the connections.
func (s *Redis) Close() error {
	s.c.Close()
	return nil
}

// ctx returns the context of one call, bounded by CommandTimeout (and WaitTimeout when the
// call waits for replicas).
func (s *Redis) ctx() (context.Context, context.CancelFunc) {
	d := s.opts.CommandTimeout
	if s.opts.Replicas > 0 {
		d += s.opts.WaitTimeout
	}
	return context.WithTimeout(context.Background(), d)
}

// redisErr wraps an error of the client for the call what: a reply of Redis that says the
// cluster cannot serve now, and every network or time-out error, wrap ErrUnavailable.
func redisErr(what string, err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok && !transientRedisErr(re) {
		return fmt.Errorf("cannot %s: %w", what, err)
	}
	return fmt.Errorf("cannot %s: %w (%w)", what, ErrUnavailable, err)
}

// transientRedisErr reports a reply that a healthy cluster would not give: the cluster is
// down, a slot is migrating or loading, or the node lost its master.
func transientRedisErr(re *rueidis.RedisError) bool {
	if re.IsClusterDown() || re.IsTryAgain() || re.IsLoading() {
		return true
	}
	msg := re.Error()
	for _, p := range []string{"READONLY", "MASTERDOWN", "NOREPLICAS", "MOVED", "ASK", "BUSY"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// waitCmd returns the WAIT that acknowledges the writes before it on the same connection.
func (s *Redis) waitCmd() rueidis.Completed {
	return s.c.B().Wait().Numreplicas(int64(s.opts.Replicas)).Timeout(s.opts.WaitTimeout.Milliseconds()).Build()
}

// checkWait checks the reply of WAIT: at least Replicas replicas hold the writes.
func (s *Redis) checkWait(what string, res rueidis.RedisResult) error {
	n, err := res.AsInt64()
	if err != nil {
		// Whatever WAIT failed with (a node that turned replica, a connection cut), the
		// write is not confirmed.
		return fmt.Errorf("cannot %s: %w (%w)", what, ErrUnavailable, err)
	}
	if n < int64(s.opts.Replicas) {
		return fmt.Errorf("cannot %s: %d of %d replicas hold the write: %w", what, n, s.opts.Replicas, ErrUnavailable)
	}
	return nil
}

// ownerTag returns the hash tag of owner's keys: "{" + hex(owner) + "}".
func ownerTag(owner string) string {
	return "{" + hex.EncodeToString([]byte(owner)) + "}"
}

// fileKeys are the keys of one file of one owner.
type fileKeys struct {
	meta, data, index, claim, staging string
}

func (s *Redis) fileKeys(owner, id string) fileKeys {
	base := s.opts.KeyPrefix + ownerTag(owner)
	return fileKeys{
		meta:    base + "f:" + id,
		data:    base + "d:" + id,
		index:   base + "i",
		claim:   base + "u:" + id,
		staging: base + "s:" + id,
	}
}

// FileStats returns the file counters of the cluster: files committed less files deleted or
// pruned. A file that expired counts until a listing of its owner prunes it from the index;
// a counter update lost to a failover is not repeated, so the figures are approximate. When
// Redis is unreachable it returns zeros.
func (s *Redis) FileStats() (count int64, bytes int64) {
	ctx, cancel := s.ctx()
	defer cancel()
	v, err := s.c.Do(ctx, s.c.B().Hmget().Key(s.statsKey).Field("files", "bytes").Build()).ToArray()
	if err != nil || len(v) != 2 {
		return 0, 0
	}
	count, _ = v[0].AsInt64()
	bytes, _ = v[1].AsInt64()
	return count, bytes
}

// addStats adds to the file counters; a failure is dropped (the counters are approximate).
func (s *Redis) addStats(files, bytes int64) {
	ctx, cancel := s.ctx()
	defer cancel()
	s.c.DoMulti(ctx,
		s.c.B().Hincrby().Key(s.statsKey).Field("files").Increment(files).Build(),
		s.c.B().Hincrby().Key(s.statsKey).Field("bytes").Increment(bytes).Build())
}
