package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

const testChunk = 1024

func newFile(owner, name string) File {
	return File{Owner: owner, Filename: name, MimeType: "image/png", Purpose: "vision",
		Created: t0, Expires: t0.Add(24 * time.Hour)}
}

func testFilePutGetDataDelete(t *testing.T, eng *engine) {
	e := eng.newEnv(t, envOptions{chunkSize: testChunk})
	p := e.open()
	sizes := []int{0, 1, testChunk - 1, testChunk, testChunk + 1, 5*testChunk + 17}
	files := make([]File, len(sizes))
	for i, size := range sizes {
		f := newFile("team-a", fmt.Sprintf("f%d.png", i))
		got := putFile(t, p, f, testData(uint64(i), size))
		if !ValidFileID(got.ID) || got.Size != int64(size) {
			t.Fatalf("PutFile returned id %q size %d; want a valid id and size %d", got.ID, got.Size, size)
		}
		f.ID, f.Size = got.ID, int64(size)
		sameFile(t, got, f)
		files[i] = f
	}
	check := func(p Store) {
		t.Helper()
		for i, f := range files {
			got, err := p.GetFile("team-a", f.ID, t0)
			if err != nil {
				t.Fatalf("GetFile: %v", err)
			}
			sameFile(t, got, f)
			prefix := []byte("prefix")
			data, err := p.AppendFileData(prefix, "team-a", f.ID, t0)
			if err != nil {
				t.Fatalf("AppendFileData: %v", err)
			}
			if want := append([]byte("prefix"), testData(uint64(i), sizes[i])...); !bytes.Equal(data, want) {
				t.Fatalf("AppendFileData(size %d) returned %d bytes that differ", sizes[i], len(data))
			}
		}
	}
	check(p)
	p = e.reopen(p)
	check(p)

	victim := files[len(files)-1]
	if err := p.DeleteFile("team-a", victim.ID); err != nil {
		t.Fatalf("DeleteFile: %v", err)
	}
	_, err := p.GetFile("team-a", victim.ID, t0)
	wantNotFound(t, "GetFile(deleted)", err)
	_, err = p.AppendFileData(nil, "team-a", victim.ID, t0)
	wantNotFound(t, "AppendFileData(deleted)", err)
	wantNotFound(t, "DeleteFile(again)", p.DeleteFile("team-a", victim.ID))
	if keys := e.fileKeys(p, "team-a", victim.ID); len(keys) != 0 {
		t.Fatalf("deleted file left keys: %q", keys)
	}
	files = files[:len(files)-1]
	p = e.reopen(p)
	check(p)
	_, err = p.GetFile("team-a", victim.ID, t0)
	wantNotFound(t, "GetFile(deleted, reopened)", err)
}

func testFileOwnerIsolation(t *testing.T, eng *engine) {
	e := eng.newEnv(t, envOptions{chunkSize: testChunk})
	p := e.open()
	a := putFile(t, p, newFile("team-a", "a.png"), testData(1, 3000))
	// "team" is a prefix of "team-a": prefix scans must not mix them.
	for _, other := range []string{"team-b", "team", "team-a2", "TEAM-A"} {
		_, err := p.GetFile(other, a.ID, t0)
		wantNotFound(t, "GetFile("+other+")", err)
		_, err = p.AppendFileData(nil, other, a.ID, t0)
		wantNotFound(t, "AppendFileData("+other+")", err)
		wantNotFound(t, "DeleteFile("+other+")", p.DeleteFile(other, a.ID))
		files, more, err := p.ListFiles(other, ListQuery{Now: t0, Limit: 100})
		if err != nil || len(files) != 0 || more {
			t.Fatalf("ListFiles(%s) = %v, %v, %v; want nothing", other, files, more, err)
		}
		files, _, err = p.ListFiles(other, ListQuery{Now: t0, IDs: []string{a.ID}})
		if err != nil || len(files) != 0 {
			t.Fatalf("ListFiles(%s, IDs) = %v, %v; want nothing", other, files, err)
		}
	}
	if _, err := p.GetFile("team-a", a.ID, t0); err != nil {
		t.Fatalf("owner lost the file: %v", err)
	}
	files, _, err := p.ListFiles("team", ListQuery{Now: t0, Limit: 10, After: a.ID})
	if err != nil || len(files) != 0 {
		t.Fatalf("ListFiles(team, After) = %v, %v", files, err)
	}
}

