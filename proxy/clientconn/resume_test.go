package clientconn

import (
	"bufio"
	"io"
	"testing"
	"time"
)

// hijacked is fasthttp's hijacked connection as the hijack handler gets it:
// its reads come from the server's reader over the Conn.
type hijacked struct {
	*Conn
	r *bufio.Reader
}

func (h hijacked) Read(p []byte) (int, error) { return h.r.Read(p) }

// After Detach, the server's Close (the first one) leaves the connection
// open, and the stream goes on writing through it; Attach returns once that
// Close came, and the next Close closes.
func TestDetachedConnOutlivesTheServersClose(t *testing.T) {
	client, server := loopbackPair(t)
	c := newConn(server, time.Minute)
	c.Detach()
	attached := make(chan struct{})
	go func() { c.Attach(); close(attached) }()
	if err := c.Close(); err != nil { // the server's, once the hijack handler returned
		t.Fatal(err)
	}
	<-attached
	if _, err := c.Write([]byte("event")); err != nil {
		t.Fatalf("a write after the server's Close: %v", err)
	}
	c.Close() // the stream's
	b, err := io.ReadAll(client)
	if string(b) != "event" || err != nil {
		t.Fatalf("the client got %q, %v; want the event, then the connection closed", b, err)
	}
}

// TakeBuffered keeps the bytes the server's reader holds past the request,
// read first by the connection served again; a reader holding none costs no
// buffer.
func TestTakeBuffered(t *testing.T) {
	client, server := loopbackPair(t)
	c := newConn(server, time.Minute)
	const req, next = "GET /a HTTP/1.1\r\n\r\n", "GET /b HTTP/1.1\r\n\r\n"
	io.WriteString(client, req)
	br := bufio.NewReader(c)
	if _, err := io.ReadFull(br, make([]byte, len(req))); err != nil {
		t.Fatal(err)
	}
	if !c.TakeBuffered(hijacked{c, br}) || c.NextBuffered() || c.resume.buf != nil {
		t.Fatalf("nothing held: pending %q, buffer %p", c.resume.pending, c.resume.buf)
	}
	io.WriteString(client, req+next) // pipelined
	br = bufio.NewReader(c)
	if _, err := br.Peek(len(req + next)); err != nil { // both in the reader
		t.Fatal(err)
	}
	br.Discard(len(req)) // the request the server read
	if !c.TakeBuffered(hijacked{c, br}) || !c.NextBuffered() {
		t.Fatal("the next request was not kept")
	}
	n := c.HandOver()
	p := make([]byte, 64)
	if k, err := n.Read(p); string(p[:k]) != next || err != nil {
		t.Fatalf("the connection served again read %q, %v; want %q", p[:k], err, next)
	}
	if n.resume.buf != nil || n.NextBuffered() {
		t.Fatal("the kept bytes' buffer is held once they are read")
	}
}
