package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelgate/gateway/store/redistest"
	"github.com/modelgate/gateway/store/s3test"
)

// The conformance suite runs on Blobs too, over each records engine, with the bytes on a
// real S3 server (versitygw, started through scripts/s3-server.sh) in a bucket of its own
// per test.

// testS3 is the S3 server of the test process, started once on first use.
var testS3 = s3test.Server{Port: 7411}

// blobEngine is inner with the file bytes in object storage.
func blobEngine(inner *engine) *engine {
	return &engine{name: inner.name + "+s3", nativeExpiry: inner.nativeExpiry,
		newEnv: func(t testing.TB, o envOptions) storeEnv {
			return newBlobEnv(t, inner.newEnv(t, o))
		}}
}

// blobEnv is a records engine's environment and a bucket.
type blobEnv struct {
	t        testing.TB
	inner    storeEnv
	endpoint string
	opts     S3Options
}

var blobPrefixSeq atomic.Int64

func newBlobEnv(t testing.TB, inner storeEnv) *blobEnv {
	t.Helper()
	endpoint := testS3.Endpoint(t)
	return &blobEnv{t: t, inner: inner, endpoint: endpoint, opts: S3Options{
		Endpoint: endpoint, Bucket: testS3.Bucket(t), Region: "us-east-1",
		Prefix:    fmt.Sprintf("files-%d/", blobPrefixSeq.Add(1)),
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, PathStyle: true}}
}

func (b *blobEnv) wrap(records Store) Store {
	b.t.Helper()
	s, err := OpenBlobs(records, b.opts)
	if err != nil {
		b.t.Fatalf("OpenBlobs: %v", err)
	}
	return s
}

func (b *blobEnv) open() Store          { return b.wrap(b.inner.open()) }
func (b *blobEnv) reopen(s Store) Store { return b.wrap(b.inner.reopen(s.(*Blobs).records)) }
func (b *blobEnv) objects() []string {
	return s3test.Objects(b.t, b.endpoint, b.opts.Bucket, b.opts.Prefix)
}
func (b *blobEnv) allKeys(s Store) []string {
	keys := b.inner.allKeys(s.(*Blobs).records)
	for _, o := range b.objects() {
		keys = append(keys, "s3:"+o)
	}
	return keys
}

// fileKeys adds the file's object, when it exists, to the records engine's keys.
func (b *blobEnv) fileKeys(s Store, owner, id string) []string {
	keys := b.inner.fileKeys(s.(*Blobs).records, owner, id)
	name := s.(*Blobs).obj.objectName(owner, id)
	if slices.Contains(b.objects(), name) {
		keys = append(keys, "s3:"+name)
	}
	return keys
}

// pebbleOf returns the Pebble engine that holds s's records, or nil.
func pebbleOf(s Store) *Pebble {
	if b, ok := s.(*Blobs); ok {
		s = b.records
	}
	p, _ := s.(*Pebble)
	return p
}

// blobEngines are the Blobs engines of the conformance suite.
func blobEngines() []*engine {
	var out []*engine
	for _, e := range engines() {
		if len(e.name) > 3 && e.name[len(e.name)-3:] == "+s3" {
			out = append(out, e)
		}
	}
	return out
}

// forBlobEngines runs f against Blobs over each records engine.
func forBlobEngines(t *testing.T, f func(t *testing.T, e *blobEnv, s *Blobs)) {
	for _, eng := range blobEngines() {
		t.Run(eng.name, func(t *testing.T) {
			e := eng.newEnv(t, envOptions{chunkSize: testChunk}).(*blobEnv)
			f(t, e, e.open().(*Blobs))
		})
	}
}