func testFileCallerChosenID(t *testing.T, eng *engine) {
	e := eng.newEnv(t, envOptions{chunkSize: testChunk})
	p := e.open()
	id := NewFileID(t0)
	f := newFile("team-a", "a.png")
	f.ID = id
	if got := putFile(t, p, f, testData(1, 2500)); got.ID != id {
		t.Fatalf("PutFile changed the id to %q", got.ID)
	}
	if _, err := p.PutFile(f, strings.NewReader("x"), 10); !errors.Is(err, ErrExists) {
		t.Fatalf("PutFile(same id) error %v, want ErrExists", err)
	}
	// Another owner may use the same id: the two never touch each other.
	g := f
	g.Owner = "team-b"
	putFile(t, p, g, testData(2, 4000))
	if err := p.DeleteFile("team-b", id); err != nil {
		t.Fatalf("DeleteFile(team-b): %v", err)
	}
	data, err := p.AppendFileData(nil, "team-a", id, t0)
	if err != nil || !bytes.Equal(data, testData(1, 2500)) {
		t.Fatalf("team-a's file damaged by team-b's delete: %v", err)
	}
	for _, bad := range []string{"file_svc_x", strings.ToLower(id), "file_svc_8" + id[10:]} {
		f.ID = bad
		if _, err := p.PutFile(f, strings.NewReader("x"), 10); !errors.Is(err, ErrInvalid) {
			t.Fatalf("PutFile(id %q) error %v, want ErrInvalid", bad, err)
		}
	}
}

func testFileInvalidArguments(t *testing.T, eng *engine) {
	e := eng.newEnv(t, envOptions{})
	p := e.open()
	for _, owner := range []string{"", "a\x00b", strings.Repeat("o", MaxOwnerLen+1)} {
		if _, err := p.PutFile(newFile(owner, "x"), strings.NewReader("x"), 10); !errors.Is(err, ErrInvalid) {
			t.Fatalf("PutFile(owner %q) error %v, want ErrInvalid", owner, err)
		}
		if _, err := p.GetFile(owner, NewFileID(t0), t0); !errors.Is(err, ErrInvalid) {
			t.Fatalf("GetFile(owner %q) error %v, want ErrInvalid", owner, err)
		}
		if _, _, err := p.ListFiles(owner, ListQuery{Limit: 1}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("ListFiles(owner %q) error %v, want ErrInvalid", owner, err)
		}
		if err := p.DeleteFile(owner, NewFileID(t0)); !errors.Is(err, ErrInvalid) {
			t.Fatalf("DeleteFile(owner %q) error %v, want ErrInvalid", owner, err)
		}
	}
	f := newFile("o", strings.Repeat("n", MaxFieldLen+1))
	if _, err := p.PutFile(f, strings.NewReader("x"), 10); !errors.Is(err, ErrInvalid) {
		t.Fatalf("PutFile(long filename) error %v, want ErrInvalid", err)
	}
	if _, err := p.PutFile(newFile("o", "x"), strings.NewReader(""), -1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("PutFile(max -1) error %v, want ErrInvalid", err)
	}
	_, err := p.GetFile("o", "not-an-id", t0)
	wantNotFound(t, "GetFile(malformed id)", err)
	if keys := e.allKeys(p); len(keys) != 0 {
		t.Fatalf("invalid calls wrote keys: %q", keys)
	}
}

// failingReader yields n good bytes, then err.
type failingReader struct {
	n   int
	err error
}

