package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Set, Delete and DeleteRange of an unindexed pebble.Batch cannot fail; their errors are
// dropped below.

// PutFile streams r into chunks, runs the FileFinisher of r if it has one, then commits the
// metadata and expiry entry in one synced batch (synced as the store's Durability says):
// that commit is the moment the file becomes visible. The first chunk is committed without
// sync; the synced commit that follows makes it durable too, since the WAL is written and
// synced in order. The chunks after it go into a table of the upload's own, which Pebble
// ingests, synced, before the metadata commit (see uploadTable). On failure the chunks
// written so far are deleted; should that deletion not reach the disk, the sweep of the next
// OpenPebble finishes it.
func (p *Pebble) PutFile(f File, r io.Reader, maxSize int64) (File, error) {
	return uploadFile(f, r, maxSize, p.chunkSize, p.beginUpload)
}

// pebbleUpload is one PutFile of the Pebble engine: its claim on the id, the batch of its
// first chunk, the table of the others once there are others, and the key they are written
// under.
type pebbleUpload struct {
	p       *Pebble
	f       *File
	release func()
	b       *pebble.Batch
	table   *uploadTable
	key     []byte
	base    int // length of the chunks' key prefix in key
}

func (p *Pebble) beginUpload(f *File) (upload, error) {
	release, err := p.claimFileID(f.Owner, f.ID)
	if err != nil {
		return nil, err
	}
	key := appendChunkPrefix(make([]byte, 0, 64), f.Owner, f.ID)
	return &pebbleUpload{p: p, f: f, release: release, b: p.db.NewBatch(), key: key, base: len(key)}, nil
}

// put commits the first chunk without waiting for the disk, and adds each later one to the
// upload's table.
func (u *pebbleUpload) put(idx uint32, chunk []byte) error {
	u.key = binary.BigEndian.AppendUint32(u.key[:u.base], idx)
	if idx == 0 {
		_ = u.b.Set(u.key, chunk, nil)
		if err := u.b.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("cannot write file data: %w", err)
		}
		return nil
	}
	if u.table == nil {
		t, err := u.p.newUploadTable()
		if err != nil {
			return err
		}
		u.table = t
	}
	return u.table.set(u.key, chunk)
}

// commit ingests the table, if the file has one, then makes the file visible.
func (u *pebbleUpload) commit(f *File) error {
	if err := u.ingestTable(); err != nil {
		return err
	}
	return u.p.commitFile(f)
}

// ingestTable has Pebble take the upload's table, if it has one: from then on every chunk is
// in the store, invisible until the metadata commit.
func (u *pebbleUpload) ingestTable() error {
	t := u.table
	if t == nil {
		return nil
	}
	u.table = nil
	return t.ingest(u.p.db)
}

// abort drops an unfinished table and deletes the chunks committed or ingested.
func (u *pebbleUpload) abort() error {
	if u.table != nil {
		u.table.discard()
		u.table = nil
	}
	return u.p.deleteChunks(u.f.Owner, u.f.ID)
}

// end closes the batch and ends the claim.
func (u *pebbleUpload) end() {
	if u.table != nil { // not reached by uploadFile, which commits or aborts first
		u.table.discard()
	}
	u.b.Close()
	u.release()
}

// claimFileID marks owner's id as being uploaded, after checking that no upload, file or
// leftover chunk uses it. The returned function ends the claim.
func (p *Pebble) claimFileID(owner, id string) (release func(), err error) {
	name := owner + "\x00" + id
	p.uploadingMu.Lock()
	_, busy := p.uploading[name]
	if !busy {
		p.uploading[name] = struct{}{}
	}
	p.uploadingMu.Unlock()
	if busy {
		return nil, fmt.Errorf("cannot put file %q: %w", id, ErrExists)
	}
	release = func() {
		p.uploadingMu.Lock()
		delete(p.uploading, name)
		p.uploadingMu.Unlock()
	}
	used, err := p.fileIDUsed(owner, id)
	if err == nil && used {
		err = fmt.Errorf("cannot put file %q: %w", id, ErrExists)
	}
	if err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// fileIDUsed reports whether owner has metadata or chunks under id.
func (p *Pebble) fileIDUsed(owner, id string) (bool, error) {
	meta, err := p.exists(appendFileKey(nil, owner, id))
	if err != nil || meta {
		return meta, err
	}
	prefix := appendChunkPrefix(nil, owner, id)
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return false, fmt.Errorf("cannot scan file data: %w", err)
	}
	chunk := it.First()
	return chunk, it.Close() // Close returns the iterator's error

}

