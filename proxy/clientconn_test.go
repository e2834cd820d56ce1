package proxy

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// loopbackPair returns both ends of a TCP connection on loopback.
func loopbackPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if client, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if server, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestClientReadDeadline checks the read deadlines fasthttp sets on a client
// connection: a later one within a sixteenth of its timeout keeps the one in
// force, an earlier one and clearing take effect at once.
func TestClientReadDeadline(t *testing.T) {
	client, server := loopbackPair(t)
	c := &clientConn{Conn: server, idle: time.Minute}
	buf := make([]byte, 1)

	first := time.Now().Add(time.Hour)
	if err := c.SetReadDeadline(first); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(first.Add(time.Second)); err != nil || !c.readDeadline.Equal(first) {
		t.Fatalf("a deadline a second later re-armed the timer: %v, in force %v", err, c.readDeadline)
	}
	later := first.Add(10 * time.Minute)
	if err := c.SetReadDeadline(later); err != nil || !c.readDeadline.Equal(later) {
		t.Fatalf("a deadline ten minutes later was not set: %v, in force %v", err, c.readDeadline)
	}

	// An earlier deadline must take effect: one already passed fails the read.
	if err := c.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past an earlier deadline: %v, want a deadline error", err)
	}

	// Clearing it lets the next read wait for the client's byte.
	if err := c.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(buf); n != 1 || err != nil {
		t.Fatalf("read after clearing the deadline: %d, %v", n, err)
	}

	// SetDeadline sets the read deadline too, and a passed one fails reads.
	passed := time.Now().Add(-time.Second)
	if err := c.SetDeadline(passed); err != nil || !c.readDeadline.Equal(passed) {
		t.Fatalf("SetDeadline: %v, read deadline in force %v", err, c.readDeadline)
	}
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past SetDeadline's deadline: %v, want a deadline error", err)
	}
}
