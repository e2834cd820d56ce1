package keys

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"slices"
	"sync/atomic"
	"time"

	"github.com/modelgate/gateway/proxy/config"
)

// Source says where a key comes from.
type Source uint8

const (
	// SourceConfig is a key of the config file's keys: read-only at runtime.
	SourceConfig Source = iota
	// SourceStore is a key made through the admin API, held in the store.
	SourceStore
)

func (s Source) String() string {
	if s == SourceConfig {
		return "config"
	}
	return "api"
}

// Entry is one key as the request path sees it. Read-only once in a snapshot.
type Entry struct {
	ID      string
	Source  Source
	Blocked bool
	// Expires is when the key stops working, in Unix nanoseconds; 0 never.
	Expires int64
	// Models are the models the key may call; nil every model.
	Models *Models
	// Limits are the key's rate limits; nil none.
	Limits *config.KeyLimits
	// Budget is the key's own budget (nil none); Budgets the named budgets it spends.
	Budget  *config.KeyBudget
	Budgets []string
	// Record is the key's stored record; nil for a key of the config.
	Record *Record
}

// Verdict is the outcome of a lookup.
type Verdict uint8

const (
	// Valid: the key may call.
	Valid Verdict = iota
	// Unknown: no key has this secret (or it is an earlier secret past its overlap).
	Unknown
	// Blocked: the key is blocked.
	Blocked
	// Expired: the key is past its expiry.
	Expired
)

// secret is one digest's entry: the key, and until when an earlier secret works (0 for
// the current secret).
type secret struct {
	e      *Entry
	digest Digest
	until  int64
}

// Snapshot is the read-only index of every key in force on this node at one version. Safe
// for concurrent use; never changed once built (a change builds the next one).
type Snapshot struct {
	byDigest map[Digest]secret
	byID     map[string]*Entry
	ids      []string // sorted
	// Version is the store's version this snapshot reflects (0 without a store).
	Version uint64
	// Built is when the snapshot was made from the store's answer.
	Built time.Time
}

// Build makes a snapshot of the config's keys seed and the stored entries. A stored key
// with the id or a secret of a seed key is left out: the config wins.
func Build(seed []config.Key, stored map[string]*Entry, version uint64, built time.Time) *Snapshot {
	s := &Snapshot{
		byDigest: make(map[Digest]secret, len(seed)+len(stored)),
		byID:     make(map[string]*Entry, len(seed)+len(stored)),
		Version:  version, Built: built,
	}
	for i := range seed {
		k := &seed[i]
		e := &Entry{ID: k.ID, Source: SourceConfig, Limits: k.Limits, Budget: k.Budget, Budgets: k.Budgets}
		var d Digest
		if k.Key != "" {
			d = sha256.Sum256([]byte(k.Key))
		} else {
			hex.Decode(d[:], []byte(k.SHA256)) // validated with the config
		}
		s.byDigest[d] = secret{e: e, digest: d}
		s.byID[k.ID] = e
	}
	for id, e := range stored {
		if _, taken := s.byID[id]; taken {
			continue
		}
		if !s.addStored(e) {
			continue
		}
		s.byID[id] = e
	}
	s.ids = make([]string, 0, len(s.byID))
	for id := range s.byID {
		s.ids = append(s.ids, id)
	}
	slices.Sort(s.ids)
	return s
}

// addStored indexes the secrets of a stored entry, unless one of them is a seed key's.
func (s *Snapshot) addStored(e *Entry) bool {
	r := e.Record
	d, err := parseDigest(r.Digest)
	if err != nil {
		return false
	}
	if o, taken := s.byDigest[d]; taken && o.e.Source == SourceConfig {
		return false
	}
	s.byDigest[d] = secret{e: e, digest: d}
	for _, p := range r.Previous {
		pd, err := parseDigest(p.Digest)
		if err != nil {
			continue
		}
		if _, taken := s.byDigest[pd]; !taken {
			s.byDigest[pd] = secret{e: e, digest: pd, until: p.Until.UnixNano()}
		}
	}
	return true
}

// EntryOf returns the entry of a stored record.
func EntryOf(r *Record) *Entry {
	e := &Entry{ID: r.ID, Source: SourceStore, Blocked: r.Blocked, Models: NewModels(r.Models), Limits: r.Limits.Config(),
		Budget: r.Budget.Config(), Budgets: r.Budgets, Record: r}
	if r.ExpiresAt != nil {
		e.Expires = r.ExpiresAt.UnixNano()
	}
	return e
}

// Lookup finds the key whose secret is key at time now (Unix nanoseconds). It does not
// allocate. The map is keyed by the digest, so its timing says nothing usable about any
// secret; the final equality check is constant-time.
func (s *Snapshot) Lookup(key []byte, now int64) (*Entry, Verdict) {
	if s == nil || len(key) == 0 {
		return nil, Unknown
	}
	d := sha256.Sum256(key)
	sec, ok := s.byDigest[d]
	if !ok || subtle.ConstantTimeCompare(sec.digest[:], d[:]) != 1 {
		return nil, Unknown
	}
	switch e := sec.e; {
	case sec.until != 0 && now >= sec.until:
		return nil, Unknown
	case e.Blocked:
		return e, Blocked
	case e.Expires != 0 && now >= e.Expires:
		return e, Expired
	default:
		return e, Valid
	}
}

// Verify is Lookup as a Verifier: the id of a key that may call now.
func (s *Snapshot) Verify(key []byte) (string, bool) {
	e, v := s.Lookup(key, time.Now().UnixNano())
	if v != Valid {
		return "", false
	}
	return e.ID, true
}

// Get returns the entry of id.
func (s *Snapshot) Get(id string) (*Entry, bool) {
	e, ok := s.byID[id]
	return e, ok
}

// Len returns the number of keys.
func (s *Snapshot) Len() int { return len(s.ids) }

// After returns up to limit entries whose ids sort after after and that match (nil: all),
// in id order, and whether more follow.
func (s *Snapshot) After(after string, limit int, match func(*Entry) bool) ([]*Entry, bool) {
	i, _ := slices.BinarySearch(s.ids, after)
	if i < len(s.ids) && s.ids[i] == after {
		i++
	}
	var out []*Entry
	for ; i < len(s.ids); i++ {
		e := s.byID[s.ids[i]]
		if match != nil && !match(e) {
			continue
		}
		if len(out) == limit {
			return out, true
		}
		out = append(out, e)
	}
	return out, false
}

// Limits returns every key's limits in the config's shape, for the rate limiter.
func (s *Snapshot) Limits() []config.Key {
	out := make([]config.Key, 0, len(s.ids))
	for _, id := range s.ids {
		if e := s.byID[id]; e.Limits != nil {
			out = append(out, config.Key{ID: id, Limits: e.Limits})
		}
	}
	return out
}

// Budgets returns every key's budgets in the config's shape, for the spend ledger: the
// config's keys and the stored ones alike.
func (s *Snapshot) Budgets() []config.Key {
	var out []config.Key
	for _, id := range s.ids {
		if e := s.byID[id]; e.Budget != nil || len(e.Budgets) > 0 {
			out = append(out, config.Key{ID: id, Budget: e.Budget, Budgets: e.Budgets})
		}
	}
	return out
}

// Live holds the snapshot in force; a swap is one atomic store. The zero value holds nil
// (which accepts no key). Safe for concurrent use.
type Live struct{ p atomic.Pointer[Snapshot] }

// Load returns the snapshot in force.
func (l *Live) Load() *Snapshot { return l.p.Load() }

// Store puts s in force.
func (l *Live) Store(s *Snapshot) { l.p.Store(s) }
