package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Keys of the callers' key records in the Pebble engine:
//
//	k/<id>      → the record's value
//	kv          → the version, 8 bytes big-endian
const (
	prefixCallerKey  = "k/"
	callerKeyVersion = "kv"
)

func callerKey(id string) []byte { return append([]byte(prefixCallerKey), id...) }

// PutKey writes data under id when the stored value is prev (see KeyStore).
func (p *Pebble) PutKey(id string, data, prev []byte) (uint64, error) {
	if err := validateKeyRecord(id, data); err != nil {
		return 0, err
	}
	return p.changeKey(id, data, prev)
}

// DeleteKey removes id when its stored value is prev (see KeyStore).
func (p *Pebble) DeleteKey(id string, prev []byte) (uint64, error) {
	if !ValidKeyID(id) {
		return 0, ErrNotFound
	}
	return p.changeKey(id, nil, prev)
}

// changeKey sets (data not nil) or deletes id and raises the version, in one synced batch,
// when the stored value is prev.
func (p *Pebble) changeKey(id string, data, prev []byte) (uint64, error) {
	p.keysMu.Lock()
	defer p.keysMu.Unlock()
	key := callerKey(id)
	cur, err := p.get(key)
	switch {
	case err != nil && !errors.Is(err, ErrNotFound):
		return 0, err
	case data == nil && cur == nil:
		return 0, fmt.Errorf("cannot delete key %q: %w", id, ErrNotFound)
	case prev == nil && data != nil && cur != nil:
		return 0, fmt.Errorf("cannot create key %q: %w", id, ErrExists)
	case prev != nil && !bytes.Equal(cur, prev):
		return 0, fmt.Errorf("cannot change key %q: %w", id, ErrConflict)
	}
	v, err := p.keysVersion()
	if err != nil {
		return 0, err
	}
	v++
	b := p.db.NewBatch()
	defer b.Close()
	if data != nil {
		_ = b.Set(key, data, nil)
	} else {
		_ = b.Delete(key, nil)
	}
	_ = b.Set([]byte(callerKeyVersion), binary.BigEndian.AppendUint64(nil, v), nil)
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, fmt.Errorf("cannot change key %q: %w", id, err)
	}
	if p.keysNote != nil {
		close(p.keysNote)
		p.keysNote = nil
	}
	return v, nil
}

// keysVersion reads the version; 0 when no key was ever changed.
func (p *Pebble) keysVersion() (uint64, error) {
	v, err := p.get([]byte(callerKeyVersion))
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil || len(v) != 8 {
		return 0, fmt.Errorf("cannot read the keys' version: %v", err)
	}
	return binary.BigEndian.Uint64(v), nil
}

// GetKey returns the value of id, or ErrNotFound.
func (p *Pebble) GetKey(id string) ([]byte, error) {
	if !ValidKeyID(id) {
		return nil, ErrNotFound
	}
	return p.get(callerKey(id))
}

// ListKeys returns every record and their version, read from one snapshot of the database.
func (p *Pebble) ListKeys() ([]KeyRecord, uint64, error) {
	snap := p.db.NewSnapshot()
	defer snap.Close()
	var v uint64
	switch b, closer, err := snap.Get([]byte(callerKeyVersion)); {
	case err == nil:
		v = binary.BigEndian.Uint64(b)
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return nil, 0, fmt.Errorf("cannot read the keys' version: %w", err)
	}
	lo := []byte(prefixCallerKey)
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return nil, 0, fmt.Errorf("cannot list keys: %w", err)
	}
	var recs []KeyRecord
	for it.First(); it.Valid(); it.Next() {
		recs = append(recs, KeyRecord{ID: string(it.Key()[len(lo):]), Data: slices.Clone(it.Value())})
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, 0, fmt.Errorf("cannot list keys: %w", err)
	}
	return recs, v, nil
}

// KeyChangesSince tells whether the version moved since since; the embedded engine keeps no
// change log, so a move is answered Full: one node owns the store, and its reload is a
// local scan.
func (p *Pebble) KeyChangesSince(since uint64) (KeyChanges, error) {
	p.keysMu.Lock()
	v, err := p.keysVersion()
	p.keysMu.Unlock()
	if err != nil {
		return KeyChanges{}, err
	}
	return KeyChanges{Version: v, Full: v != since}, nil
}

// WatchKeys calls fn after each change made through p: one process owns the store, so
// every change is seen here.
func (p *Pebble) WatchKeys(ctx context.Context, fn func(version uint64)) error {
	for {
		p.keysMu.Lock()
		if p.keysNote == nil {
			p.keysNote = make(chan struct{})
		}
		note := p.keysNote
		v, err := p.keysVersion()
		p.keysMu.Unlock()
		if err != nil {
			return err
		}
		fn(v)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-note:
		}
	}
}
