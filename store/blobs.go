package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
)

// Blobs is a Store whose file bytes live in S3-compatible object storage while every record
// (file metadata, listing order, Responses ownership) stays in a records engine (Pebble or
// Redis). The records engine then holds about a hundred bytes per file, whatever its size.
//
// An upload claims the file id in the records engine, writes the object (in one PUT, or in
// a multipart upload for a file over one part), then commits the record: PutFile returns
// only once both are durable, and the file is visible only from the record's commit. A
// failure between the two removes the object; a crash between the two leaves an object no
// record names, an orphan, which the sweep of ReclaimExpired removes once it is older than
// OrphanGrace (counted by OrphansRemoved). DeleteFile removes the record, then the object
// (an object it cannot remove is an orphan). An expired file's record goes as its engine
// reclaims it, and its object with the sweep.
//
// An object storage that is unreachable or refuses fails uploads and reads of bytes with
// ErrUnavailable; metadata, listings, deletes and Responses records do not touch it.
//
// Create it with OpenBlobs; the zero value is not usable. It is safe for concurrent use.
type Blobs struct {
	records recordEngine
	obj     *objects

	sweepMu sync.Mutex
	cursor  string // the last object name the previous sweep looked at; "" from the start

	orphans atomic.Int64

	// failCommit, set by tests, fails the record commit after the object is written.
	failCommit func(f *File) error
}

var _ Store = (*Blobs)(nil)

// recordEngine is an engine that can hold a file's record apart from its bytes: an upload
// begun on it and committed without chunks records f.Size as given. It holds the callers'
// keys too, which the Blobs hands on to it (see blobs_keys.go).
type recordEngine interface {
	Store
	KeyStore
	beginUpload(f *File) (upload, error)
	getFileMeta(owner, id string) (File, error)
}

// OpenBlobs returns a Store that keeps the records in records (a *Pebble, *Redis or
// *LazyRedis, which the Blobs owns from then on and closes) and the file bytes in the bucket
// of opts. It does not reach the object storage: a service down at start fails uploads and
// reads of bytes until it answers.
func OpenBlobs(records Store, opts S3Options) (*Blobs, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	re, ok := records.(recordEngine)
	if !ok {
		return nil, fmt.Errorf("store: %T cannot hold the records of object storage: %w", records, ErrInvalid)
	}
	obj, err := newObjects(opts)
	if err != nil {
		return nil, err
	}
	return &Blobs{records: re, obj: obj}, nil
}

// Check reports whether the records engine can serve now (see LazyRedis.Check): the
// store's own readiness. The object storage is asked apart, by CheckBucket: without it
// only uploads and inlining fail.
func (b *Blobs) Check(ctx context.Context) error {
	if c, ok := b.records.(interface{ Check(context.Context) error }); ok {
		return c.Check(ctx)
	}
	return nil
}

// OrphansRemoved returns how many objects without a record the sweeps of this Blobs removed.
func (b *Blobs) OrphansRemoved() int64 { return b.orphans.Load() }

// Records returns the engine that holds the records.
func (b *Blobs) Records() Store { return b.records }

func (b *Blobs) PutResponse(r Response) error            { return b.records.PutResponse(r) }
func (b *Blobs) GetResponse(id string) (Response, error) { return b.records.GetResponse(id) }
func (b *Blobs) DeleteResponse(id string) error          { return b.records.DeleteResponse(id) }
func (b *Blobs) ReclaimResponses(before time.Time) (int, error) {
	return b.records.ReclaimResponses(before)
}
func (b *Blobs) GetFile(owner, id string, now time.Time) (File, error) {
	return b.records.GetFile(owner, id, now)
}
func (b *Blobs) ListFiles(owner string, q ListQuery) ([]File, bool, error) {
	return b.records.ListFiles(owner, q)
}
func (b *Blobs) FileStats() (count int64, bytes int64) { return b.records.FileStats() }
func (b *Blobs) Close() error                          { return b.records.Close() }

// PutFile streams r into the file's object in parts of PartSize bytes, then commits the
// record; see Blobs.
func (b *Blobs) PutFile(f File, r io.Reader, maxSize int64) (File, error) {
	return uploadFile(f, r, maxSize, b.obj.opts.PartSize, b.beginUpload)
}

// AppendFileData appends the bytes of an unexpired file of owner to dst, read from its
// object straight into dst.
func (b *Blobs) AppendFileData(dst []byte, owner, id string, now time.Time) ([]byte, error) {
	f, err := b.records.GetFile(owner, id, now)
	if err != nil {
		return dst, err
	}
	dst, err = b.obj.appendObject(dst, b.obj.objectName(owner, id), f.Size)
	if errors.Is(err, ErrNotFound) {
		// Deleted meanwhile (the record goes first), or the record has lost its object.
		if _, gerr := b.records.GetFile(owner, id, now); gerr == nil {
			return dst, fmt.Errorf("cannot read file %q: its object is missing: %w", id, errCorrupt)
		}
	}
	return dst, err
}

// DeleteFile removes the record of an unexpired file of owner, then its object. The file is
// gone once the record is: an object that cannot be removed is left to the sweep.
func (b *Blobs) DeleteFile(owner, id string) error {
	if err := b.records.DeleteFile(owner, id); err != nil {
		return err
	}
	_ = b.obj.remove(b.obj.objectName(owner, id))
	return nil
}

// ReclaimExpired sweeps up to SweepBudget objects (see sweep), then reclaims the expired
// records of the engine. It returns the records reclaimed.
func (b *Blobs) ReclaimExpired(now time.Time) (int, error) {
	_, serr := b.sweep(now)
	n, err := b.records.ReclaimExpired(now)
	return n, errors.Join(err, serr)
}

