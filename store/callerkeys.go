package store

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Callers' keys managed at runtime: the store holds each key's record as opaque bytes (the
// proxy encodes them) under the key's id, and a version number that every change raises by
// one. Nodes keep the set in memory and follow the version (see KeyStore).

// ErrConflict reports a conditional write of a key record whose stored value is not the one
// the caller read: another change came first. Read again and retry.
var ErrConflict = errors.New("store: changed by another writer")

// Limits of the key records.
const (
	// MaxKeyIDLen is the longest key id in bytes (the id is an owner too: see MaxOwnerLen).
	MaxKeyIDLen = MaxOwnerLen
	// MaxKeyRecordLen is the longest encoded key record in bytes.
	MaxKeyRecordLen = 64 << 10
)

// KeyRecord is one caller key's record: its id and its encoded value. Data nil in a
// KeyChanges entry means the key was deleted.
type KeyRecord struct {
	ID   string
	Data []byte
}

// KeyChanges is what changed in the key records after a version: the version now, and
// either the records changed since (Full false) or, when the engine cannot tell (the
// version is too old for its change log, or ahead of the store's), Full true: the caller
// reloads the whole set with ListKeys.
type KeyChanges struct {
	Version uint64
	Full    bool
	Changed []KeyRecord
}

// KeyStore holds the records of the callers' keys made at runtime, and their version.
//
// Every change (PutKey, DeleteKey) is durable when it returns, as a Store write is, and
// raises the version by exactly one in the same atomic step; it is announced to WatchKeys
// after that. Implementations are safe for concurrent use.
type KeyStore interface {
	// PutKey writes data under id when the stored value is prev: nil prev means the id
	// must be absent (else ErrExists); otherwise a different stored value, or none, is
	// ErrConflict. It returns the version of the change.
	PutKey(id string, data, prev []byte) (version uint64, err error)
	// DeleteKey removes id when its stored value is prev (else ErrConflict; ErrNotFound
	// when absent) and returns the version of the change.
	DeleteKey(id string, prev []byte) (version uint64, err error)
	// GetKey returns the value of id, or ErrNotFound.
	GetKey(id string) ([]byte, error)
	// ListKeys returns every record, in no order, and the version they are at, read in
	// one atomic step.
	ListKeys() ([]KeyRecord, uint64, error)
	// KeyChangesSince returns what changed after version since, read in one atomic step.
	KeyChangesSince(since uint64) (KeyChanges, error)
	// WatchKeys calls fn with the version of each change announced, from one goroutine,
	// until ctx ends; it returns ctx's error then, or an error when it cannot watch. A
	// change may be announced late, twice or never (a cut connection): fn is a hint to
	// look (KeyChangesSince), never the change itself.
	WatchKeys(ctx context.Context, fn func(version uint64)) error
}

// ValidKeyID reports whether id can name a key record: 1..MaxKeyIDLen bytes of UTF-8 with
// none of the bytes that the record's keys, logs or URLs would read otherwise: no NUL or
// other control byte, no space, no '{', '}', '/', '?', '#' or '%'.
func ValidKeyID(id string) bool {
	if id == "" || len(id) > MaxKeyIDLen || !utf8.ValidString(id) {
		return false
	}
	for _, r := range id {
		if r <= ' ' || r == 0x7f || r == '{' || r == '}' || r == '/' || r == '?' || r == '#' || r == '%' {
			return false
		}
	}
	return true
}

func validateKeyRecord(id string, data []byte) error {
	if !ValidKeyID(id) {
		return fmt.Errorf("cannot put key %q: %w", id, ErrInvalid)
	}
	if len(data) == 0 || len(data) > MaxKeyRecordLen {
		return fmt.Errorf("cannot put key %q: record of %d bytes: %w", id, len(data), ErrInvalid)
	}
	return nil
}
