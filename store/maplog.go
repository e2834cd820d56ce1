package store

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// mapChunk is how much of a mapped log is mapped, and the file grown, at a time.
const mapChunk = 4 << 20

// mappedLog is a write-ahead log of DurabilityProcess written through a shared memory map of
// its file instead of write(2). A byte copied into the map is in the kernel's page cache at
// once, as one written with write(2) is, so it survives the death of the process; it reaches
// the disk when the kernel writes the page back, or when the log is closed.
//
// What the map saves is the system call per commit. Each acknowledged record was one
// write(2) by Pebble's log writer, and that call, made through os.File, also woke the Go
// runtime's sysmon thread from its sleep whenever the process had been idle, after which it
// ticks every 20 µs for a while: together about a tenth of a Responses create's CPU (see
// docs/performance.md).
//
// The file is grown a chunk at a time, its blocks allocated (see reserve), so until it is closed
// it ends in zeros after the last record. Pebble reads such a tail as the unclean end of a
// log, which it accepts of the newest log only; it closes a log before it creates the next
// one (DB.rotateWAL), and Close cuts the file to what was written. A write into the map that
// faults blocks its thread, as a write(2) would, for a page of the page cache.
type mappedLog struct {
	vfs.File
	fd     int
	chunks [][]byte // the maps, mapChunk bytes each, by their place in the file; nil where unmapped
	off    int64    // bytes written
	size   int64    // the file's size
	// unmappable: the file system refused a map; every write goes through pwrite(2).
	unmappable bool
}

var errUnmappable = errors.New("the log cannot be mapped")

// mmap is syscall.Mmap; tests replace it with one that fails.
var mmap = syscall.Mmap

// newMappedLog maps the log f when its file has a descriptor, else returns nil.
func newMappedLog(f vfs.File) (*mappedLog, error) {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return nil, nil
	}
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// A recycled log keeps its old size until Close: the records after this log's own carry
	// another log's number, which Pebble reads as the end of this one.
	return &mappedLog{File: f, fd: int(fd), size: st.Size()}, nil
}

// mapWriteMax is the largest write copied into the map; a larger one, such as a file's
// chunk, goes through pwrite(2). On the virtual machine where this was measured, a page of
// the map costs a few microseconds at its first store, besides the copy: little against a
// system call for a record of a few hundred bytes, several times the kernel's own copy for an
// upload's megabytes (see docs/performance.md).
const mapWriteMax = 16 << 10

// Write copies p into the map, or writes it with pwrite(2) when it is large.
func (l *mappedLog) Write(p []byte) (int, error) {
	if len(p) > mapWriteMax || l.unmappable {
		return l.pwrite(p)
	}
	n := 0
	for n < len(p) {
		i, at := int(l.off/mapChunk), int(l.off%mapChunk)
		for i >= len(l.chunks) {
			l.chunks = append(l.chunks, nil)
		}
		if l.chunks[i] == nil {
			if err := l.mapAt(i); errors.Is(err, errUnmappable) {
				c, err := l.pwrite(p[n:])
				return n + c, err
			} else if err != nil {
				return n, err
			}
		}
		c := copy(l.chunks[i][at:], p[n:])
		n += c
		l.off += int64(c)
	}
	return n, nil
}

// pwrite writes p at the log's end with pwrite(2).
func (l *mappedLog) pwrite(p []byte) (int, error) {
	if err := l.reserve(l.off + int64(len(p))); err != nil {
		return 0, err
	}
	n := 0
	for n < len(p) {
		c, err := syscall.Pwrite(l.fd, p[n:], l.off)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("cannot write log: %w", err)
		}
		n += c
		l.off += int64(c)
	}
	return n, nil
}

// reserve extends the file to the chunk that holds its byte end-1. The blocks are allocated
// here, so that a full disk fails the write with an error, as write(2) would: a store into a
// mapped page that the file system cannot back kills the process with SIGBUS.
func (l *mappedLog) reserve(end int64) error {
	end = (end + mapChunk - 1) / mapChunk * mapChunk
	if l.size >= end {
		return nil
	}
	err := syscall.Fallocate(l.fd, 0, l.size, end-l.size)
	if err == syscall.EOPNOTSUPP {
		err = syscall.Ftruncate(l.fd, end) // a file system without fallocate
	}
	if err != nil {
		return fmt.Errorf("cannot grow log: %w", err)
	}
	l.size = end
	return nil
}

// mapAt maps chunk i of the file, extending the file to cover it.
func (l *mappedLog) mapAt(i int) error {
	start := int64(i) * mapChunk
	if err := l.reserve(start + mapChunk); err != nil {
		return err
	}
	m, err := mmap(l.fd, start, mapChunk, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		// A file system that cannot map files shared (some FUSE ones): the log is
		// written with pwrite(2) from here on.
		l.unmappable = true
		return fmt.Errorf("%w: %w", errUnmappable, err)
	}
	// One system call makes every page of the chunk writable, rather than a fault at each
	// page's first write; kernels before 5.14 refuse it, and the writes fault as before.
	_ = syscall.Madvise(m, madvPopulateWrite)
	l.chunks[i] = m
	return nil
}

// madvPopulateWrite is Linux's MADV_POPULATE_WRITE, which package syscall does not name.
const madvPopulateWrite = 23

// Sync returns at once: what was written is in the page cache already.
func (l *mappedLog) Sync() error { return nil }

// SyncData returns at once, as Sync.
func (l *mappedLog) SyncData() error { return nil }

// SyncTo returns at once; false says that no persistence is promised.
func (l *mappedLog) SyncTo(int64) (bool, error) { return false, nil }

// Close unmaps the log, cuts the file to what was written, syncs it and closes it: a log
// that a memtable rotation finished must end cleanly, and be whole on disk, before the next
// one takes writes.
func (l *mappedLog) Close() error {
	var err error
	for _, m := range l.chunks {
		if m != nil {
			err = errors.Join(err, syscall.Munmap(m))
		}
	}
	l.chunks = nil
	if err == nil && l.size != l.off {
		err = syscall.Ftruncate(l.fd, l.off)
	}
	if err == nil {
		err = l.File.Sync()
	}
	return errors.Join(err, l.File.Close())
}
