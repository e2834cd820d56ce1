//go:build !race

package upstream

import (
	"bufio"
	"io"
	"testing"
)

// The SSE relay frames a chunk per burst of events: that must not allocate.
func TestWriteChunkAllocatesNothing(t *testing.T) {
	bw, p := bufio.NewWriterSize(io.Discard, 4096), []byte("data: a\n\n")
	if allocs := testing.AllocsPerRun(100, func() {
		writeChunk(bw, p)
		bw.Flush()
	}); allocs > 0 {
		t.Fatalf("writeChunk allocates: %v per call", allocs)
	}
}