func (r *failingReader) Read(b []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	m := min(len(b), r.n, 300) // small reads: chunks fill over several calls
	for i := range m {
		b[i] = 'z'
	}
	r.n -= m
	return m, nil
}

func testFileFailedUploadLeavesNothing(t *testing.T, eng *engine) {
	e := eng.newEnv(t, envOptions{chunkSize: testChunk})
	p := e.open()
	keep := putFile(t, p, newFile("team-a", "keep.png"), testData(9, 3000))
	boom := errors.New("boom")
	f := func(name string, r io.Reader, max int64, want error) {
		t.Helper()
		file := newFile("team-a", name)
		file.ID = NewFileID(t0)
		_, err := p.PutFile(file, r, max)
		if !errors.Is(err, want) {
			t.Fatalf("%s: PutFile error %v, want %v", name, err, want)
		}
		if keys := e.fileKeys(p, "team-a", file.ID); len(keys) != 0 {
			t.Fatalf("%s: failed upload left keys %q", name, keys)
		}
		// The id is free again.
		putFile(t, p, file, []byte("retry"))
		if err := p.DeleteFile("team-a", file.ID); err != nil {
			t.Fatalf("%s: DeleteFile(retry): %v", name, err)
		}
	}
	f("too large by one", bytes.NewReader(testData(1, 5*testChunk+1)), 5*testChunk, ErrTooLarge)
	f("too large, small max", bytes.NewReader(testData(1, 10)), 3, ErrTooLarge)
	f("too large, max 0", bytes.NewReader([]byte{1}), 0, ErrTooLarge)
	f("too large, far", &failingReader{n: 1 << 20, err: io.EOF}, 3*testChunk+5, ErrTooLarge)
	f("reader error at once", &failingReader{n: 0, err: boom}, 1<<20, boom)
	f("reader error after chunks", &failingReader{n: 4*testChunk + 10, err: boom}, 1<<20, boom)
	f("truncated body", &failingReader{n: 2*testChunk + 1, err: io.ErrUnexpectedEOF}, 1<<20, io.ErrUnexpectedEOF)
	f("no progress", &failingReader{n: 0, err: nil}, 1<<20, io.ErrNoProgress)

	// Exactly max bytes is fine.
	exact := putFile(t, p, newFile("team-a", "exact.png"), testData(2, 2*testChunk))
	if exact.Size != 2*testChunk {
		t.Fatalf("exact upload size %d", exact.Size)
	}
	if n, _ := p.FileStats(); n != 2 {
		t.Fatalf("FileStats count %d, want 2", n)
	}
	p = e.reopen(p)
	if n, _ := p.FileStats(); n != 2 {
		t.Fatalf("FileStats count after reopen %d, want 2", n)
	}
	if data, err := p.AppendFileData(nil, "team-a", keep.ID, t0); err != nil || !bytes.Equal(data, testData(9, 3000)) {
		t.Fatalf("kept file damaged: %v", err)
	}
}

