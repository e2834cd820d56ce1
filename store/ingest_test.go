package store

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// tableFiles lists what the tables' folder of the store holds.
func tableFiles(t *testing.T, p *Pebble) []string {
	t.Helper()
	names, err := p.fs.List(p.tables)
	if err != nil {
		t.Fatalf("List(%s): %v", p.tables, err)
	}
	return names
}

// TestUploadIngested shows which uploads go into a table that Pebble ingests: one of several
// chunks does, through one ingestion, and reads back whole, also after a reopen and in a
// level below L0 (no flush or compaction moved it there); one of a single chunk does not.
func TestUploadIngested(t *testing.T) {
	e := newDiskEnv(t, PebbleOptions{ChunkSize: testChunk})
	p := e.open()

	small := testData(1, testChunk)
	fs := putFile(t, p, newFile("team-a", "small.png"), small)
	if n := p.db.Metrics().Ingest.Count; n != 0 {
		t.Fatalf("a one-chunk upload made %d ingestions, want 0", n)
	}

	large := testData(2, 7*testChunk+5)
	fl := putFile(t, p, newFile("team-a", "large.png"), large)
	m := p.db.Metrics()
	if m.Ingest.Count != 1 {
		t.Fatalf("an upload of 8 chunks made %d ingestions, want 1", m.Ingest.Count)
	}
	if m.Flush.Count != 0 || m.Compact.Count != 0 {
		t.Fatalf("flushes %d, compactions %d: the test no longer shows where the table went", m.Flush.Count, m.Compact.Count)
	}
	var below int64
	for level := 1; level < len(m.Levels); level++ {
		below += m.Levels[level].TablesCount
	}
	if below != 1 {
		t.Fatalf("%d tables below L0, want the ingested one", below)
	}
	if names := tableFiles(t, p); len(names) != 0 {
		t.Fatalf("tables folder holds %q after the ingestion", names)
	}
	if keys := p.fileKeys(t, "team-a", fl.ID); len(keys) != 2+8 {
		t.Fatalf("large file has %d keys, want its metadata, its expiry and 8 chunks", len(keys))
	}

	for i := range 2 {
		for _, c := range []struct {
			f    File
			data []byte
		}{{fs, small}, {fl, large}} {
			got, err := p.AppendFileData(nil, "team-a", c.f.ID, t0)
			if err != nil || !bytes.Equal(got, c.data) {
				t.Fatalf("open %d: %s read back %d bytes, %v", i, c.f.Filename, len(got), err)
			}
		}
		p = e.reopen(p)
	}
	if err := p.DeleteFile("team-a", fl.ID); err != nil {
		t.Fatal(err)
	}
	if keys := p.fileKeys(t, "team-a", fl.ID); len(keys) != 0 {
		t.Fatalf("deleted file left %q", keys)
	}
}

// TestUploadTableAborted shows that a failed upload of several chunks leaves neither a chunk
// in the store nor a table in its folder, whether it failed before or after the ingestion.
func TestUploadTableAborted(t *testing.T) {
	e := newDiskEnv(t, PebbleOptions{ChunkSize: testChunk})
	p := e.open()
	cases := []struct {
		name string
		r    io.Reader
		max  int64
		want error
	}{
		// fails while the table is written
		{"too large", bytes.NewReader(testData(1, 6*testChunk)), 4 * testChunk, ErrTooLarge},
		{"cut", &failingReader{n: 3*testChunk + 7, err: io.ErrUnexpectedEOF}, 8 * testChunk, io.ErrUnexpectedEOF},
		// fails after every chunk is read, before the ingestion
		{"finisher", &finishingReader{r: bytes.NewReader(testData(2, 5*testChunk)),
			finish: func(*File) error { return errFinish }}, 8 * testChunk, errFinish},
	}
	for _, c := range cases {
		f := newFile("team-a", c.name)
		f.ID = NewFileID(t0)
		_, err := p.PutFile(f, c.r, c.max)
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: PutFile = %v, want %v", c.name, err, c.want)
		}
		if keys := p.fileKeys(t, "team-a", f.ID); len(keys) != 0 {
			t.Fatalf("%s: failed upload left %q", c.name, keys)
		}
		if names := tableFiles(t, p); len(names) != 0 {
			t.Fatalf("%s: tables folder holds %q", c.name, names)
		}
	}

	// After the ingestion, before the metadata: the upload's delete takes the chunks back.
	u, err := p.beginUpload(&File{Owner: "team-a", ID: NewFileID(t0)})
	if err != nil {
		t.Fatal(err)
	}
	pu := u.(*pebbleUpload)
	if _, err := writeChunks(u, bytes.NewReader(testData(3, 4*testChunk)), 1<<20, testChunk); err != nil {
		t.Fatal(err)
	}
	if err := pu.ingestTable(); err != nil {
		t.Fatal(err)
	}
	if keys := p.fileKeys(t, "team-a", pu.f.ID); len(keys) != 4 {
		t.Fatalf("ingested upload has %d chunks in the store, want 4", len(keys))
	}
	if err := u.abort(); err != nil {
		t.Fatal(err)
	}
	u.end()
	if keys := p.fileKeys(t, "team-a", pu.f.ID); len(keys) != 0 {
		t.Fatalf("aborted upload left %q", keys)
	}
}

var errFinish = errors.New("finisher refuses")

// TestUploadTablesClearedAtOpen shows that a table a crash left in the tables' folder, never
// ingested, is removed when the store opens, and that the store opens with it there.
func TestUploadTablesClearedAtOpen(t *testing.T) {
	fs := vfs.NewMem()
	opts := PebbleOptions{FS: fs, ChunkSize: testChunk, Logger: quietLogger{}}
	p, err := OpenPebble("db", opts)
	if err != nil {
		t.Fatal(err)
	}
	u, err := p.beginUpload(&File{Owner: "team-a", ID: NewFileID(t0)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeChunks(u, bytes.NewReader(testData(1, 3*testChunk)), 1<<20, testChunk); err != nil {
		t.Fatal(err)
	}
	if names := tableFiles(t, p); len(names) != 1 {
		t.Fatalf("tables folder holds %q during the upload, want its table", names)
	}
	// The crash: the store is gone with the table written, never ingested nor removed.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	p, err = OpenPebble("db", opts)
	if err != nil {
		t.Fatalf("open after the crash: %v", err)
	}
	defer p.Close()
	if names := tableFiles(t, p); len(names) != 0 {
		t.Fatalf("tables folder holds %q after the open", names)
	}
	if keys := p.rawKeys(t, prefixFileData); len(keys) != 0 {
		t.Fatalf("the crashed upload's first chunk survived the sweep: %q", keys)
	}
}