// commitFile makes f visible: metadata and expiry entry in one synced batch.
func (p *Pebble) commitFile(f *File) error {
	b := p.db.NewBatch()
	defer b.Close()
	key := appendFileKey(make([]byte, 0, 64), f.Owner, f.ID)
	_ = b.Set(key, appendFileMeta(make([]byte, 0, 64), f), nil)
	if !f.Expires.IsZero() {
		_ = b.Set(appendExpiryKey(key[:0], f.Expires, f.Owner, f.ID), nil, nil)
	}
	mu := &p.locks.mu[p.locks.of(f.Owner, f.ID)]
	mu.Lock()
	defer mu.Unlock()
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot commit file %q: %w", f.ID, err)
	}
	p.files.Add(1)
	p.bytes.Add(f.Size)
	return nil
}

// deleteChunks removes every chunk of owner's id. It does not wait for the disk: chunks
// without metadata are invisible, and OpenPebble sweeps any that survive a crash.
func (p *Pebble) deleteChunks(owner, id string) error {
	b := p.db.NewBatch()
	defer b.Close()
	deleteChunkRange(b, owner, id)
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("cannot delete data of file %q: %w", id, err)
	}
	return nil
}

func deleteChunkRange(b *pebble.Batch, owner, id string) {
	start := appendChunkPrefix(nil, owner, id)
	_ = b.DeleteRange(start, prefixEnd(start), nil)
}

// GetFile returns the metadata of an unexpired file of owner, or ErrNotFound.
func (p *Pebble) GetFile(owner, id string, now time.Time) (File, error) {
	return unexpiredFile(p.getFileMeta, owner, id, now)
}

// getFileMeta returns the metadata of owner's id, expired or not, or ErrNotFound.
func (p *Pebble) getFileMeta(owner, id string) (File, error) {
	if !ValidFileID(id) {
		return File{}, ErrNotFound
	}
	var buf [64]byte
	v, closer, err := p.db.Get(appendFileKey(buf[:0], owner, id))
	if errors.Is(err, pebble.ErrNotFound) {
		return File{}, ErrNotFound
	}
	if err != nil {
		return File{}, fmt.Errorf("cannot get file %q: %w", id, err)
	}
	f := File{ID: id, Owner: owner}
	err = decodeFileMeta(v, &f)
	closer.Close()
	if err != nil {
		return File{}, fmt.Errorf("cannot get file %q: %w", id, err)
	}
	return f, nil
}

// AppendFileData appends the bytes of an unexpired file of owner to dst. Metadata and chunks
// are read through one iterator, so they come from one consistent view.
func (p *Pebble) AppendFileData(dst []byte, owner, id string, now time.Time) ([]byte, error) {
	if !ValidOwner(owner) {
		return dst, fmt.Errorf("cannot read file: owner %q: %w", owner, ErrInvalid)
	}
	if !ValidFileID(id) {
		return dst, ErrNotFound
	}
	metaKey := appendFileKey(nil, owner, id)
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: metaKey, UpperBound: append(slices.Clip(metaKey), 0)})
	if err != nil {
		return dst, fmt.Errorf("cannot read file %q: %w", id, err)
	}
	defer it.Close()
	if !it.First() {
		if err := it.Error(); err != nil {
			return dst, fmt.Errorf("cannot read file %q: %w", id, err)
		}
		return dst, ErrNotFound
	}
	v, err := it.ValueAndErr()
	f := File{ID: id, Owner: owner}
	if err == nil {
		err = decodeFileMeta(v, &f)
	}
	if err != nil {
		return dst, fmt.Errorf("cannot read file %q: %w", id, err)
	}
	if f.Expired(now) {
		return dst, ErrNotFound
	}
	prefix := appendChunkPrefix(nil, owner, id)
	it.SetBounds(prefix, prefixEnd(prefix))
	return appendChunks(dst, it, &f)
}

// appendChunks appends the chunks it yields to dst, checking their order and total size.
func appendChunks(dst []byte, it *pebble.Iterator, f *File) ([]byte, error) {
	dst = slices.Grow(dst, int(f.Size))
	start := len(dst)
	next := uint32(0)
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if binary.BigEndian.Uint32(k[len(k)-chunkIdxLen:]) != next {
			return dst[:start], fmt.Errorf("cannot read file %q: chunk %d missing: %w", f.ID, next, errCorrupt)
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return dst[:start], fmt.Errorf("cannot read file %q: %w", f.ID, err)
		}
		dst = append(dst, v...)
		next++
	}
	if err := it.Error(); err != nil {
		return dst[:start], fmt.Errorf("cannot read file %q: %w", f.ID, err)
	}
	if n := int64(len(dst) - start); n != f.Size {
		return dst[:start], fmt.Errorf("cannot read file %q: %d bytes of %d: %w", f.ID, n, f.Size, errCorrupt)
	}
	return dst, nil
}

