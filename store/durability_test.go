package store

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestParseDurability(t *testing.T) {
	f := func(s string, want Durability, wantOK bool) {
		t.Helper()
		got, ok := ParseDurability(s)
		if got != want || ok != wantOK {
			t.Fatalf("ParseDurability(%q) = %v, %v; want %v, %v", s, got, ok, want, wantOK)
		}
		if ok && got.String() != s {
			t.Fatalf("%v.String() = %q, want %q", got, got.String(), s)
		}
	}
	f("process", DurabilityProcess, true)
	f("machine", DurabilityMachine, true)
	f("", 0, false)
	f("Machine", 0, false)
	f("fsync", 0, false)
	if s := Durability(7).String(); s != "unknown" {
		t.Fatalf("Durability(7).String() = %q", s)
	}
	if _, err := OpenPebble("db", PebbleOptions{FS: vfs.NewMem(), Durability: 7}); err == nil {
		t.Fatal("OpenPebble took an unknown durability")
	}
}

// syncCountingFS counts the syncs and the closes of the write-ahead logs of the file system
// below.
type syncCountingFS struct {
	vfs.FS
	syncs, closes *atomic.Int64
}

func (fs syncCountingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return fs.wrap(f, err, category)
}

func (fs syncCountingFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return fs.wrap(f, err, category)
}

func (fs syncCountingFS) wrap(f vfs.File, err error, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err != nil || category != walCategory {
		return f, err
	}
	return syncCountingFile{f, fs}, nil
}

type syncCountingFile struct {
	vfs.File
	fs syncCountingFS
}

func (f syncCountingFile) Sync() error     { f.fs.syncs.Add(1); return f.File.Sync() }
func (f syncCountingFile) SyncData() error { f.fs.syncs.Add(1); return f.File.SyncData() }
func (f syncCountingFile) Close() error    { f.fs.closes.Add(1); return f.File.Close() }

// TestDurabilityWALSyncs checks what each level asks of the disk: DurabilityMachine syncs the
// log at least once per acknowledged write made one after another, DurabilityProcess only
// when a log is finished (Pebble rotates its logs with its memtables, which start small). It
// fails if Pebble stops naming its logs' write category.
func TestDurabilityWALSyncs(t *testing.T) {
	const writes = 20
	f := func(d Durability) (syncs, closes int64) {
		t.Helper()
		var s, c atomic.Int64
		e := &testEnv{t: t, dir: "db", opts: PebbleOptions{Durability: d, Logger: quietLogger{}}}
		e.opts.FS = syncCountingFS{vfs.NewMem(), &s, &c}
		p := e.open()
		s0, c0 := s.Load(), c.Load()
		for i := range writes {
			r := Response{ID: fmt.Sprintf("resp_%d", i), Owner: "o", Model: "m", Deployment: "d", Created: t0}
			if err := p.PutResponse(r); err != nil {
				t.Fatal(err)
			}
			if err := p.DeleteResponse(r.ID); err != nil {
				t.Fatal(err)
			}
		}
		putFile(t, p, File{Owner: "o", Filename: "f", Created: t0}, testData(1, 3*DefaultChunkSize))
		return s.Load() - s0, c.Load() - c0
	}
	if syncs, _ := f(DurabilityMachine); syncs < 2*writes+1 {
		t.Fatalf("machine: %d syncs of the log for %d acknowledged writes", syncs, 2*writes+1)
	}
	if syncs, closes := f(DurabilityProcess); syncs != closes {
		t.Fatalf("process: %d syncs of the log for %d acknowledged writes, %d finished logs", syncs, 2*writes+1, closes)
	}
}
