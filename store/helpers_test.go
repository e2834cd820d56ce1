package store

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// quietLogger drops Pebble's log lines in tests.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic("pebble fatal: " + format)
}

// testEnv is a store directory that tests open, close and reopen.
type testEnv struct {
	t    testing.TB
	dir  string
	opts PebbleOptions
}

// newDiskEnv returns an environment on a real disk directory.
func newDiskEnv(t testing.TB, opts PebbleOptions) *testEnv {
	t.Helper()
	opts.Logger = quietLogger{}
	return &testEnv{t: t, dir: t.TempDir(), opts: opts}
}

// newMemEnv returns an environment on an in-memory file system.
func newMemEnv(t testing.TB, opts PebbleOptions) *testEnv {
	t.Helper()
	opts.FS = vfs.NewMem()
	opts.Logger = quietLogger{}
	return &testEnv{t: t, dir: "db", opts: opts}
}

// open opens the store and closes it when the test ends, unless the test closed it.
func (e *testEnv) open() *Pebble {
	e.t.Helper()
	p, err := OpenPebble(e.dir, e.opts)
	if err != nil {
		e.t.Fatalf("OpenPebble: %v", err)
	}
	e.t.Cleanup(func() {
		if !p.closed.Load() {
			p.Close()
		}
	})
	return p
}

// reopen closes p and opens the store again.
func (e *testEnv) reopen(p *Pebble) *Pebble {
	e.t.Helper()
	if err := p.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	return e.open()
}

// rawKeys returns every key of the database that starts with prefix.
func (p *Pebble) rawKeys(t testing.TB, prefix string) []string {
	t.Helper()
	var lo []byte // nil, not empty, for no bound: race builds of Pebble reject empty keys
	if prefix != "" {
		lo = []byte(prefix)
	}
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		t.Fatalf("NewIter: %v", err)
	}
	defer it.Close()
	var keys []string
	for ok := it.First(); ok; ok = it.Next() {
		keys = append(keys, string(it.Key()))
	}
	if err := it.Error(); err != nil {
		t.Fatalf("iterate: %v", err)
	}
	return keys
}

// fileKeys returns every raw key (meta, data, expiry) that belongs to owner's id.
func (p *Pebble) fileKeys(t testing.TB, owner, id string) []string {
	t.Helper()
	var keys []string
	keys = append(keys, p.rawKeys(t, string(appendFileKey(nil, owner, id)))...)
	keys = append(keys, p.rawKeys(t, string(appendChunkPrefix(nil, owner, id)))...)
	for _, k := range p.rawKeys(t, prefixFileExpiry) {
		if _, o, i, ok := parseExpiryKey([]byte(k)); !ok || (string(o) == owner && string(i) == id) {
			keys = append(keys, k)
		}
	}
	return keys
}

// testData returns size deterministic pseudo-random bytes of seed.
func testData(seed uint64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 6789, time.UTC)

// putFile uploads data for owner and fails the test on error.
func putFile(t testing.TB, p Store, f File, data []byte) File {
	t.Helper()
	got, err := p.PutFile(f, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatalf("PutFile(%q): %v", f.Filename, err)
	}
	return got
}

// wantNotFound fails the test unless err is ErrNotFound.
func wantNotFound(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("%s: got error %v, want ErrNotFound", what, err)
	}
}

// sameFile fails the test unless got and want hold equal fields (times compared by Equal).
func sameFile(t testing.TB, got, want File) {
	t.Helper()
	if got.ID != want.ID || got.Owner != want.Owner || got.Filename != want.Filename ||
		got.MimeType != want.MimeType || got.Purpose != want.Purpose || got.Size != want.Size ||
		!got.Created.Equal(want.Created) || !got.Expires.Equal(want.Expires) {
		t.Fatalf("file mismatch:\n got  %+v\n want %+v", got, want)
	}
}

// crashedUpload writes data as an upload of owner's id that a crash cut before its commit:
// begun and chunked, never committed nor aborted.
func crashedUpload(t testing.TB, begin func(*File) (upload, error), chunkSize int, owner, id string, data []byte) {
	t.Helper()
	u, err := begin(&File{Owner: owner, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeChunks(u, bytes.NewReader(data), 1<<20, chunkSize); err != nil {
		t.Fatalf("writeChunks: %v", err)
	}
	// The crash comes at the worst moment: every chunk is in the store, the metadata is not.
	if pu, ok := u.(*pebbleUpload); ok {
		if err := pu.ingestTable(); err != nil {
			t.Fatalf("ingestTable: %v", err)
		}
	}
	u.end()
}
