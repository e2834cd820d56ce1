package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// mappedFile opens name on disk as the store's process-durability file system opens a
// write-ahead log, and fails unless it is mapped.
func mappedFile(t *testing.T, create func(fs vfs.FS) (vfs.File, error)) *mappedLog {
	t.Helper()
	f, err := create(unsyncedWALFS{vfs.Default})
	if err != nil {
		t.Fatal(err)
	}
	m, ok := f.(*mappedLog)
	if !ok {
		t.Fatalf("a log on disk is a %T, not mapped", f)
	}
	return m
}

// writePieces writes at least total bytes to l, in writes of 1 to maxWrite
// bytes (some copied into the map, some not), and returns what it wrote.
func writePieces(t *testing.T, l *mappedLog, total, maxWrite int) []byte {
	t.Helper()
	var want []byte
	for i := 0; len(want) < total; i++ {
		p := bytes.Repeat([]byte{byte(i)}, 1+i*7919%maxWrite)
		if n, err := l.Write(p); err != nil || n != len(p) {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
		want = append(want, p...)
	}
	return want
}

// Writes of any size, across the map's chunks, are in the file as written: visible to
// another reader of the file before any sync or close (so in the kernel, where the death
// of the process cannot take them), and the file ends where they end once closed.
func TestMappedLogWrites(t *testing.T) {
	name := filepath.Join(t.TempDir(), "000001.log")
	l := mappedFile(t, func(fs vfs.FS) (vfs.File, error) { return fs.Create(name, walCategory) })
	want := writePieces(t, l, 2*mapChunk+mapChunk/2, 100<<10)
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:len(want)], want) || bytes.ContainsFunc(got[len(want):], func(r rune) bool { return r != 0 }) {
		t.Fatalf("before close, the file does not hold the writes then zeros (%d bytes, %d written)", len(got), len(want))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(name); !bytes.Equal(got, want) {
		t.Fatalf("after close, the file holds %d bytes, %d written", len(got), len(want))
	}
}

// A recycled log is written from its start over the old one, and ends where its own
// writes end once closed.
func TestMappedLogRecycled(t *testing.T) {
	dir := t.TempDir()
	old, name := filepath.Join(dir, "000001.log"), filepath.Join(dir, "000002.log")
	if err := os.WriteFile(old, bytes.Repeat([]byte{0xaa}, mapChunk+12345), 0o644); err != nil {
		t.Fatal(err)
	}
	l := mappedFile(t, func(fs vfs.FS) (vfs.File, error) { return fs.ReuseForWrite(old, name, walCategory) })
	want := bytes.Repeat([]byte("new"), 1000)
	if _, err := l.Write(want); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(name); !bytes.Equal(got, want) {
		t.Fatalf("the recycled log holds %d bytes, %d written", len(got), len(want))
	}
}

// A store at DurabilityProcess on disk, whose logs are mapped, reads back every record
// after its logs were rotated many times, closed and reopened; and the logs it left behind
// end cleanly, without the zeros of a mapped file's growth.
func TestMappedLogsReopen(t *testing.T) {
	e := newDiskEnv(t, PebbleOptions{Durability: DurabilityProcess, MemTableSize: 1 << 20})
	p := e.open()
	const n = 20000
	for i := range n {
		r := Response{ID: fmt.Sprintf("resp_%08d", i), Owner: "o", Model: strings.Repeat("m", 100), Deployment: "d", Created: t0}
		if err := p.PutResponse(r); err != nil {
			t.Fatal(err)
		}
	}
	p = e.reopen(p)
	for i := range n {
		if _, err := p.GetResponse(fmt.Sprintf("resp_%08d", i)); err != nil {
			t.Fatalf("record %d after reopen: %v", i, err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(e.dir, "*.log"))
	if len(logs) == 0 {
		t.Fatal("no log left to look at")
	}
	for _, name := range logs {
		b, _ := os.ReadFile(name)
		if len(b) >= mapChunk || bytes.HasSuffix(b, make([]byte, 64)) {
			t.Errorf("log %s ends in zeros (%d bytes)", filepath.Base(name), len(b))
		}
	}
}

// A disk that fills up fails the log's write with an error, as write(2) would, and does not
// kill the process: a store into a mapped page that the file system cannot back raises
// SIGBUS, so the map's blocks are allocated before it is written. It needs a small file
// system of its own, which only root can mount; elsewhere it is skipped.
func TestMappedLogFullDisk(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=6m"); err != nil {
		t.Skipf("cannot mount a small file system: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, 0) })
	for _, size := range []int{4 << 10, 1 << 20} { // copied into the map, and written
		name := filepath.Join(dir, fmt.Sprintf("%d.log", size))
		l := mappedFile(t, func(fs vfs.FS) (vfs.File, error) { return fs.Create(name, walCategory) })
		p := bytes.Repeat([]byte{1}, size)
		var err error
		for i := 0; i < 8<<20/size && err == nil; i++ {
			_, err = l.Write(p)
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("writing 8 MiB to a 6 MiB file system in writes of %d bytes: %v", size, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		os.Remove(name)
	}
}

// A file system that refuses to map the log leaves it written with pwrite(2), whole.
func TestMappedLogUnmappable(t *testing.T) {
	defer func(m func(int, int64, int, int, int) ([]byte, error)) { mmap = m }(mmap)
	mmap = func(int, int64, int, int, int) ([]byte, error) { return nil, syscall.ENODEV }
	name := filepath.Join(t.TempDir(), "000001.log")
	l := mappedFile(t, func(fs vfs.FS) (vfs.File, error) { return fs.Create(name, walCategory) })
	want := writePieces(t, l, 3<<20, 20<<10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(name); !bytes.Equal(got, want) {
		t.Fatalf("the log holds %d bytes, %d written", len(got), len(want))
	}
}
