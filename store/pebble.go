package store

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Defaults of PebbleOptions.
const (
	DefaultChunkSize    = 256 << 10
	DefaultMemTableSize = 16 << 20
	DefaultCacheSize    = 32 << 20
)

// Bounds of PebbleOptions.ChunkSize.
const (
	MinChunkSize = 64
	MaxChunkSize = 16 << 20
)

// PebbleOptions configures OpenPebble. The zero value means the defaults.
type PebbleOptions struct {
	// FS is the file system; nil means the disk (vfs.Default). Tests use vfs.NewMem.
	FS vfs.FS
	// ChunkSize is the size of one stored chunk of file data and bounds the memory of one
	// upload; 0 means DefaultChunkSize. Changing it between opens is harmless: each chunk
	// is read back as stored.
	ChunkSize int
	// MemTableSize is Pebble's memtable size; 0 means DefaultMemTableSize.
	MemTableSize uint64
	// CacheSize is the size of Pebble's block cache; 0 means DefaultCacheSize.
	CacheSize int64
	// Logger receives Pebble's log lines; nil means Pebble's default (the standard log).
	Logger pebble.Logger
	// Now is the clock of DeleteFile's expiry check; nil means time.Now.
	Now func() time.Time
	// Durability is what an acknowledged write survives; the zero value is
	// DurabilityProcess.
	Durability Durability
}

// EnsureDefaults fills the zero fields of o with their defaults.
func (o *PebbleOptions) EnsureDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.ChunkSize == 0 {
		o.ChunkSize = DefaultChunkSize
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.Logger == nil {
		o.Logger = pebble.DefaultLogger
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports the first field of o that is out of range.
func (o *PebbleOptions) Validate() error {
	if o.ChunkSize < MinChunkSize || o.ChunkSize > MaxChunkSize {
		return fmt.Errorf("store: ChunkSize %d is out of range %d..%d", o.ChunkSize, MinChunkSize, MaxChunkSize)
	}
	if o.CacheSize < 0 {
		return fmt.Errorf("store: CacheSize %d is negative", o.CacheSize)
	}
	if o.Durability > DurabilityMachine {
		return fmt.Errorf("store: Durability %d is unknown", o.Durability)
	}
	return nil
}

// Pebble is the embedded Store engine: one Pebble database in a directory, owned by one
// process at a time (Pebble locks the directory).
//
// Create it with OpenPebble; the zero value is not usable. It is safe for concurrent use.
type Pebble struct {
	db        *pebble.DB
	chunkSize int
	now       func() time.Time
	closed    atomic.Bool

	// locks serialize the read-check-write sequences of one record (delete, reclaim, the
	// final commit of an upload) so that counters stay exact and a reclaim never removes a
	// record rewritten since it looked.
	locks stripes

	// recent holds the Responses records put last; see recentResponses.
	recent *recentResponses

	// uploading holds owner\x00id of uploads in flight, so that two uploads of one
	// caller-chosen id cannot interleave their chunks.
	uploadingMu sync.Mutex
	uploading   map[string]struct{}

	files atomic.Int64
	bytes atomic.Int64

	// fs and tables are where an upload builds the table it ingests (see uploadTable), with
	// tableOpts; tableSeq names them.
	fs        vfs.FS
	tables    string
	tableOpts sstable.WriterOptions
	tableSeq  atomic.Uint64

	// keysMu serializes the changes of the callers' keys, so that each raises the version
	// by one; keysNote is closed and replaced at each change (see WatchKeys).
	keysMu   sync.Mutex
	keysNote chan struct{}
}

var _ Store = (*Pebble)(nil)

// openError says why pebble.Open failed, once; a lock held elsewhere is ErrLocked rather
// than the lock call's errno ("resource temporarily unavailable").
func openError(dir string, err error) error {
	if errors.Is(err, syscall.EAGAIN) || strings.Contains(err.Error(), "lock held by current process") {
		return fmt.Errorf("cannot open store %q: %w (is another gateway running on the same store.path?)", dir, ErrLocked)
	}
	return fmt.Errorf("cannot open store %q: %w", dir, err)
}

// OpenPebble opens (or creates) the store in dir. Before it returns it removes the chunks of
// uploads that a crash cut short and loads the file counters from the metadata: two scans
// whose cost grows with the number of stored files, not with their bytes (the scan of the
// data seeks past each file's chunks).
func OpenPebble(dir string, opts PebbleOptions) (*Pebble, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	fs := opts.FS
	if opts.Durability == DurabilityProcess {
		fs = unsyncedWALFS{fs}
	}
	cache := pebble.NewCache(opts.CacheSize)
	defer cache.Unref()
	po := &pebble.Options{
		FS:           fs,
		Cache:        cache,
		MemTableSize: opts.MemTableSize,
		Logger:       opts.Logger,
	}
	po.EnsureDefaults()
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, openError(dir, err)
	}
	tables, err := openTablesDir(opts.FS, dir)
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	p := &Pebble{
		db:        db,
		fs:        opts.FS,
		tables:    tables,
		tableOpts: uploadTableOptions(po, db),
		chunkSize: opts.ChunkSize,
		now:       opts.Now,
		locks:     stripes{seed: maphash.MakeSeed()},
		recent:    newRecentResponses(),
		uploading: make(map[string]struct{}),
	}
	swept, err := p.sweepOrphans()
	if err == nil {
		err = p.loadCounters()
	}
	if err != nil {
		return nil, errors.Join(err, db.Close())
	}
	if swept > 0 {
		opts.Logger.Infof("store: removed the data of %d unfinished uploads", swept)
	}
	return p, nil
}

// Close closes the database. A second Close returns an error.
func (p *Pebble) Close() error {
	if !p.closed.CompareAndSwap(false, true) {
		return errors.New("store: already closed")
	}
	if err := p.db.Close(); err != nil {
		return fmt.Errorf("cannot close store: %w", err)
	}
	return nil
}

// FileStats returns the stored files and their bytes, expired ones included until reclaimed.
func (p *Pebble) FileStats() (count int64, bytes int64) {
	return p.files.Load(), p.bytes.Load()
}

// sweepOrphans deletes the chunks of every file without metadata: an upload that failed and
// whose cleanup did not reach the disk, or one cut by a crash. Run before any upload starts.
func (p *Pebble) sweepOrphans() (int, error) {
	it, err := p.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte(prefixFileData),
		UpperBound: prefixEnd([]byte(prefixFileData)),
	})
	if err != nil {
		return 0, fmt.Errorf("cannot scan file data: %w", err)
	}
	defer it.Close()
	b := p.db.NewBatch()
	defer b.Close()
	var metaKey []byte
	swept := 0
	for ok := it.First(); ok; {
		owner, id, valid := parseChunkKey(it.Key())
		if !valid {
			return 0, fmt.Errorf("cannot sweep file data: malformed key %q", it.Key())
		}
		start := appendChunkPrefix(nil, string(owner), string(id))
		end := prefixEnd(start)
		metaKey = appendFileKey(metaKey[:0], string(owner), string(id))
		found, err := p.exists(metaKey)
		if err != nil {
			return 0, err
		}
		if !found {
			if err := b.DeleteRange(start, end, nil); err != nil {
				return 0, fmt.Errorf("cannot sweep file data: %w", err)
			}
			swept++
		}
		ok = it.SeekGE(end)
	}
	if err := it.Error(); err != nil {
		return 0, fmt.Errorf("cannot scan file data: %w", err)
	}
	if b.Empty() {
		return 0, nil
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, fmt.Errorf("cannot sweep file data: %w", err)
	}
	return swept, nil
}

