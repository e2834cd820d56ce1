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
// firstPool holds the smaller buffers a file's first bytes are read into (firstChunkSize).
var chunkPool, firstPool sync.Pool

// firstChunkSize is the buffer a file's first bytes are read into when chunks are larger: a
// file that fits in it takes no whole chunk, so an upload of a small file holds 64 KiB, not a
// chunk of object storage's part size (5 MiB by default), while it is written.
const firstChunkSize = 64 << 10

// acquireBuffer returns a buffer of size bytes from pool.
func acquireBuffer(pool *sync.Pool, size int) *[]byte {
	if v, ok := pool.Get().(*[]byte); ok && cap(*v) == size {
		return v
	}
	buf := make([]byte, size)
	return &buf
}

// acquireChunk returns a chunk buffer of size bytes.
func acquireChunk(size int) *[]byte { return acquireBuffer(&chunkPool, size) }

// writeChunks copies at most maxSize bytes of r into chunks of chunkSize bytes, hands each to
// u.put in order, and returns their total; a longer body fails with ErrTooLarge. It reads at
// most one byte past maxSize.
//
// The buffers go back to their pools unless a put failed: an engine may still read a chunk
// whose put it gave up on. The Redis client keeps a command whose context ended queued, and
// writes it when the connection lets it, reading the chunk then; reused meanwhile, the buffer
// would hold another upload's bytes (see TestRedisPausedMasterUploads).
func writeChunks(u upload, r io.Reader, maxSize int64, chunkSize int) (int64, error) {
	buf := chunkBuffer{size: chunkSize}
	defer buf.release()
	var size int64
	for idx := uint32(0); ; idx++ {
		want := int64(chunkSize)
		if left := maxSize - size; left < want {
			want = left + 1 // one byte more tells a body of exactly maxSize bytes from a longer one
		}
		chunk, eof, err := buf.fill(r, int(want))
		n := len(chunk)
		switch {
		case err != nil:
			return size, fmt.Errorf("cannot read file data: %w", err)
		case size+int64(n) > maxSize:
			return size, fmt.Errorf("cannot put file: more than %d bytes: %w", maxSize, ErrTooLarge)
		case n > 0 && idx == math.MaxUint32:
			return size, fmt.Errorf("cannot put file: more than %d chunks: %w", uint64(math.MaxUint32), ErrTooLarge)
		}
		if n > 0 {
			if err := u.put(idx, chunk); err != nil {
				buf.lent = true
				return size, err
			}
			size += int64(n)
		}
		if eof {
			return size, nil
		}
	}
}

// chunkBuffer is writeChunks' buffer: the first bytes of a file go into one of
// firstChunkSize, and a whole chunk is taken only when they overflow it.
type chunkBuffer struct {
	size       int     // the chunk size
	first, big *[]byte // from firstPool and chunkPool; nil until needed
	lent       bool    // a put failed: its engine may still read the buffers
}

// fill reads up to want bytes of r (see the package's fill) and returns them.
func (c *chunkBuffer) fill(r io.Reader, want int) ([]byte, bool, error) {
	if c.big == nil && c.size > firstChunkSize {
		if c.first == nil {
			c.first = acquireBuffer(&firstPool, firstChunkSize)
		}
		first := (*c.first)[:min(want, firstChunkSize)]
		n, eof, err := fill(r, first)
		if eof || err != nil || n == want {
			return first[:n], eof, err
		}
		c.big = acquireChunk(c.size)
		copy(*c.big, first)
		m, eof, err := fill(r, (*c.big)[n:want])
		return (*c.big)[:n+m], eof, err
	}
	if c.big == nil {
		c.big = acquireChunk(c.size)
	}
	n, eof, err := fill(r, (*c.big)[:want])
	return (*c.big)[:n], eof, err
}

// release returns the buffers to their pools unless a put failed.
func (c *chunkBuffer) release() {
	if c.lent {
		return
	}
	if c.first != nil {
		firstPool.Put(c.first)
	}
	if c.big != nil {
		chunkPool.Put(c.big)
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