// TestBlobsMultipart stores files over one part (a multipart upload) and of exactly one
// part, reads them back whole, and deletes them, object included.
func TestBlobsMultipart(t *testing.T) {
	forBlobEngines(t, func(t *testing.T, e *blobEnv, s *Blobs) {
		for _, size := range []int{DefaultS3PartSize, 2*DefaultS3PartSize + 12345, 0} {
			data := testData(uint64(size), size)
			f := putFile(t, s, newFile("team-a", "big.bin"), data)
			got, err := s.AppendFileData([]byte("head"), "team-a", f.ID, t0)
			if err != nil || !bytes.Equal(got[4:], data) || string(got[:4]) != "head" {
				t.Fatalf("size %d: AppendFileData = %d bytes, %v", size, len(got), err)
			}
			if err := s.DeleteFile("team-a", f.ID); err != nil {
				t.Fatal(err)
			}
			if keys := e.fileKeys(s, "team-a", f.ID); len(keys) != 0 {
				t.Fatalf("size %d: delete left %q", size, keys)
			}
		}
	})
}

// TestBlobsRecordHoldsNoBytes checks that the records engine holds no byte of the file.
func TestBlobsRecordHoldsNoBytes(t *testing.T) {
	forBlobEngines(t, func(t *testing.T, e *blobEnv, s *Blobs) {
		data := testData(7, 100000)
		f := putFile(t, s, newFile("team-a", "a.bin"), data)
		keys := e.inner.fileKeys(s.records, "team-a", f.ID)
		if pe := pebbleOf(s); pe != nil {
			if chunks := pe.rawKeys(t, prefixFileData); len(chunks) != 0 {
				t.Fatalf("pebble holds chunks %q", chunks)
			}
		} else if r := s.records.(*Redis); slices.Contains(keys, r.fileKeys("team-a", f.ID).data) {
			t.Fatalf("redis holds a data key: %q", keys)
		}
		if !slices.Contains(e.objects(), s.obj.objectName("team-a", f.ID)) {
			t.Fatalf("no object for %s in %q", f.ID, e.objects())
		}
	})
}

// TestBlobsCommitFailureLeavesNothing fails the record's commit after the object is
// written: PutFile fails, nothing is visible, and the object is removed.
func TestBlobsCommitFailureLeavesNothing(t *testing.T) {
	forBlobEngines(t, func(t *testing.T, e *blobEnv, s *Blobs) {
		boom := errors.New("boom")
		s.failCommit = func(*File) error { return boom }
		f := newFile("team-a", "a.bin")
		f.ID = NewFileID(t0)
		if _, err := s.PutFile(f, bytes.NewReader(testData(1, 1000)), 1<<20); !errors.Is(err, boom) {
			t.Fatalf("PutFile = %v, want boom", err)
		}
		if keys := e.fileKeys(s, "team-a", f.ID); len(keys) != 0 {
			t.Fatalf("failed upload left %q", keys)
		}
		files, _, err := s.ListFiles("team-a", ListQuery{Now: t0, Limit: 10})
		if err != nil || len(files) != 0 {
			t.Fatalf("ListFiles = %v, %v", files, err)
		}
		s.failCommit = nil
		putFile(t, s, f, []byte("retry")) // the id is free again
	})
}

// TestBlobsOrphanSwept leaves what a crash between the object and the record leaves (an
// object no record names), and checks that the sweep removes it once it is older than the
// grace, counts it, and leaves committed files alone.
func TestBlobsOrphanSwept(t *testing.T) {
	forBlobEngines(t, func(t *testing.T, e *blobEnv, s *Blobs) {
		keep := putFile(t, s, newFile("team-a", "keep.bin"), testData(2, 3000))
		id := NewFileID(t0)
		u, err := s.beginUpload(&File{ID: id, Owner: "team-a"})
		if err != nil {
			t.Fatal(err)
		}
		if err := u.put(0, testData(3, 500)); err != nil { // the object is written...
			t.Fatal(err)
		}
		u.end() // ...and the process dies before the record: no commit, no abort
		if _, err := s.GetFile("team-a", id, t0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("orphan visible: %v", err)
		}
		// Within the grace the object may be an upload in progress: it stays.
		if _, err := s.ReclaimExpired(time.Now()); err != nil {
			t.Fatal(err)
		}
		if len(e.objects()) != 2 || s.OrphansRemoved() != 0 {
			t.Fatalf("objects within the grace %q, orphans %d", e.objects(), s.OrphansRemoved())
		}
		later := time.Now().Add(DefaultOrphanGrace + time.Minute)
		if _, err := s.ReclaimExpired(later); err != nil {
			t.Fatal(err)
		}
		if objs := e.objects(); len(objs) != 1 || objs[0] != s.obj.objectName("team-a", keep.ID) {
			t.Fatalf("objects after the sweep %q", objs)
		}
		if n := s.OrphansRemoved(); n != 1 {
			t.Fatalf("OrphansRemoved = %d, want 1", n)
		}
		if data, err := s.AppendFileData(nil, "team-a", keep.ID, later); err != nil || !bytes.Equal(data, testData(2, 3000)) {
			t.Fatalf("kept file: %v", err)
		}
	})
}

