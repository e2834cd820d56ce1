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
