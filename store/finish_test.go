package store

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// finishingReader reads data and implements FileFinisher with finish, recording what the
// hook saw: whether the data had reached io.EOF and the file it was given.
type finishingReader struct {
	r      io.Reader
	finish func(f *File) error
	eof    bool // the reader has returned io.EOF
	calls  int
	atEOF  bool // the reader had returned io.EOF when FinishFile ran
	seen   File
}

func (r *finishingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err == io.EOF {
		r.eof = true
	}
	return n, err
}

func (r *finishingReader) FinishFile(f *File) error {
	r.calls++
	r.atEOF = r.eof
	r.seen = *f
	return r.finish(f)
}

func setExpires(at time.Time) func(*File) error {
	return func(f *File) error { f.Expires = at; return nil }
}

func testFileFinisherSetsExpiry(t *testing.T, eng *engine) {
	now := t0
	e := eng.newEnv(t, envOptions{chunkSize: testChunk, now: func() time.Time { return now }})
	p := e.open()
	data := testData(1, 3*testChunk+5)
	f := newFile("team-a", "late.png")
	f.Expires = time.Time{} // the expiry is known only once the bytes are read
	r := &finishingReader{r: bytes.NewReader(data), finish: setExpires(t0.Add(time.Hour))}
	got, err := p.PutFile(f, r, 1<<20)
	if err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	if r.calls != 1 || !r.atEOF {
		t.Fatalf("FinishFile ran %d times, after EOF %v; want once after EOF", r.calls, r.atEOF)
	}
	if r.seen.ID != got.ID || r.seen.Size != int64(len(data)) || !r.seen.Expires.IsZero() {
		t.Fatalf("FinishFile saw %+v; want the id %s, size %d and no expiry", r.seen, got.ID, len(data))
	}
	want := f
	want.ID, want.Size, want.Expires = got.ID, int64(len(data)), t0.Add(time.Hour)
	sameFile(t, got, want)

	// A hook may also clear an expiry the caller gave: the file never expires.
	forever := newFile("team-a", "forever.png")
	forever = putFinished(t, p, forever, &finishingReader{r: bytes.NewReader(testData(2, 10)), finish: setExpires(time.Time{})})
	if !forever.Expires.IsZero() {
		t.Fatalf("cleared expiry came back as %v", forever.Expires)
	}

	p = e.reopen(p)
	if g, err := p.GetFile("team-a", got.ID, t0); err != nil {
		t.Fatalf("GetFile after reopen: %v", err)
	} else {
		sameFile(t, g, want)
	}
	at := want.Expires
	listed := func(now time.Time) []File {
		t.Helper()
		files, _, err := p.ListFiles("team-a", ListQuery{Now: now, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	if files := listed(at.Add(-time.Nanosecond)); len(files) != 2 {
		t.Fatalf("ListFiles before the hook's expiry: %d files, want 2", len(files))
	}
	if files := listed(at); len(files) != 1 || files[0].ID != forever.ID {
		t.Fatalf("ListFiles at the hook's expiry: %+v, want only the never-expiring file", files)
	}
	_, err = p.GetFile("team-a", got.ID, at)
	wantNotFound(t, "GetFile at the hook's expiry", err)
	if eng.nativeExpiry {
		return
	}
	if n, err := p.ReclaimExpired(at.Add(-time.Nanosecond)); err != nil || n != 0 {
		t.Fatalf("early ReclaimExpired = %d, %v; want 0", n, err)
	}
	if n, err := p.ReclaimExpired(t0.AddDate(100, 0, 0)); err != nil || n != 1 {
		t.Fatalf("ReclaimExpired = %d, %v; want 1", n, err)
	}
	if keys := e.fileKeys(p, "team-a", got.ID); len(keys) != 0 {
		t.Fatalf("reclaimed file left keys %q", keys)
	}
	if keys := e.fileKeys(p, "team-a", forever.ID); len(keys) != 2 { // metadata and one chunk
		t.Fatalf("never-expiring file has keys %q; want its metadata and one chunk", keys)
	}
}

func putFinished(t *testing.T, p Store, f File, r *finishingReader) File {
	t.Helper()
	got, err := p.PutFile(f, r, 1<<20)
	if err != nil {
		t.Fatalf("PutFile(%s): %v", f.Filename, err)
	}
	return got
}

func testFileFinisherFailureLeavesNothing(t *testing.T, eng *engine) {
	e := eng.newEnv(t, envOptions{chunkSize: testChunk})
	p := e.open()
	keep := putFile(t, p, newFile("team-a", "keep.png"), testData(9, 3000))
	boom := errors.New("boom")
	f := func(name string, r *finishingReader, max int64, want error, calls int) {
		t.Helper()
		file := newFile("team-a", name)
		file.ID = NewFileID(t0)
		_, err := p.PutFile(file, r, max)
		if !errors.Is(err, want) {
			t.Fatalf("%s: PutFile error %v, want %v", name, err, want)
		}
		if r.calls != calls {
			t.Fatalf("%s: FinishFile ran %d times, want %d", name, r.calls, calls)
		}
		if keys := e.fileKeys(p, "team-a", file.ID); len(keys) != 0 {
			t.Fatalf("%s: failed upload left keys %q", name, keys)
		}
		if n, b := p.FileStats(); n != 1 || b != 3000 {
			t.Fatalf("%s: FileStats = %d, %d; want 1, 3000", name, n, b)
		}
		putFile(t, p, file, []byte("retry")) // the id is free again
		if err := p.DeleteFile("team-a", file.ID); err != nil {
			t.Fatalf("%s: DeleteFile(retry): %v", name, err)
		}
	}
	fail := func(err error) func(*File) error { return func(*File) error { return err } }
	f("hook error", &finishingReader{r: bytes.NewReader(testData(1, 5*testChunk+3)), finish: fail(boom)}, 1<<20, boom, 1)
	f("hook error, empty file", &finishingReader{r: bytes.NewReader(nil), finish: fail(boom)}, 1<<20, boom, 1)
	f("hook changes the filename", &finishingReader{r: bytes.NewReader(testData(2, 100)),
		finish: func(f *File) error { f.Filename = "other.png"; f.Expires = t0; return nil }}, 1<<20, ErrInvalid, 1)
	f("hook changes the id", &finishingReader{r: bytes.NewReader(testData(2, 100)),
		finish: func(f *File) error { f.ID = NewFileID(t0); return nil }}, 1<<20, ErrInvalid, 1)
	f("hook changes the size", &finishingReader{r: bytes.NewReader(testData(2, 100)),
		finish: func(f *File) error { f.Size = 1; return nil }}, 1<<20, ErrInvalid, 1)
	// Uploads that fail before the end of the data never reach the hook.
	f("too large", &finishingReader{r: bytes.NewReader(testData(3, 3*testChunk)), finish: fail(nil)}, 2*testChunk, ErrTooLarge, 0)
	f("reader error", &finishingReader{r: &failingReader{n: 2*testChunk + 1, err: boom}, finish: fail(nil)}, 1<<20, boom, 0)

	if pe := pebbleOf(p); pe != nil {
		if keys := pe.rawKeys(t, prefixFileExpiry); len(keys) != 1 {
			t.Fatalf("expiry keys %q; want the kept file's one", keys)
		}
	}
	p = e.reopen(p)
	if n, b := p.FileStats(); n != 1 || b != 3000 {
		t.Fatalf("FileStats after reopen = %d, %d; want 1, 3000", n, b)
	}
	if data, err := p.AppendFileData(nil, "team-a", keep.ID, t0); err != nil || !bytes.Equal(data, testData(9, 3000)) {
		t.Fatalf("kept file damaged: %v", err)
	}
}

// TestFileWithoutFinisher checks that a reader without the hook keeps the expiry given to
// PutFile, whatever a finisher elsewhere would have set.
func testFileWithoutFinisher(t *testing.T, eng *engine) {
	e := eng.newEnv(t, envOptions{chunkSize: testChunk})
	p := e.open()
	f := newFile("team-a", "plain.png")
	f.Expires = t0.Add(2 * time.Hour)
	// finishingReader wrapped in a plain reader: the hook is hidden and must not run.
	inner := &finishingReader{r: bytes.NewReader(testData(1, 2*testChunk)), finish: setExpires(t0.Add(time.Minute))}
	got, err := p.PutFile(f, struct{ io.Reader }{inner}, 1<<20)
	if err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	if inner.calls != 0 {
		t.Fatalf("a hidden FinishFile ran %d times", inner.calls)
	}
	f.ID, f.Size = got.ID, 2*testChunk
	sameFile(t, got, f)
	p = e.reopen(p)
	g, err := p.GetFile("team-a", got.ID, t0.Add(time.Hour))
	if err != nil {
		t.Fatalf("GetFile after reopen: %v", err)
	}
	sameFile(t, g, f)
	if eng.nativeExpiry {
		return
	}
	if keys := pebbleOf(p).rawKeys(t, prefixFileExpiry); len(keys) != 1 {
		t.Fatalf("expiry keys %q; want one", keys)
	}
	if n, err := p.ReclaimExpired(f.Expires); err != nil || n != 1 {
		t.Fatalf("ReclaimExpired at the given expiry = %d, %v; want 1", n, err)
	}
}
