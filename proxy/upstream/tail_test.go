package upstream

import (
	"fmt"
	"strings"
	"testing"

	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/upstream/wire/wiretest"
)

// tailLog records, in order, what a relay asks of the client's connection:
// "hold" for HoldTail, the bytes of each write otherwise.
type tailLog []string

func (l *tailLog) HoldTail() { *l = append(*l, "hold") }

func (l *tailLog) Write(p []byte) (int, error) {
	*l = append(*l, string(p))
	return len(p), nil
}

// chunk frames s as one chunk of a chunked body.
func chunk(s string) string { return fmt.Sprintf("%x\r\n%s\r\n", len(s), s) }

// An SSE relay asks the client's connection to hold the end of the stream
// before it writes the last events, when the upstream's final chunk came with
// them, and otherwise as soon as the final chunk is read; never twice.
func TestRelayHoldsTheTail(t *testing.T) {
	const (
		first = "event: message_start\ndata: {}\n\n"
		last  = "event: message_stop\ndata: {}\n\n"
	)
	for _, tc := range []struct {
		name, end string
		want      []string
	}{
		// One write of the upstream holds everything: the final chunk is read
		// with the events, which are the last.
		{"final chunk with the events", "0\r\n\r\n", []string{"hold", first + last}},
		// The final chunk's size line with the events, the CRLF that ends the
		// body in a write of its own (as fasthttp's server sends it): the
		// relay waits for that CRLF with the events, which are the last.
		{"final chunk's end apart", "0\r\n\x00\r\n", []string{"hold", first + last}},
		// A final chunk with trailers is not read ahead: the events go first.
		{"final chunk with trailers", "0\r\nX-T: 1\r\n\r\n", []string{first + last, "hold"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dials int
			client := pipeUpstream(t, &dials, wiretest.SSEHead+chunk(first)+chunk(last)+tc.end)
			var r Relay
			if err := send(t, client, &r, true); err != nil {
				t.Fatal(err)
			}
			streamed(&r)
			defer r.Close()
			var log tailLog
			r.SetTail(&log)
			if _, err := r.WriteTo(&log); err != nil {
				t.Fatal(err)
			}
			if strings.Join(log, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("relay did %q, want %q", log, tc.want)
			}
		})
	}
}

// countWriter counts what is written to it.
type countWriter struct{ n int }

func (w *countWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// TestRelayBigEventKeepsNoBuffer relays one 36 MiB event and checks that the
// relay passed it through its fixed pooled buffer: the pool holds no larger
// one afterwards, and the reset relay keeps nothing of it.
func TestRelayBigEventKeepsNoBuffer(t *testing.T) {
	event := "event: response.created\ndata: " + strings.Repeat("i", 36<<20) + "\n\n"
	var dials int
	client := pipeUpstream(t, &dials, wiretest.SSEHead+chunk(event)+"0\r\n\r\n")
	var r Relay
	if err := send(t, client, &r, true); err != nil {
		t.Fatal(err)
	}
	streamed(&r)
	var w countWriter
	if _, err := r.WriteTo(&w); err != nil || w.n < len(event) { // and an error frame: no final event
		t.Fatalf("relayed %d bytes of %d: %v", w.n, len(event), err)
	}
	r.Close()
	r.Reset()
	if n := cap(r.pending) + len(r.resp.Body()); n > 4<<10 {
		t.Fatalf("the reset relay keeps %d bytes", n)
	}
	for range 8 {
		bp := relayBufPool.Get().(*[]byte)
		defer relayBufPool.Put(bp)
		if cap(*bp) > 32<<10 {
			t.Fatalf("a pooled relay buffer of %d bytes", cap(*bp))
		}
	}
}

// tapLog records the chunks a relay's tap sees.
type tapLog []string

func (l *tapLog) Chunk(p []byte) { *l = append(*l, string(p)) }

// An SSE relay waits for the next event in the upstream body's own reader,
// then reads what came in one read: each event of a chunk is scanned (and
// seen by the tap) once, whole, not first in part through a small array.
func TestRelayReadsAnEventWhole(t *testing.T) {
	event := "data: " + strings.Repeat("x", 2*ssePeekSize) + "\n\n"
	final := "data: [DONE]\n\n"
	var dials int
	client := pipeUpstream(t, &dials, wiretest.SSEHead+chunk(event)+chunk(final)+"0\r\n\r\n")
	var r Relay
	if err := send(t, client, &r, true); err != nil {
		t.Fatal(err)
	}
	streamed(&r)
	r.fam = family.Beta // [DONE] ends it
	defer r.Close()
	var seen tapLog
	r.tap = &seen
	var w countWriter
	if _, err := r.WriteTo(&w); err != nil {
		t.Fatal(err)
	}
	if want := []string{event, final}; strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("the relay read %q, want %q", seen, want)
	}
	if w.n != len(event)+len(final) {
		t.Fatalf("relayed %d bytes, want %d", w.n, len(event)+len(final))
	}
}
