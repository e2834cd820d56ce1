package store

import "context"

// The callers' keys are records: a Blobs keeps them in its records engine, as it keeps
// the files' records there, so that a store with object storage serves keys at runtime
// as the engine alone would.

var _ KeyStore = (*Blobs)(nil)

// PutKey is the records engine's (see KeyStore).
func (b *Blobs) PutKey(id string, data, prev []byte) (uint64, error) {
	return b.records.PutKey(id, data, prev)
}

// DeleteKey is the records engine's (see KeyStore).
func (b *Blobs) DeleteKey(id string, prev []byte) (uint64, error) {
	return b.records.DeleteKey(id, prev)
}

// GetKey is the records engine's (see KeyStore).
func (b *Blobs) GetKey(id string) ([]byte, error) { return b.records.GetKey(id) }

// ListKeys is the records engine's (see KeyStore).
func (b *Blobs) ListKeys() ([]KeyRecord, uint64, error) { return b.records.ListKeys() }

// KeyChangesSince is the records engine's (see KeyStore).
func (b *Blobs) KeyChangesSince(since uint64) (KeyChanges, error) {
	return b.records.KeyChangesSince(since)
}

// WatchKeys is the records engine's (see KeyStore).
func (b *Blobs) WatchKeys(ctx context.Context, fn func(version uint64)) error {
	return b.records.WatchKeys(ctx, fn)
}