// TestBlobsSweepBudget checks that a sweep looks at SweepBudget objects and the next one
// resumes after them, so every orphan goes within a bounded number of sweeps.
func TestBlobsSweepBudget(t *testing.T) {
	forBlobEngines(t, func(t *testing.T, e *blobEnv, s *Blobs) {
		s.obj.opts.SweepBudget = 2
		for i := range 5 {
			u, err := s.beginUpload(&File{ID: NewFileID(t0), Owner: fmt.Sprintf("o%d", i)})
			if err != nil {
				t.Fatal(err)
			}
			if err := u.put(0, []byte("x")); err != nil {
				t.Fatal(err)
			}
			u.end()
		}
		later := time.Now().Add(DefaultOrphanGrace + time.Minute)
		for i, want := range []int{2, 2, 1, 0} {
			n, err := s.sweep(later)
			if err != nil || n != want {
				t.Fatalf("sweep %d = %d, %v; want %d", i, n, err, want)
			}
		}
		if objs := e.objects(); len(objs) != 0 {
			t.Fatalf("objects left %q", objs)
		}
	})
}

// TestBlobsUnavailable stops the S3 server: uploads and reads of bytes fail with
// ErrUnavailable, while metadata, listings, deletes and Responses records keep working.
// It runs last on the shared server and starts it again.
func TestBlobsUnavailable(t *testing.T) {
	forBlobEngines(t, func(t *testing.T, e *blobEnv, s *Blobs) {
		f := putFile(t, s, newFile("team-a", "a.bin"), testData(1, 1000))
		g := putFile(t, s, newFile("team-a", "b.bin"), testData(2, 1000))
		testS3.Kill(t)
		defer testS3.Restart(t)
		if _, err := s.PutFile(newFile("team-a", "c.bin"), bytes.NewReader(testData(3, 10)), 1<<20); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("PutFile with S3 down = %v, want ErrUnavailable", err)
		}
		if _, err := s.AppendFileData(nil, "team-a", f.ID, t0); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("AppendFileData with S3 down = %v, want ErrUnavailable", err)
		}
		if _, err := s.GetFile("team-a", f.ID, t0); err != nil {
			t.Fatalf("GetFile with S3 down: %v", err)
		}
		if files, _, err := s.ListFiles("team-a", ListQuery{Now: t0, Limit: 10}); err != nil || len(files) != 2 {
			t.Fatalf("ListFiles with S3 down = %d, %v", len(files), err)
		}
		if err := s.PutResponse(Response{ID: "resp_1", Owner: "k", Model: "m", Deployment: "d", Created: t0}); err != nil {
			t.Fatalf("PutResponse with S3 down: %v", err)
		}
		if err := s.DeleteFile("team-a", g.ID); err != nil {
			t.Fatalf("DeleteFile with S3 down: %v", err)
		}
		testS3.Restart(t)
		if data, err := s.AppendFileData(nil, "team-a", f.ID, t0); err != nil || !bytes.Equal(data, testData(1, 1000)) {
			t.Fatalf("AppendFileData after S3 is back: %v", err)
		}
		// The deleted file's object is an orphan now, and swept.
		if _, err := s.ReclaimExpired(time.Now().Add(DefaultOrphanGrace + time.Minute)); err != nil {
			t.Fatal(err)
		}
		if objs := e.objects(); len(objs) != 1 {
			t.Fatalf("objects %q; want the one of %s", objs, f.ID)
		}
	})
}