// DeleteFile durably removes an unexpired file of owner, metadata and bytes, or returns
// ErrNotFound. The bytes' space returns to the disk as Pebble compacts the range deletion.
func (p *Pebble) DeleteFile(owner, id string) error {
	if !ValidOwner(owner) {
		return fmt.Errorf("cannot delete file: owner %q: %w", owner, ErrInvalid)
	}
	mu := &p.locks.mu[p.locks.of(owner, id)]
	mu.Lock()
	defer mu.Unlock()
	f, err := p.getFileMeta(owner, id)
	if err != nil {
		return err
	}
	if f.Expired(p.now()) {
		return ErrNotFound
	}
	b := p.db.NewBatch()
	defer b.Close()
	deleteFileKeys(b, &f)
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("cannot delete file %q: %w", id, err)
	}
	p.files.Add(-1)
	p.bytes.Add(-f.Size)
	return nil
}

// deleteFileKeys adds the deletion of f's metadata, expiry entry and chunks to b.
func deleteFileKeys(b *pebble.Batch, f *File) {
	key := appendFileKey(nil, f.Owner, f.ID)
	_ = b.Delete(key, nil)
	if !f.Expires.IsZero() {
		_ = b.Delete(appendExpiryKey(key[:0], f.Expires, f.Owner, f.ID), nil)
	}
	deleteChunkRange(b, f.Owner, f.ID)
}

// ReclaimExpired removes the files whose Expires is at or before now, a group of them per
// synced commit, and returns how many it removed.
func (p *Pebble) ReclaimExpired(now time.Time) (int, error) {
	upper := prefixEnd(binary.BigEndian.AppendUint64([]byte(prefixFileExpiry), sortableNanos(now)))
	return p.reclaimRange([]byte(prefixFileExpiry), upper, "file expiry", p.reclaimFileGroup)
}

// reclaimRange hands the keys in [lower, upper) to reclaim, reclaimGroup keys at a time,
// and returns how many records reclaim removed.
func (p *Pebble) reclaimRange(lower, upper []byte, what string, reclaim func([][]byte) (int, error)) (int, error) {
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return 0, fmt.Errorf("cannot scan %s: %w", what, err)
	}
	defer it.Close()
	removed := 0
	group := make([][]byte, 0, reclaimGroup)
	for ok := it.First(); ok; ok = it.Next() {
		group = append(group, bytes.Clone(it.Key()))
		if len(group) < reclaimGroup {
			continue
		}
		n, err := reclaim(group)
		removed += n
		if err != nil {
			return removed, err
		}
		group = group[:0]
	}
	if err := it.Error(); err != nil {
		return removed, fmt.Errorf("cannot scan %s: %w", what, err)
	}
	n, err := reclaim(group)
	return removed + n, err
}

// reclaimFileGroup removes the files named by a group of expiry keys, each provided it still
// exists with that expiry; expiry keys of files gone meanwhile just go.
func (p *Pebble) reclaimFileGroup(expiryKeys [][]byte) (int, error) {
	if len(expiryKeys) == 0 {
		return 0, nil
	}
	idx := make([]int, 0, len(expiryKeys))
	for _, k := range expiryKeys {
		_, owner, id, _ := parseExpiryKey(k)
		idx = append(idx, p.locks.of(string(owner), string(id)))
	}
	unlock := p.locks.lockSet(idx)
	defer unlock()

	b := p.db.NewBatch()
	defer b.Close()
	var removed, size int64
	for _, k := range expiryKeys {
		expires, owner, id, ok := parseExpiryKey(k)
		if !ok {
			return 0, fmt.Errorf("cannot reclaim files: malformed key %q", k)
		}
		f, err := p.getFileMeta(string(owner), string(id))
		switch {
		case errors.Is(err, ErrNotFound):
			_ = b.Delete(k, nil)
		case err != nil:
			return 0, err
		case sortableNanos(f.Expires) == expires:
			deleteFileKeys(b, &f)
			removed++
			size += f.Size
		default:
			_ = b.Delete(k, nil)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return 0, fmt.Errorf("cannot reclaim files: %w", err)
	}
	p.files.Add(-removed)
	p.bytes.Add(-size)
	return int(removed), nil
}
