package store

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
)

// An upload is one engine's side of one PutFile: the chunks are handed to put as they are
// read; commit then makes the file visible at once. When anything fails, commit included,
// abort takes back what was written. end is called last, whatever happened.
type upload interface {
	put(idx uint32, chunk []byte) error
	commit(f *File) error
	abort() error
	end()
}

// uploadFile is PutFile over an engine: f is validated (and given an id), begin starts the
// engine's upload, r is copied into chunks of chunkSize bytes, the FileFinisher of r runs,
// and the upload is committed; on any failure it is aborted.
func uploadFile(f File, r io.Reader, maxSize int64, chunkSize int, begin func(*File) (upload, error)) (File, error) {
	if err := validateFile(&f, maxSize); err != nil {
		return File{}, err
	}
	u, err := begin(&f)
	if err != nil {
		return File{}, err
	}
	defer u.end()
	f.Size, err = writeChunks(u, r, maxSize, chunkSize)
	if err == nil {
		err = finishFile(&f, r, maxSize)
	}
	if err == nil {
		err = u.commit(&f)
	}
	if err != nil {
		if aerr := u.abort(); aerr != nil {
			err = errors.Join(err, aerr)
		}
		return File{}, err
	}
	return f, nil
}

// validateFile checks f and assigns its id when the caller left it empty.
func validateFile(f *File, maxSize int64) error {
	switch {
	case !ValidOwner(f.Owner):
		return fmt.Errorf("cannot put file: owner %q: %w", f.Owner, ErrInvalid)
	case f.ID != "" && !ValidFileID(f.ID):
		return fmt.Errorf("cannot put file: id %q: %w", f.ID, ErrInvalid)
	case len(f.Filename) > MaxFieldLen || len(f.MimeType) > MaxFieldLen || len(f.Purpose) > MaxFieldLen:
		return fmt.Errorf("cannot put file: a field is over %d bytes: %w", MaxFieldLen, ErrInvalid)
	case maxSize < 0:
		return fmt.Errorf("cannot put file: negative maximum size %d: %w", maxSize, ErrInvalid)
	}
	if f.ID == "" {
		f.ID = NewFileID(f.Created)
	}
	return nil
}

// finishFile runs the FileFinisher of r, when r has one, on a copy of f and takes the expiry
// it set. A change to another field fails with ErrInvalid; the result is validated as f was
// before the upload.
func finishFile(f *File, r io.Reader, maxSize int64) error {
	fin, ok := r.(FileFinisher)
	if !ok {
		return nil
	}
	g := *f
	if err := fin.FinishFile(&g); err != nil {
		return fmt.Errorf("cannot finish file %q: %w", f.ID, err)
	}
	expires := g.Expires
	g.Expires = f.Expires
	if g != *f {
		return fmt.Errorf("cannot finish file %q: FinishFile changed more than Expires: %w", f.ID, ErrInvalid)
	}
	f.Expires = expires
	return validateFile(f, maxSize)
}

// chunkPool holds chunk buffers; a buffer's capacity is the chunk size it was made for.
var chunkPool sync.Pool

// acquireChunk returns a chunk buffer of size bytes.
func acquireChunk(size int) *[]byte {
	if v, ok := chunkPool.Get().(*[]byte); ok && cap(*v) == size {
		return v
	}
	buf := make([]byte, size)
	return &buf
}

// writeChunks copies at most maxSize bytes of r into chunks of chunkSize bytes, hands each to
// u.put in order, and returns their total; a longer body fails with ErrTooLarge. It reads at
// most one byte past maxSize.
//
// The chunk buffer goes back to chunkPool unless a put failed: an engine may still read a
// chunk whose put it gave up on. The Redis client keeps a command whose context ended queued,
// and writes it when the connection lets it, reading the chunk then; reused meanwhile, the
// buffer would hold another upload's bytes (see TestRedisPausedMasterUploads).
func writeChunks(u upload, r io.Reader, maxSize int64, chunkSize int) (int64, error) {
	bufp := acquireChunk(chunkSize)
	lent := false // a put failed: the engine may still read the buffer
	defer func() {
		if !lent {
			chunkPool.Put(bufp)
		}
	}()
	var size int64
	for idx := uint32(0); ; idx++ {
		want := int64(len(*bufp))
		if left := maxSize - size; left < want {
			want = left + 1 // one byte more tells a body of exactly maxSize bytes from a longer one
		}
		n, eof, err := fill(r, (*bufp)[:want])
		switch {
		case err != nil:
			return size, fmt.Errorf("cannot read file data: %w", err)
		case size+int64(n) > maxSize:
			return size, fmt.Errorf("cannot put file: more than %d bytes: %w", maxSize, ErrTooLarge)
		case n > 0 && idx == math.MaxUint32:
			return size, fmt.Errorf("cannot put file: more than %d chunks: %w", uint64(math.MaxUint32), ErrTooLarge)
		}
		if n > 0 {
			if err := u.put(idx, (*bufp)[:n]); err != nil {
				lent = true
				return size, err
			}
			size += int64(n)
		}
		if eof {
			return size, nil
		}
	}
}

// fill reads into buf until it is full or r reports io.EOF, which it returns as eof. Unlike
// io.ReadFull it passes every other error through, io.ErrUnexpectedEOF of a truncated body
// included, so a cut upload is never taken for a complete one.
func fill(r io.Reader, buf []byte) (n int, eof bool, err error) {
	for empty := 0; n < len(buf); {
		m, err := r.Read(buf[n:])
		n += m
		switch {
		case err == io.EOF:
			return n, true, nil
		case err != nil:
			return n, false, err
		case m > 0:
			empty = 0
		default:
			if empty++; empty >= 100 {
				return n, false, io.ErrNoProgress
			}
		}
	}
	return n, false, nil
}