// sweep looks at up to SweepBudget objects after the previous sweep's last one, wrapping
// around at the end of the bucket, and removes those whose record expired at now, and those
// older than OrphanGrace that no record names (counted as orphans). It returns how many it
// removed.
func (b *Blobs) sweep(now time.Time) (int, error) {
	b.sweepMu.Lock()
	defer b.sweepMu.Unlock()
	objs, end, err := b.obj.list(b.cursor, b.obj.opts.SweepBudget)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, o := range objs {
		gone, orphan, err := b.reclaimable(o, now)
		if err != nil {
			return removed, err
		}
		if gone {
			if err := b.obj.remove(o.name); err != nil {
				return removed, err
			}
			removed++
			if orphan {
				b.orphans.Add(1)
			}
		}
		b.cursor = o.name
	}
	if end {
		b.cursor = ""
	}
	return removed, nil
}

// reclaimable reports whether o is an object to remove: its record expired at now, or it
// is an orphan, older than OrphanGrace and named by no record. Names that are not the
// store's are left alone.
func (b *Blobs) reclaimable(o objectInfo, now time.Time) (gone, orphan bool, err error) {
	owner, id, ok := b.obj.parseObjectName(o.name)
	if !ok {
		return false, false, nil
	}
	f, err := b.records.getFileMeta(owner, id)
	switch {
	case errors.Is(err, ErrNotFound):
		orphan = now.Sub(o.modified) >= b.obj.opts.OrphanGrace
		return orphan, orphan, nil
	case err != nil:
		return false, false, err
	}
	return f.Expired(now), false, nil
}

// blobUpload is one PutFile of Blobs: the records engine's upload (which holds the id's
// claim and commits the record), and the object being written.
type blobUpload struct {
	b       *Blobs
	rec     upload
	name    string
	multi   string // id of the multipart upload, once there is one
	parts   []minio.CompletePart
	written time.Time // when the object was complete; zero before
}

func (b *Blobs) beginUpload(f *File) (upload, error) {
	rec, err := b.records.beginUpload(f)
	if err != nil {
		return nil, err
	}
	return &blobUpload{b: b, rec: rec, name: b.obj.objectName(f.Owner, f.ID)}, nil
}

// put writes one chunk of PartSize bytes (shorter only when it is the last): a first chunk
// that is also the last is the whole object, in one PUT; any other is a part.
func (u *blobUpload) put(idx uint32, chunk []byte) error {
	o := u.b.obj
	if idx == 0 && len(chunk) < o.opts.PartSize {
		if err := o.put(u.name, chunk); err != nil {
			return err
		}
		u.written = time.Now()
		return nil
	}
	ctx, cancel := o.ctx()
	defer cancel()
	if u.multi == "" {
		id, err := o.c.NewMultipartUpload(ctx, o.bucket, u.name, minio.PutObjectOptions{})
		if err != nil {
			return s3Err("write file data", err)
		}
		u.multi = id
	}
	var p minio.ObjectPart
	err := idempotent(chunk, func(r io.Reader) (err error) {
		p, err = o.c.PutObjectPart(ctx, o.bucket, u.name, u.multi, int(idx)+1, r, int64(len(chunk)), minio.PutObjectPartOptions{})
		return err
	})
	if err != nil {
		return s3Err("write file data", err)
	}
	u.parts = append(u.parts, minio.CompletePart{PartNumber: p.PartNumber, ETag: p.ETag})
	return nil
}

// commit completes the object (an empty file is written here), then commits the record,
// unless so much time passed since the object was written that a sweep may remove it.
func (u *blobUpload) commit(f *File) error {
	if err := u.finishObject(); err != nil {
		return err
	}
	if u.b.failCommit != nil {
		if err := u.b.failCommit(f); err != nil {
			return err
		}
	}
	if time.Since(u.written) > u.b.obj.opts.OrphanGrace/2 {
		return fmt.Errorf("cannot put file %q: over %v between its object and its record: %w", f.ID, u.b.obj.opts.OrphanGrace/2, ErrUnavailable)
	}
	return u.rec.commit(f)
}

func (u *blobUpload) finishObject() error {
	if !u.written.IsZero() {
		return nil
	}
	o := u.b.obj
	if u.multi == "" {
		if err := o.put(u.name, nil); err != nil {
			return err
		}
		u.written = time.Now()
		return nil
	}
	ctx, cancel := o.ctx()
	defer cancel()
	if _, err := o.c.CompleteMultipartUpload(ctx, o.bucket, u.name, u.multi, u.parts, minio.PutObjectOptions{}); err != nil {
		return s3Err("write file data", err)
	}
	u.multi = ""
	u.written = time.Now()
	return nil
}

// abort removes the object or the multipart upload, then aborts the record's upload. An
// object it cannot remove is an orphan for the sweep.
func (u *blobUpload) abort() error {
	o := u.b.obj
	var err error
	if u.multi != "" {
		ctx, cancel := o.ctx()
		if aerr := o.c.AbortMultipartUpload(ctx, o.bucket, u.name, u.multi); aerr != nil {
			err = s3Err("abort the upload of file data", aerr)
		}
		cancel()
	}
	if !u.written.IsZero() {
		err = errors.Join(err, o.remove(u.name))
	}
	return errors.Join(err, u.rec.abort())
}

func (u *blobUpload) end() { u.rec.end() }

// LazyRedis holds records for Blobs through the engine once it is open.

func (l *LazyRedis) beginUpload(f *File) (upload, error) {
	e, err := l.engine()
	if err != nil {
		return nil, err
	}
	return e.beginUpload(f)
}

func (l *LazyRedis) getFileMeta(owner, id string) (File, error) {
	e, err := l.engine()
	if err != nil {
		return File{}, err
	}
	return e.getFileMeta(owner, id)
}
