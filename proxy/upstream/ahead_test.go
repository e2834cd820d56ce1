package upstream

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/proxy/upstream/wire/wiretest"
)

// sseAnswer is an SSE answer of n events of about 1 KiB, each in a chunk of
// its own, and the events alone.
func sseAnswer(n int) (answer, events string) {
	var a, e strings.Builder
	a.WriteString(wiretest.SSEHead)
	for i := range n {
		ev := "data: " + strings.Repeat(string(rune('a'+i%26)), 1000) + "\n\n"
		e.WriteString(ev)
		a.WriteString(chunk(ev))
	}
	ev := "data: [DONE]\n\n"
	e.WriteString(ev)
	a.WriteString(chunk(ev) + "0\r\n\r\n")
	return a.String(), e.String()
}

// streamedHeld begins relaying the streamed chat answer in r, with a bound
// of held bytes.
func streamedHeld(r *Relay, held int) {
	streamed(r)
	r.fam, r.dep.maxHeld = family.Beta, held
}

// waitAhead waits until r's read-ahead goroutine is done.
func waitAhead(r *Relay) {
	a := r.ahead
	a.mu.Lock()
	for a.running {
		a.cond.Wait()
	}
	a.mu.Unlock()
}

// relayRest relays the rest of r to a client that already got first and
// closes r: the client must have got events whole, and the call must no
// longer be in flight.
func relayRest(t *testing.T, r *Relay, first []byte, events string) {
	t.Helper()
	var got bytes.Buffer
	got.Write(first)
	if _, err := r.WriteTo(&got); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if got.String() != events || r.dep.InFlight() != 0 {
		t.Fatalf("relayed %d bytes, want %d; in flight %d", got.Len(), len(events), r.dep.InFlight())
	}
}

// A read-ahead reads an answer whose rest fits its bound to its end: the
// connection is back in the pool, and the call no longer in flight, before
// the client took the rest; the client then gets the answer whole.
func TestReadAheadFreesConnection(t *testing.T) {
	answer, events := sseAnswer(40)
	var dials int
	client := pipeUpstream(t, &dials, answer, answer)
	var r Relay
	if err := send(t, client, &r, true); err != nil {
		t.Fatal(err)
	}
	streamedHeld(&r, 64<<10)
	first := make([]byte, 4<<10)
	n, _ := r.Read(first)
	r.stalled() // the write of the first bytes to the client found no room
	waitAhead(&r)
	if !r.ahead.ended || r.dep.InFlight() != 0 {
		t.Fatalf("read-ahead ended %v, in flight %d", r.ahead.ended, r.dep.InFlight())
	}
	var other Relay // the connection serves another call meanwhile
	if err := send(t, client, &other, true); err != nil || dials != 1 {
		t.Fatalf("another call: %v, %d connections, want 1", err, dials)
	}
	streamed(&other)
	other.Close()
	relayRest(t, &r, first[:n], events)
}

// A read-ahead stops at its bound: the connection stays with the call, as
// without one, and the client still gets the answer whole.
func TestReadAheadStopsAtBound(t *testing.T) {
	answer, events := sseAnswer(40)
	var dials int
	client := pipeUpstream(t, &dials, answer)
	var r Relay
	if err := send(t, client, &r, true); err != nil {
		t.Fatal(err)
	}
	streamedHeld(&r, 16<<10)
	first := make([]byte, 4<<10)
	n, _ := r.Read(first)
	r.stalled()
	waitAhead(&r)
	if r.ahead.ended || r.ahead.n != 16<<10 || r.dep.InFlight() != 1 {
		t.Fatalf("read-ahead ended %v held %d, in flight %d", r.ahead.ended, r.ahead.n, r.dep.InFlight())
	}
	relayRest(t, &r, first[:n], events)
}

// A relay that catches up with its read-ahead, while the upstream still
// sends in pieces, stops it and reads on itself: the client gets every byte,
// in order.
func TestReadAheadCaughtUp(t *testing.T) {
	answer, events := sseAnswer(40)
	parted := strings.ReplaceAll(answer, "\r\n\r\ndata", "\r\n\r\n\x00data") // a write per event
	var dials int
	client := pipeUpstream(t, &dials, parted)
	var r Relay
	if err := send(t, client, &r, true); err != nil {
		t.Fatal(err)
	}
	streamedHeld(&r, 64<<10)
	var got bytes.Buffer
	w := &stallWriter{w: &got, r: &r}
	if _, err := r.WriteTo(w); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if got.String() != events || w.stalls == 0 {
		t.Fatalf("relayed %d bytes, want %d; %d stalls", got.Len(), len(events), w.stalls)
	}
}

// stallWriter is a client whose every third write stalls.
type stallWriter struct {
	w      *bytes.Buffer
	r      *Relay
	writes int
	stalls int
}

func (s *stallWriter) Write(p []byte) (int, error) {
	if s.writes++; s.writes%3 == 0 {
		s.stalls++
		s.r.stalled()
	}
	return s.w.Write(p)
}

// Close of a relay whose read-ahead waits for an upstream that has not
// finished cuts that wait short: it closes the connection, which cancels the
// upstream call, rather than wait for the upstream's next bytes.
func TestReadAheadCutOnClose(t *testing.T) {
	answer, _ := sseAnswer(4)
	unfinished := strings.TrimSuffix(answer, "0\r\n\r\n")
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	sent := make(chan struct{}, 1)
	conn := &waitingConn{after: len(unfinished), waiting: make(chan struct{}, 1)}
	client := pipeClient(func() (string, bool) {
		select {
		case sent <- struct{}{}:
			return unfinished, true
		case <-done:
			return "", false
		}
	}, func(c net.Conn) net.Conn {
		conn.Conn = c
		return conn
	})
	var r Relay
	if err := send(t, client, &r, true); err != nil {
		t.Fatal(err)
	}
	streamedHeld(&r, 64<<10)
	r.Read(make([]byte, 1<<10))
	r.stalled()
	<-conn.waiting // the read-ahead waits for more of the answer
	closed := make(chan struct{})
	go func() {
		r.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(time.Minute): // the pipe has no deadline: without the cut, never
		t.Fatal("Close waited for the upstream")
	}
	if r.dep.InFlight() != 0 || client.ConnsCount() != 0 {
		t.Fatalf("in flight %d, connections %d", r.dep.InFlight(), client.ConnsCount())
	}
}

// waitingConn says on waiting when a read begins after the first after
// bytes were read: with nothing more sent, that read waits.
type waitingConn struct {
	net.Conn
	after, read int
	waiting     chan struct{}
}

func (c *waitingConn) Read(p []byte) (int, error) {
	if c.read >= c.after {
		select {
		case c.waiting <- struct{}{}:
		default:
		}
	}
	n, err := c.Conn.Read(p)
	c.read += n
	return n, err
}