func testFileExpiry(t *testing.T, eng *engine) {
	now := t0
	e := eng.newEnv(t, envOptions{chunkSize: testChunk, now: func() time.Time { return now }})
	p := e.open()
	short := newFile("team-a", "short.png")
	short.Expires = t0.Add(time.Hour)
	short = putFile(t, p, short, testData(1, 3*testChunk))
	forever := newFile("team-a", "forever.png")
	forever.Expires = time.Time{}
	forever = putFile(t, p, forever, testData(2, 100))
	long := putFile(t, p, newFile("team-a", "long.png"), testData(3, 200))

	// Expires is exclusive of the file's life: at Expires it is gone.
	at := short.Expires
	if _, err := p.GetFile("team-a", short.ID, at.Add(-time.Nanosecond)); err != nil {
		t.Fatalf("GetFile just before expiry: %v", err)
	}
	_, err := p.GetFile("team-a", short.ID, at)
	wantNotFound(t, "GetFile(expired)", err)
	_, err = p.AppendFileData(nil, "team-a", short.ID, at)
	wantNotFound(t, "AppendFileData(expired)", err)
	files, _, err := p.ListFiles("team-a", ListQuery{Now: at, Limit: 10})
	if err != nil || len(files) != 2 {
		t.Fatalf("ListFiles at expiry = %d files, %v; want 2", len(files), err)
	}
	files, _, _ = p.ListFiles("team-a", ListQuery{Now: at, IDs: []string{short.ID, long.ID}})
	if len(files) != 1 || files[0].ID != long.ID {
		t.Fatalf("ListFiles(IDs) at expiry = %+v; want only the long file", files)
	}
	now = at
	wantNotFound(t, "DeleteFile(expired)", p.DeleteFile("team-a", short.ID))

	// Expired but not reclaimed: still counted, bytes still stored.
	if n, b := p.FileStats(); n != 3 || b != 3*testChunk+300 {
		t.Fatalf("FileStats before reclaim = %d, %d", n, b)
	}
	if eng.nativeExpiry {
		return // its expiry is Redis' own: TestRedisNativeExpiry
	}
	if n, err := p.ReclaimExpired(at.Add(-time.Nanosecond)); err != nil || n != 0 {
		t.Fatalf("early ReclaimExpired = %d, %v; want 0", n, err)
	}
	if n, err := p.ReclaimExpired(at); err != nil || n != 1 {
		t.Fatalf("ReclaimExpired = %d, %v; want 1", n, err)
	}
	if keys := e.fileKeys(p, "team-a", short.ID); len(keys) != 0 {
		t.Fatalf("reclaimed file left keys %q", keys)
	}
	if n, b := p.FileStats(); n != 2 || b != 300 {
		t.Fatalf("FileStats after reclaim = %d, %d; want 2, 300", n, b)
	}
	p = e.reopen(p)
	if n, b := p.FileStats(); n != 2 || b != 300 {
		t.Fatalf("FileStats after reopen = %d, %d; want 2, 300", n, b)
	}
	// Far in the future only the never-expiring file survives.
	if n, err := p.ReclaimExpired(t0.AddDate(100, 0, 0)); err != nil || n != 1 {
		t.Fatalf("ReclaimExpired(far) = %d, %v; want 1", n, err)
	}
	if _, err := p.GetFile("team-a", forever.ID, t0.AddDate(100, 0, 0)); err != nil {
		t.Fatalf("never-expiring file: %v", err)
	}
	if _, blobs := p.(*Blobs); !blobs { // with blobs, e.allKeys lists the objects
		if keys := pebbleOf(p).rawKeys(t, prefixFileData); len(keys) != 1 {
			t.Fatalf("data keys %q; want the never-expiring file's one chunk", keys)
		}
	}
	if keys := pebbleOf(p).rawKeys(t, prefixFileExpiry); len(keys) != 0 {
		t.Fatalf("expiry keys left: %q", keys)
	}
}

func testFileStatsAcrossOperations(t *testing.T, eng *engine) {
	e := eng.newEnv(t, envOptions{chunkSize: testChunk})
	p := e.open()
	want := func(p Store, count, bytes int64) {
		t.Helper()
		if n, b := p.FileStats(); n != count || b != bytes {
			t.Fatalf("FileStats = %d, %d; want %d, %d", n, b, count, bytes)
		}
	}
	want(p, 0, 0)
	var ids []string
	for i := range 10 {
		f := newFile("team-a", "f")
		f.Expires = t0.Add(time.Duration(i+1) * time.Hour)
		ids = append(ids, putFile(t, p, f, testData(uint64(i), 1000*(i+1))).ID)
	}
	want(p, 10, 55000)
	if err := p.DeleteFile("team-a", ids[9]); err != nil {
		t.Fatal(err)
	}
	want(p, 9, 45000)
	if eng.nativeExpiry {
		p = e.reopen(p)
		want(p, 9, 45000)
		return
	}
	if n, err := p.ReclaimExpired(t0.Add(3 * time.Hour)); err != nil || n != 3 {
		t.Fatalf("ReclaimExpired = %d, %v", n, err)
	}
	want(p, 6, 45000-6000)
	p = e.reopen(p)
	want(p, 6, 39000)
}

