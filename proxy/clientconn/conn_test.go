package clientconn

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
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
	c := &Conn{Conn: server, idle: time.Minute}
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

// countConn counts the writes that reach the connection under a Conn.
type countConn struct {
	net.Conn
	writes int
}

func (c *countConn) Write(p []byte) (int, error) {
	c.writes++
	return c.Conn.Write(p)
}

// After HoldTail, what is written waits for the server's next read, write
// deadline or close, and then leaves in one write, in order; holding ends
// there. A read deadline, which fasthttp sets just before it reads for the
// next request, leaves it held for that read.
func TestClientHoldsTheTail(t *testing.T) {
	for _, end := range []struct {
		name string
		do   func(c *Conn) error
	}{
		{"read", func(c *Conn) error { _, err := c.Read(make([]byte, 1)); return err }},
		{"read deadline, then read", func(c *Conn) error {
			if err := c.SetReadDeadline(time.Now().Add(time.Minute)); err != nil {
				return err
			}
			if c.held == nil {
				return errors.New("a read deadline sent what was held")
			}
			_, err := c.Read(make([]byte, 1))
			return err
		}},
		{"write deadline", func(c *Conn) error { return c.SetWriteDeadline(time.Time{}) }},
		{"deadline", func(c *Conn) error { return c.SetDeadline(time.Time{}) }},
		{"close write", func(c *Conn) error { return c.CloseWrite() }},
		{"close", func(c *Conn) error { return c.Close() }},
	} {
		t.Run(end.name, func(t *testing.T) {
			client, server := loopbackPair(t)
			under := &countConn{Conn: server}
			c := &Conn{Conn: under, idle: time.Minute}
			if _, err := client.Write([]byte{'x'}); err != nil { // what "read" reads
				t.Fatal(err)
			}
			c.HoldTail()
			for _, s := range []string{"1a\r\nevents\r\n", "0\r\n", "\r\n"} {
				if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("held write: %d, %v", n, err)
				}
			}
			if under.writes != 0 {
				t.Fatalf("%d writes reached the connection while holding", under.writes)
			}
			if err := end.do(c); err != nil {
				t.Fatal(err)
			}
			if under.writes != 1 {
				t.Fatalf("%d writes after %s, want 1", under.writes, end.name)
			}
			want := "1a\r\nevents\r\n0\r\n\r\n"
			got := make([]byte, len(want))
			if _, err := io.ReadFull(client, got); err != nil || string(got) != want {
				t.Fatalf("client read %q, %v; want %q", got, err, want)
			}
			if end.name == "close" || end.name == "close write" {
				return
			}
			if _, err := c.Write([]byte("next")); err != nil || under.writes != 2 {
				t.Fatalf("a write after the tail was sent: %v, %d writes, want it sent at once", err, under.writes)
			}
		})
	}
}

// Bytes that would overflow what a connection holds send what is held, then
// themselves, in order, and end the holding.
func TestClientHoldOverflow(t *testing.T) {
	client, server := loopbackPair(t)
	under := &countConn{Conn: server}
	c := &Conn{Conn: under, idle: time.Minute}
	c.HoldTail()
	first := strings.Repeat("a", heldCap-4)
	second := strings.Repeat("b", 8)
	for _, s := range []string{first, second} {
		if n, err := c.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("write: %d, %v", n, err)
		}
	}
	if under.writes != 2 || c.holding.Load() {
		t.Fatalf("%d writes, holding %v; want the held bytes and the overflow sent, and holding ended", under.writes, c.holding.Load())
	}
	got := make([]byte, len(first)+len(second))
	if _, err := io.ReadFull(client, got); err != nil || string(got) != first+second {
		t.Fatalf("client read %d bytes, %v; want the held bytes, then the overflow", len(got), err)
	}
}

// A Close from another goroutine (fasthttp's shutdown of idle connections)
// while the server still writes its held tail neither races nor loses order.
func TestClientHoldCloseRace(t *testing.T) {
	_, server := loopbackPair(t)
	c := &Conn{Conn: server, idle: time.Minute}
	c.HoldTail()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Close()
	}()
	for range 100 {
		c.Write([]byte("0\r\n"))
	}
	<-done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held != nil && c.holding.Load() {
		t.Fatal("bytes still held after Close")
	}
}

// scriptConn returns its reads one by one, and takes writes.
type scriptConn struct {
	net.Conn
	reads []string
}

func (c *scriptConn) Read(p []byte) (int, error) {
	if len(c.reads) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.reads[0])
	c.reads = c.reads[1:]
	return n, nil
}

func (c *scriptConn) Write(p []byte) (int, error) { return len(p), nil }

func (c *scriptConn) SetWriteDeadline(time.Time) error { return nil }

// The client connection fails a read for more of a head whose bytes so far
// already end it without CRLF CRLF; a read into another place (the head was
// read, this is its body), a well-ended head, and a body after a 100
// Continue are read as they come.
func TestClientRefusesMoreOfABadHead(t *testing.T) {
	buf := make([]byte, 256)
	read := func(c *Conn, at int) (int, error) { return c.Read(buf[at:]) }

	// The bad head, then the server asks for more right after it.
	c := &Conn{Conn: &scriptConn{reads: []string{"GET / HTTP/1.1\r\nHost: gw\n\n", "more"}}}
	n, err := read(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := read(c, n); !errors.Is(err, ErrHeadEnd) {
		t.Fatalf("more of a bad head: %v", err)
	}

	// The same bytes, but the next read goes elsewhere: not a head any more.
	c = &Conn{Conn: &scriptConn{reads: []string{"GET / HTTP/1.1\r\nHost: gw\n\n", "body"}}}
	if _, err := read(c, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := read(c, 0); err != nil || n != 4 {
		t.Fatalf("a read elsewhere: %d %v", n, err)
	}

	// A head split over reads, ending well, then its body in the same buffer.
	c = &Conn{Conn: &scriptConn{reads: []string{"GET / HTTP/1.1\r\nHost", ": gw\r\n\r\n", "{\n\n}"}}}
	at := 0
	for i := 0; i < 3; i++ {
		n, err := read(c, at)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		at += n
	}

	// After a 100 Continue, the body in pieces is no head, bare LFs and all.
	c = &Conn{Conn: &scriptConn{reads: []string{"POST / HTTP/1.1\r\nHost: gw\r\nExpect: 100-continue\r\n\r\n", "{\n\n", "}"}}}
	n, err = read(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(continueLine)
	m, err := read(c, n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := read(c, n+m); err != nil {
		t.Fatalf("the body after a 100 Continue: %v", err)
	}
}
