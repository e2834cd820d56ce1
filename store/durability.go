package store

import "github.com/cockroachdb/pebble/v2/vfs"

// Durability says what a write survives once the store has acknowledged it. It applies to
// every acknowledged write: PutResponse, DeleteResponse, the commit that makes an upload
// visible, DeleteFile and the reclaims. The zero value is DurabilityProcess.
type Durability uint8

const (
	// DurabilityProcess acknowledges a write once it has reached the operating system: the
	// write-ahead log's bytes are in the kernel's page cache, copied into the file's shared
	// memory map (see mappedLog) but not fsynced. It survives the death of the gateway process (kill -9, a panic, the OOM
	// killer), since the kernel writes those pages back on its own. It does not survive a
	// crash of the machine or a power loss: those may lose the writes the kernel had not yet
	// written back (on Linux, up to about the last 30 seconds), and the store still opens whole,
	// because every other file of the store (tables, manifest, finished logs) is still
	// synced. The default.
	DurabilityProcess Durability = iota
	// DurabilityMachine acknowledges a write once the write-ahead log is fsynced: it also
	// survives a crash of the machine or a power loss. Concurrent writes share one fsync
	// (Pebble's group commit), but each caller waits for the disk.
	DurabilityMachine
)

// durabilityNames are the configuration names of the levels, by value.
var durabilityNames = [...]string{DurabilityProcess: "process", DurabilityMachine: "machine"}

// String returns the configuration name of d: "process" or "machine".
func (d Durability) String() string {
	if int(d) < len(durabilityNames) {
		return durabilityNames[d]
	}
	return "unknown"
}

// ParseDurability returns the level named s ("process" or "machine") and whether s names one.
func ParseDurability(s string) (Durability, bool) {
	for d, name := range durabilityNames {
		if s == name {
			return Durability(d), true
		}
	}
	return 0, false
}

// walCategory is the write category under which Pebble creates its write-ahead logs.
const walCategory vfs.DiskWriteCategory = "pebble-wal"

// unsyncedWALFS is the file system of DurabilityProcess. Pebble writes a synced commit to its
// log file and then syncs it; the log files that this FS creates are written through a shared
// memory map (mappedLog), and their sync is skipped, so a commit is acknowledged as soon as
// its bytes are in the kernel. A plain NoSync
// commit would not do: Pebble keeps such a record in a buffer of the process until a block
// of the log fills or another commit asks for a sync, and kill -9 loses that buffer.
//
// Closing a log file still syncs it: Pebble reads a torn tail in any log but the newest as
// corruption, so a log that a memtable rotation finished must be whole on disk before the
// next one takes writes. Every other file (tables, manifest, directories) syncs as usual.
type unsyncedWALFS struct{ vfs.FS }

// Create creates name, without per-write syncs when it is a write-ahead log.
func (fs unsyncedWALFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, category)
	return unsyncedIfWAL(f, err, category)
}

// ReuseForWrite recycles a log file, without per-write syncs when it is a write-ahead log.
func (fs unsyncedWALFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, category)
	return unsyncedIfWAL(f, err, category)
}

func unsyncedIfWAL(f vfs.File, err error, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err != nil || category != walCategory {
		return f, err
	}
	m, err := newMappedLog(f)
	switch {
	case err != nil:
		f.Close()
		return nil, err
	case m != nil:
		return m, nil
	}
	return unsyncedFile{f}, nil // a file system without descriptors, such as the tests' in memory
}

// unsyncedFile is a write-ahead log whose syncs are skipped until it is closed.
type unsyncedFile struct{ vfs.File }

// Sync returns at once: the bytes written so far are already in the kernel.
func (unsyncedFile) Sync() error { return nil }

// SyncData returns at once, as Sync.
func (unsyncedFile) SyncData() error { return nil }

// SyncTo returns at once; false says that no persistence is promised.
func (unsyncedFile) SyncTo(int64) (bool, error) { return false, nil }

// Close syncs the finished log, then closes it.
func (f unsyncedFile) Close() error {
	if err := f.File.Sync(); err != nil {
		f.File.Close()
		return err
	}
	return f.File.Close()
}