func TestOrphanSweep(t *testing.T) {
	e := newDiskEnv(t, PebbleOptions{ChunkSize: testChunk})
	p := e.open()
	keep := putFile(t, p, newFile("team-a", "keep.png"), testData(1, 4000))
	// Chunks without metadata, as an upload cut by a crash leaves them.
	// The last one is a neighbour of the kept file's id: the sweep must tell them apart.
	neighbour := keep.ID[:len(keep.ID)-1] + "0"
	if neighbour == keep.ID {
		neighbour = keep.ID[:len(keep.ID)-1] + "1"
	}
	orphans := []struct{ owner, id string }{{"team-a", NewFileID(t0)}, {"team-b", NewFileID(t0)}, {"team-a", neighbour}}
	for _, o := range orphans {
		crashedUpload(t, p.beginUpload, p.chunkSize, o.owner, o.id, testData(2, 5000))
		if keys := p.fileKeys(t, o.owner, o.id); len(keys) != 5 {
			t.Fatalf("orphan setup wrote %d keys, want 5", len(keys))
		}
	}
	p = e.reopen(p)
	for _, o := range orphans {
		if keys := p.fileKeys(t, o.owner, o.id); len(keys) != 0 {
			t.Fatalf("orphan chunks survived the sweep: %q", keys)
		}
	}
	data, err := p.AppendFileData(nil, "team-a", keep.ID, t0)
	if err != nil || !bytes.Equal(data, testData(1, 4000)) {
		t.Fatalf("complete file damaged by the sweep: %v", err)
	}
	if n, b := p.FileStats(); n != 1 || b != 4000 {
		t.Fatalf("FileStats = %d, %d; want 1, 4000", n, b)
	}
}

// testFileConcurrent races uploads, deletes and reclaims of the same files and checks that
// the counters end equal to what is stored.
func testFileConcurrent(t *testing.T, eng *engine) {
	now := t0
	e := eng.newEnv(t, envOptions{chunkSize: testChunk, now: func() time.Time { return now }})
	p := e.open()
	const workers, perWorker = 4, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*perWorker*3)
	ids := make(chan string, workers*perWorker)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				f := newFile(fmt.Sprintf("team-%d", w%2), "c")
				f.Expires = t0.Add(-time.Duration(i%3) * time.Second) // some already expired
				if i%3 == 0 {
					f.Expires = t0.Add(time.Hour)
				}
				got, err := p.PutFile(f, bytes.NewReader(testData(uint64(i), 100*i)), 1<<20)
				if err != nil {
					errs <- err
					continue
				}
				ids <- got.Owner + "/" + got.ID
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for range 20 {
				if _, err := p.ReclaimExpired(t0); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Go(func() {
		for range workers * perWorker / 2 {
			owner, id, _ := strings.Cut(<-ids, "/")
			if err := p.DeleteFile(owner, id); err != nil && !errors.Is(err, ErrNotFound) {
				errs <- err
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent operation: %v", err)
	}
	if _, err := p.ReclaimExpired(t0); err != nil {
		t.Fatal(err)
	}
	count, size := p.FileStats()
	var stored, storedBytes int64
	for _, owner := range []string{"team-0", "team-1"} {
		files, _, err := p.ListFiles(owner, ListQuery{Now: t0.Add(-time.Hour), Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if !eng.nativeExpiry && !f.Expires.After(t0) {
				t.Fatalf("expired file %s survived the reclaims", f.ID)
			}
			stored++
			storedBytes += f.Size
		}
	}
	if stored != count || storedBytes != size {
		t.Fatalf("counters drifted: kept %d files %d bytes, stored %d files %d bytes", count, size, stored, storedBytes)
	}
}
