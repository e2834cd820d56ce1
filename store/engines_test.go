package store

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
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
	return []*engine{
		{name: "pebble", newEnv: func(t testing.TB, o envOptions) storeEnv {
			return pebbleEnv{newDiskEnv(t, PebbleOptions{ChunkSize: o.chunkSize, Now: o.now})}
		}},
		{name: "redis", newEnv: newRedisEnv, nativeExpiry: true},
	}
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
	addrs := testCluster.addrs(t)
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
var testCluster = clusterOnce{port: 7101}

type clusterOnce struct {
	port    int
	once    sync.Once
	list    []string
	err     error
	started bool // by this process: stop it at the end
}

// clusterDir is the data directory of the cluster on port: fixed, so that a cluster a test
// process left running is found and reused.
func clusterDir(port int) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("gateway-redis-cluster-%d", port))
}

// clusterScript returns the path of scripts/redis-cluster.sh.
func clusterScript() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "scripts", "redis-cluster.sh")
}

// runCluster runs the script with cmd on the cluster of port, with env added to the
// environment, and returns its output.
func runCluster(cmd string, port int, env ...string) (string, error) {
	c := exec.Command("bash", clusterScript(), cmd, clusterDir(port))
	c.Env = append(os.Environ(), fmt.Sprintf("REDIS_CLUSTER_PORT=%d", port))
	c.Env = append(c.Env, env...)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		return "", fmt.Errorf("redis-cluster.sh %s: %v: %s", cmd, err, stderr.String())
	}
	return string(out), nil
}

// addrs returns the addresses of the cluster, starting it on first use; it skips the test
// when the cluster cannot be had (redis cannot be installed here).
func (c *clusterOnce) addrs(t testing.TB) []string {
	t.Helper()
	c.once.Do(func() {
		_, err := runCluster("status", c.port)
		running := err == nil
		out, err := runCluster("start", c.port)
		c.list, c.err = strings.Fields(out), err
		c.started = err == nil && !running
	})
	if c.err != nil {
		t.Skipf("no Redis Cluster for the Redis engine's tests: %v", c.err)
	}
	return c.list
}

// stop stops the cluster and removes its data if this process started it.
func (c *clusterOnce) stop() {
	if c.started {
		stopCluster(c.port)
	}
}

// stopCluster stops the cluster of port and removes its data directory.
func stopCluster(port int) error {
	if _, err := runCluster("stop", port); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return err
	}
	return os.RemoveAll(clusterDir(port))
}

func TestMain(m *testing.M) {
	code := m.Run()
	testCluster.stop()
	os.Exit(code)
}

// redisClient returns a plain client of the cluster for checks that go around the store.
func redisClient(t testing.TB, addrs []string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatalf("redis client: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}