// loadCounters sets the file counters from the stored metadata.
func (p *Pebble) loadCounters() error {
	it, err := p.db.NewIter(&pebble.IterOptions{
		LowerBound: []byte(prefixFileMeta),
		UpperBound: prefixEnd([]byte(prefixFileMeta)),
	})
	if err != nil {
		return fmt.Errorf("cannot scan file metadata: %w", err)
	}
	defer it.Close()
	var count, size int64
	var f File
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("cannot read file metadata: %w", err)
		}
		if err := decodeFileMeta(v, &f); err != nil {
			return fmt.Errorf("cannot load file metadata %q: %w", it.Key(), err)
		}
		count++
		size += f.Size
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("cannot scan file metadata: %w", err)
	}
	p.files.Store(count)
	p.bytes.Store(size)
	return nil
}

// get returns a copy of the value of key, or ErrNotFound.
func (p *Pebble) get(key []byte) ([]byte, error) {
	v, closer, err := p.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read %q: %w", key, err)
	}
	v = slices.Clone(v)
	return v, closer.Close()
}

// exists reports whether key is present.
func (p *Pebble) exists(key []byte) (bool, error) {
	_, closer, err := p.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot read %q: %w", key, err)
	}
	return true, closer.Close()
}

// numStripes is the number of record locks; a power of two.
const numStripes = 256

// stripes is a fixed set of mutexes, one chosen per record by a hash of its key.
type stripes struct {
	seed maphash.Seed
	mu   [numStripes]sync.Mutex
}

// of returns the stripe of the record named by the parts.
func (s *stripes) of(parts ...string) int {
	var h maphash.Hash
	h.SetSeed(s.seed)
	for _, part := range parts {
		h.WriteString(part)
		h.WriteByte(0)
	}
	return int(h.Sum64() & (numStripes - 1))
}

// lockSet locks the given stripes in ascending order (so that two sets never deadlock) and
// returns the function that unlocks them. It sorts and deduplicates idx in place.
func (s *stripes) lockSet(idx []int) (unlock func()) {
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		s.mu[i].Lock()
	}
	return func() {
		for _, i := range idx {
			s.mu[i].Unlock()
		}
	}
}
