//go:build !race

package parse

import "testing"

func TestTextCounterAllocs(t *testing.T) {
	chunk := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello \\\"you\\\"\"}}\n\n")
	var c TextCounter
	if n := testing.AllocsPerRun(100, func() { c.Feed(chunk[:50]); c.Feed(chunk[50:]) }); n != 0 {
		t.Fatalf("TextCounter.Feed allocates %v times per run", n)
	}
}
