package store

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/gateway/store/redistest"
)

// The conformance suite: every test that takes an *engine runs against each engine with the
// same expectations (TestConformance). Pebble runs on a disk directory; Redis on a real
// Redis Cluster of 6 nodes on loopback that the first Redis test starts through
// scripts/redis-cluster.sh (installing redis when missing), with a key prefix of its own per
// test. The cluster is stopped when the test process ends, unless it was running before.

// engine opens stores of one kind.
type engine struct {
	name string
	// newEnv returns the environment of one test: a fresh, empty store to open and reopen.
	newEnv func(t testing.TB, o envOptions) storeEnv
	// nativeExpiry: the engine removes expired records by itself and its Reclaim methods
	// do nothing.
	nativeExpiry bool
}

// envOptions are the options both engines take.
type envOptions struct {
	chunkSize int
	now       func() time.Time
}

// storeEnv is one test's store, opened and reopened on the same data.
type storeEnv interface {
	open() Store
	reopen(s Store) Store
	// allKeys returns every raw key of the store.
	allKeys(s Store) []string
	// fileKeys returns every raw key (and index entry) that belongs to owner's id.
	fileKeys(s Store, owner, id string) []string
}

func engines() []*engine {
	base := []*engine{
		{name: "pebble", newEnv: func(t testing.TB, o envOptions) storeEnv {
			return pebbleEnv{newDiskEnv(t, PebbleOptions{ChunkSize: o.chunkSize, Now: o.now})}
		}},
		{name: "redis", newEnv: newRedisEnv, nativeExpiry: true},
	}
	return append(base, blobEngine(base[0]), blobEngine(base[1]))
}

// conformance lists the tests of the suite.
var conformance = []struct {
	name string
	f    func(t *testing.T, e *engine)
}{
	{"ResponsePutGetDelete", testResponsePutGetDelete},
	{"ResponseInvalid", testResponseInvalid},
	{"FilePutGetDataDelete", testFilePutGetDataDelete},
	{"FileOwnerIsolation", testFileOwnerIsolation},
	{"FileCallerChosenID", testFileCallerChosenID},
	{"FileInvalidArguments", testFileInvalidArguments},
	{"FileFailedUploadLeavesNothing", testFileFailedUploadLeavesNothing},
	{"FileExpiry", testFileExpiry},
	{"FileStatsAcrossOperations", testFileStatsAcrossOperations},
	{"FileConcurrent", testFileConcurrent},
	{"FileFinisherSetsExpiry", testFileFinisherSetsExpiry},
	{"FileFinisherFailureLeavesNothing", testFileFinisherFailureLeavesNothing},
	{"FileWithoutFinisher", testFileWithoutFinisher},
	{"ListFilesAgainstModel", testListFilesAgainstModel},
	{"ListFilesPaging", testListFilesPaging},
	{"ListFilesIDs", testListFilesIDs},
	{"ListFilesLimit", testListFilesLimit},
}

func TestConformance(t *testing.T) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			for _, c := range conformance {
				t.Run(c.name, func(t *testing.T) { c.f(t, e) })
			}
		})
	}
}

// pebbleEnv is a Pebble store in a disk directory.
type pebbleEnv struct{ e *testEnv }

func (p pebbleEnv) open() Store              { return p.e.open() }
func (p pebbleEnv) reopen(s Store) Store     { return p.e.reopen(s.(*Pebble)) }
func (p pebbleEnv) allKeys(s Store) []string { return s.(*Pebble).rawKeys(p.e.t, "") }
func (p pebbleEnv) fileKeys(s Store, owner, id string) []string {
	return s.(*Pebble).fileKeys(p.e.t, owner, id)
}

// redisEnv is a key prefix of its own on the shared test cluster.
type redisEnv struct {
	t    testing.TB
	opts RedisOptions
}

var redisPrefixSeq atomic.Int64

func newRedisEnv(t testing.TB, o envOptions) storeEnv {
	t.Helper()
	addrs := testCluster.Addrs(t)
	prefix := fmt.Sprintf("test:%d:%d:", os.Getpid(), redisPrefixSeq.Add(1))
	return &redisEnv{t: t, opts: RedisOptions{Addrs: addrs, KeyPrefix: prefix, Replicas: 1,
		WaitTimeout: 10 * time.Second, ChunkSize: o.chunkSize, Now: o.now}}
}

func (r *redisEnv) open() Store {
	r.t.Helper()
	s, err := OpenRedis(r.opts)
	if err != nil {
		r.t.Fatalf("OpenRedis: %v", err)
	}
	r.t.Cleanup(func() { s.Close() }) // a second Close does no harm
	return s
}

// reopen closes s and connects again: what Redis holds is what the next node would see.
func (r *redisEnv) reopen(s Store) Store {
	r.t.Helper()
	if err := s.Close(); err != nil {
		r.t.Fatalf("Close: %v", err)
	}
	return r.open()
}

// allKeys scans every master for the keys of the prefix. The file counters are left out:
// they are the store's own bookkeeping, not a record.
func (r *redisEnv) allKeys(s Store) []string {
	r.t.Helper()
	c := s.(*Redis).c
	var keys []string
	for _, node := range c.Nodes() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(r.opts.KeyPrefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				r.t.Fatalf("SCAN: %v", err)
			}
			keys = append(keys, e.Elements...)
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys) // a replica answers with its master's keys
	return slices.DeleteFunc(keys, func(k string) bool { return k == r.opts.KeyPrefix+"stats" })
}

// fileKeys returns the file's keys that exist and its index entries.
func (r *redisEnv) fileKeys(s Store, owner, id string) []string {
	r.t.Helper()
	rs := s.(*Redis)
	k := rs.fileKeys(owner, id)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var keys []string
	for _, key := range []string{k.meta, k.data, k.claim, k.staging} {
		n, err := rs.c.Do(ctx, rs.c.B().Exists().Key(key).Build()).AsInt64()
		if err != nil {
			r.t.Fatalf("EXISTS: %v", err)
		}
		if n == 1 {
			keys = append(keys, key)
		}
	}
	entries, err := rs.c.Do(ctx, rs.c.B().Zrangebylex().Key(k.index).Min("["+id+":").Max("("+id+";").Build()).AsStrSlice()
	if err != nil {
		r.t.Fatalf("ZRANGEBYLEX: %v", err)
	}
	for _, e := range entries {
		keys = append(keys, k.index+" "+e)
	}
	return keys
}

// testCluster is the Redis Cluster of the test process, started once on first use.
var testCluster = redistest.Cluster{Port: 7101}

func TestMain(m *testing.M) {
	code := m.Run()
	testCluster.Stop()
	testS3.Stop()
	os.Exit(code)
}