// TestBlobsRedisMemoryFigures measures what Redis holds per stored file when the bytes are
// in object storage, as TestRedisMemoryFigures measures it without (docs/multi-node.md):
// used_memory of the masters before and after files of 1 KiB and of 1 MiB. The goal is
// under 2 KiB per file whatever its size. It writes about 200 MiB to the S3 server, so it
// runs only when asked:
//
//	STORE_REDIS_MEMORY=1 go test -count=1 -run TestBlobsRedisMemoryFigures -v ./store/
func TestBlobsRedisMemoryFigures(t *testing.T) {
	if os.Getenv("STORE_REDIS_MEMORY") == "" {
		t.Skip("set STORE_REDIS_MEMORY=1 to measure Redis memory")
	}
	inner := newRedisEnv(t, envOptions{}).(*redisEnv)
	e := newBlobEnv(t, inner)
	s := e.open().(*Blobs)
	c := redistest.Client(t, inner.opts.Addrs)
	for _, m := range []struct{ files, size int }{{2000, 1 << 10}, {200, 1 << 20}} {
		data := testData(1, m.size)
		before := mastersMemory(t, c)
		for range m.files {
			putFile(t, s, File{Owner: "mem", Filename: "photo.png", MimeType: "image/png", Created: t0}, data)
		}
		perFile := (mastersMemory(t, c) - before) / int64(m.files)
		t.Logf("files of %d bytes with blobs: %d bytes of Redis memory per file", m.size, perFile)
		if perFile >= 2<<10 {
			t.Errorf("files of %d bytes: %d bytes of Redis memory per file, want under 2 KiB", m.size, perFile)
		}
	}
}

// TestBlobsRecordCommitReplyLost loses the reply of the record's commit on Redis, after the
// object is written: an upload answered a success reads back whole, one answered a failure
// is not listed once ReclaimExpired has taken back what Redis could not be told at once, and
// leaves neither record nor object.
func TestBlobsRecordCommitReplyLost(t *testing.T) {
	forBlobEngines(t, func(t *testing.T, e *blobEnv, s *Blobs) {
		r, ok := s.records.(*Redis)
		if !ok {
			t.Skip("the records are not on Redis")
		}
		f := func(faults map[*luaScript]evalFault, wantErr bool) {
			t.Helper()
			r.testFault = func(sc *luaScript) evalFault { return faults[sc] }
			file := newFile("team-a", "a.bin")
			file.ID = NewFileID(t0)
			data := testData(3, 1000)
			_, err := s.PutFile(file, bytes.NewReader(data), 1<<20)
			r.testFault = nil
			if (err != nil) != wantErr {
				t.Fatalf("PutFile = %v, want an error: %v", err, wantErr)
			}
			if !wantErr {
				if got, err := s.AppendFileData(nil, "team-a", file.ID, t0); err != nil || !bytes.Equal(got, data) {
					t.Fatalf("AppendFileData = %d bytes, %v", len(got), err)
				}
				return
			}
			if _, err := s.ReclaimExpired(t0); err != nil {
				t.Fatal(err)
			}
			if keys := e.fileKeys(s, "team-a", file.ID); len(keys) != 0 {
				t.Fatalf("failed upload left %q", keys)
			}
			files, _, err := s.ListFiles("team-a", ListQuery{Now: t0, Limit: 100})
			if err != nil || slices.ContainsFunc(files, func(g File) bool { return g.ID == file.ID }) {
				t.Fatalf("ListFiles = %v, %v: lists the failed upload", files, err)
			}
		}
		f(map[*luaScript]evalFault{commitScript: faultLostReply}, false)
		f(map[*luaScript]evalFault{commitScript: faultLostReply, settleScript: faultUnsent, dropScript: faultUnsent}, true)
	})
}
