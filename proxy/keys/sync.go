package keys

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/store"
)

// DefaultCheckEvery is how often a Syncer asks the store for its version when no
// announcement came: the bound of staleness when every announcement is lost.
const DefaultCheckEvery = 250 * time.Millisecond

// SyncOptions configure NewSyncer. The zero value means the defaults.
type SyncOptions struct {
	// Store holds the keys made at runtime; nil means the seed alone.
	Store store.KeyStore
	// CheckEvery is the period of the version check; 0 means DefaultCheckEvery.
	CheckEvery time.Duration
	// OnSwap, when set, is called after each snapshot put in force, from the goroutine
	// that made it (one at a time).
	OnSwap func(*Snapshot)
	// Logger receives a line when the store cannot be read, and when it can again; nil
	// means slog.Default.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Syncer keeps one node's snapshot true to the store. Each refresh asks the store what
// changed since the version held (KeyChangesSince): nothing, the changed records, or
// (a gap the change log cannot fill) a reload of the whole set. A refresh runs on each
// announcement of a newer version and every CheckEvery at least.
//
// Create it with NewSyncer; safe for concurrent use.
type Syncer struct {
	live Live
	opts SyncOptions
	log  *slog.Logger

	mu      sync.Mutex // serializes refreshes and seed changes
	seed    []config.Key
	entries map[string]*Entry // the stored keys, by id
	version uint64
	synced  bool // entries were read from the store at least once

	kick     chan struct{}
	lastOK   atomic.Int64 // Unix nanoseconds of the last refresh that reached the store
	failing  atomic.Bool
	full     atomic.Uint64
	partial  atomic.Uint64
	failures atomic.Uint64
}

// NewSyncer returns a syncer of the seed and, when opts.Store is set, the store; its
// first snapshot holds the seed alone until Refresh or Run reads the store.
func NewSyncer(seed []config.Key, opts SyncOptions) *Syncer {
	if opts.CheckEvery <= 0 {
		opts.CheckEvery = DefaultCheckEvery
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Syncer{opts: opts, log: opts.Logger, seed: seed, entries: map[string]*Entry{}, kick: make(chan struct{}, 1)}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.lastOK.Store(opts.Now().UnixNano())
	s.swap()
	return s
}

// Live returns the holder of the snapshot in force.
func (s *Syncer) Live() *Live { return &s.live }

// Load returns the snapshot in force.
func (s *Syncer) Load() *Snapshot { return s.live.Load() }

// HasStore reports whether keys are kept in a store (else the seed alone is in force).
func (s *Syncer) HasStore() bool { return s.opts.Store != nil }

// SetSeed puts the config's keys of a reload in force.
func (s *Syncer) SetSeed(seed []config.Key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seed = seed
	s.swap()
}

// Seed returns the config's keys in force.
func (s *Syncer) Seed() []config.Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seed
}

// swap builds and puts in force the snapshot of the seed and entries; s.mu is held.
func (s *Syncer) swap() {
	snap := Build(s.seed, s.entries, s.version, s.opts.Now())
	s.live.Store(snap)
	if s.opts.OnSwap != nil {
		s.opts.OnSwap(snap)
	}
}

// Refresh brings the snapshot up to the store's version now, and returns it.
func (s *Syncer) Refresh() (uint64, error) {
	if s.opts.Store == nil {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.refresh()
	if err != nil {
		s.failures.Add(1)
		if !s.failing.Swap(true) {
			s.log.Warn("keys: cannot read the store: serving the last snapshot", "version", s.version, "err", err)
		}
		return s.version, err
	}
	s.lastOK.Store(s.opts.Now().UnixNano())
	if s.failing.Swap(false) {
		s.log.Info("keys: the store answers again", "version", s.version)
	}
	return s.version, nil
}

// refresh reads what changed since s.version; s.mu is held.
func (s *Syncer) refresh() error {
	if !s.synced {
		return s.reload()
	}
	ch, err := s.opts.Store.KeyChangesSince(s.version)
	if err != nil {
		return err
	}
	if ch.Full {
		return s.reload()
	}
	if ch.Version == s.version {
		return nil
	}
	entries := maps.Clone(s.entries)
	for _, r := range ch.Changed {
		if r.Data == nil {
			delete(entries, r.ID)
			continue
		}
		rec, err := Decode(r.ID, r.Data)
		if err != nil {
			s.log.Error("keys: a stored key is unreadable and left out", "id", r.ID, "err", err)
			delete(entries, r.ID)
			continue
		}
		entries[r.ID] = EntryOf(rec)
	}
	s.entries, s.version = entries, ch.Version
	s.partial.Add(1)
	s.swap()
	return nil
}

// reload reads every record; s.mu is held.
func (s *Syncer) reload() error {
	recs, v, err := s.opts.Store.ListKeys()
	if err != nil {
		return err
	}
	entries := make(map[string]*Entry, len(recs))
	for _, r := range recs {
		rec, err := Decode(r.ID, r.Data)
		if err != nil {
			s.log.Error("keys: a stored key is unreadable and left out", "id", r.ID, "err", err)
			continue
		}
		entries[r.ID] = EntryOf(rec)
	}
	s.entries, s.version, s.synced = entries, v, true
	s.full.Add(1)
	s.swap()
	return nil
}

// Run follows the store until ctx ends: it refreshes on each announcement of a version
// newer than the one held, and every CheckEvery.
func (s *Syncer) Run(ctx context.Context) {
	if s.opts.Store == nil {
		return
	}
	go func() {
		err := s.opts.Store.WatchKeys(ctx, func(v uint64) {
			if v > s.Load().Version {
				s.Kick()
			}
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("keys: cannot watch the store's announcements: the periodic check alone bounds staleness", "err", err)
		}
	}()
	t := time.NewTicker(s.opts.CheckEvery)
	defer t.Stop()
	for {
		s.Refresh()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.kick:
		}
	}
}

// Kick asks Run for a refresh now.
func (s *Syncer) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Fresh reports whether the store was read within maxAge (always true without a store).
func (s *Syncer) Fresh(maxAge time.Duration) bool {
	if s.opts.Store == nil {
		return true
	}
	s.mu.Lock()
	synced := s.synced
	s.mu.Unlock()
	return synced && s.opts.Now().Sub(time.Unix(0, s.lastOK.Load())) <= maxAge
}

// Stats are a syncer's figures for metrics and the status page.
type Stats struct {
	Version uint64
	Keys    int
	// Age is how long ago the store was last read successfully (or the syncer made, when
	// it never was); -1 without a store.
	Age      time.Duration
	Full     uint64 // whole reloads
	Partial  uint64 // refreshes that read the changed records alone
	Failures uint64 // refreshes that could not read the store
}

// Stats returns the syncer's figures now.
func (s *Syncer) Stats() Stats {
	snap := s.Load()
	st := Stats{Version: snap.Version, Keys: snap.Len(), Age: -1,
		Full: s.full.Load(), Partial: s.partial.Load(), Failures: s.failures.Load()}
	if s.opts.Store != nil {
		st.Age = s.opts.Now().Sub(time.Unix(0, s.lastOK.Load()))
	}
	return st
}
