package store

import (
	"bytes"
	"errors"
	"testing"
)

// chunkKeeper is an upload whose puts hand out the chunks they are given, and fail when fail
// is set, as the Redis engine's put does when its context ends before the client wrote it.
type chunkKeeper struct {
	fail   bool
	chunks [][]byte
}

var errPutLost = errors.New("put: context deadline exceeded")

func (k *chunkKeeper) put(_ uint32, chunk []byte) error {
	k.chunks = append(k.chunks, chunk)
	if k.fail {
		return errPutLost
	}
	return nil
}
func (*chunkKeeper) commit(*File) error { return nil }
func (*chunkKeeper) abort() error       { return nil }
func (*chunkKeeper) end()               {}

// TestChunkNotReusedAfterFailedPut checks that a chunk whose put failed is never handed to
// another upload: the engine may still read it (see writeChunks).
func TestChunkNotReusedAfterFailedPut(t *testing.T) {
	const size = 4096 + 3 // a chunk size no other test uses, so the pool holds only ours
	for range 20 {
		lost := &chunkKeeper{fail: true}
		if _, err := writeChunks(lost, bytes.NewReader(testData(1, size)), 1<<20, size); !errors.Is(err, errPutLost) {
			t.Fatalf("writeChunks: %v, want the put's error", err)
		}
		next := &chunkKeeper{}
		if _, err := writeChunks(next, bytes.NewReader(testData(2, 2*size)), 1<<20, size); err != nil {
			t.Fatal(err)
		}
		if &next.chunks[0][0] == &lost.chunks[0][0] {
			t.Fatal("the chunk of a failed put was given to the next upload")
		}
		if got := lost.chunks[0]; !bytes.Equal(got, testData(1, size)) {
			t.Fatal("the chunk of a failed put was written over")
		}
	}
	// Chunks whose puts succeeded are reused: an upload costs no new buffer.
	ok, empty := &chunkKeeper{}, bytes.NewReader(nil)
	allocs := testing.AllocsPerRun(100, func() {
		ok.chunks = ok.chunks[:0]
		writeChunks(ok, empty, 1<<20, size)
	})
	if allocs >= 1.5 { // a new chunk is 2; the race detector's sync.Pool drops a Put in 4
		t.Fatalf("%v allocations per upload, want the pooled chunk", allocs)
	}
}

// chunkCopier is an upload that keeps a copy of every chunk it is given.
type chunkCopier struct{ chunks [][]byte }

func (k *chunkCopier) put(_ uint32, chunk []byte) error {
	k.chunks = append(k.chunks, append([]byte(nil), chunk...))
	return nil
}
func (*chunkCopier) commit(*File) error { return nil }
func (*chunkCopier) abort() error       { return nil }
func (*chunkCopier) end()               {}

// TestSmallFileTakesNoWholeChunk checks that a file that fits in firstChunkSize is written
// from that buffer, not a whole chunk, and that larger files are cut at the chunk size as
// before, across the point where the first buffer overflows.
func TestSmallFileTakesNoWholeChunk(t *testing.T) {
	const chunk = 5 << 20
	small := &chunkKeeper{}
	if _, err := writeChunks(small, bytes.NewReader(testData(1, 1024)), 1<<30, chunk); err != nil {
		t.Fatal(err)
	}
	if len(small.chunks) != 1 || cap(small.chunks[0]) > firstChunkSize {
		t.Fatalf("a 1 KiB file was put from a buffer of %d bytes, want at most %d", cap(small.chunks[0]), firstChunkSize)
	}
	for _, size := range []int{0, 1, firstChunkSize - 1, firstChunkSize, firstChunkSize + 1, chunk - 1, chunk, chunk + 1, 2*chunk + firstChunkSize + 7} {
		data := testData(2, size)
		k := &chunkCopier{}
		n, err := writeChunks(k, bytes.NewReader(data), 1<<30, chunk)
		if err != nil || n != int64(size) {
			t.Fatalf("%d bytes: writeChunks = %d, %v", size, n, err)
		}
		if got := bytes.Join(k.chunks, nil); !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: the chunks do not add up to the file", size)
		}
		for i, c := range k.chunks {
			if i < len(k.chunks)-1 && len(c) != chunk {
				t.Fatalf("%d bytes: chunk %d has %d bytes, want %d", size, i, len(c), chunk)
			}
		}
	}
	// The bound is kept whichever buffer reads it: one byte more is refused.
	for _, limit := range []int64{100, firstChunkSize, chunk + 10} {
		if _, err := writeChunks(&chunkCopier{}, bytes.NewReader(testData(3, int(limit))), limit, chunk); err != nil {
			t.Fatalf("%d bytes at a limit of %d: %v", limit, limit, err)
		}
		if _, err := writeChunks(&chunkCopier{}, bytes.NewReader(testData(3, int(limit)+1)), limit, chunk); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%d bytes at a limit of %d: %v, want ErrTooLarge", limit+1, limit, err)
		}
	}
}
