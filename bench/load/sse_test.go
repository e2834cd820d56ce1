package load

import (
	"strings"
	"testing"
)

func TestSSECounter(t *testing.T) {
	f := func(stream string, want int) {
		t.Helper()
		// Whole, then split at every position, then byte by byte.
		var c SSECounter
		_, _ = c.Write([]byte(stream))
		if c.Events() != want {
			t.Fatalf("%q whole: %d events, want %d", stream, c.Events(), want)
		}
		for i := range len(stream) {
			c.Reset()
			_, _ = c.Write([]byte(stream[:i]))
			_, _ = c.Write([]byte(stream[i:]))
			if c.Events() != want {
				t.Fatalf("%q split at %d: %d events, want %d", stream, i, c.Events(), want)
			}
		}
		c.Reset()
		for i := range len(stream) {
			_, _ = c.Write([]byte{stream[i]})
		}
		if c.Events() != want {
			t.Fatalf("%q bytewise: %d events, want %d", stream, c.Events(), want)
		}
	}
	f("", 0)
	f("data: x\n\n", 1)
	f("data: x\n", 0)       // never ended
	f("data: x", 0)         // never ended
	f("data\n\n", 1)        // a data field with no value
	f("data:\n\n", 1)       // an empty data field
	f("datax: y\n\n", 0)    // another field
	f("dat\n\n", 0)         // another field
	f(": comment\n\n", 0)   // comments are not events
	f("event: ping\n\n", 0) // no data, no event
	f("event: a\ndata: {}\n\n", 1)
	f("data: 1\r\n\r\ndata: 2\r\r", 2)
	f("data: 1\n\n\n\n\ndata: 2\n\n", 2)
	f("data: a\ndata: b\n\n", 1)
	f("id: 1\nretry: 5\n\n", 0)
	f("event: message_start\ndata: {}\n\nevent: ping\ndata: {}\n\n: keep\n\ndata: [DONE]\n\n", 3)
	f(strings.Repeat("data: "+strings.Repeat("x", 100)+"\n\n", 50), 50)
}

func FuzzSSECounterSplit(f *testing.F) {
	f.Add("event: a\ndata: {}\n\ndata: 2\r\n\r\n", 5)
	f.Add("data\r\r\n\n", 2)
	f.Fuzz(func(t *testing.T, s string, at int) {
		var whole, split SSECounter
		_, _ = whole.Write([]byte(s))
		if len(s) > 0 {
			at = int(uint(at) % uint(len(s)))
		} else {
			at = 0
		}
		_, _ = split.Write([]byte(s[:at]))
		_, _ = split.Write([]byte(s[at:]))
		if whole.Events() != split.Events() {
			t.Fatalf("%q split at %d: %d events, whole %d", s, at, split.Events(), whole.Events())
		}
		if n := strings.Count(s, "\n") + strings.Count(s, "\r"); whole.Events() > n {
			t.Fatalf("%q: %d events from %d line ends", s, whole.Events(), n)
		}
	})
}

func BenchmarkSSECounter(b *testing.B) {
	stream := []byte(strings.Repeat("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hello\"}}\n\n", 64))
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	var c SSECounter
	for b.Loop() {
		c.Reset()
		_, _ = c.Write(stream)
	}
	if c.Events() != 64 {
		b.Fatalf("events %d", c.Events())
	}
}
