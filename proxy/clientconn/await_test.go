package clientconn

import (
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"
)

// awaitPair returns a client connection over loopback TCP, as the listener
// makes it (rawio underneath), and the client's end.
func awaitPair(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	client, server := loopbackPair(t)
	c := newConn(server, time.Minute)
	if c.raw == nil {
		t.Fatal("the connection is not rawio's")
	}
	return c, client
}

// serverRead reads into p from c on another goroutine, and fails the test
// if that takes longer than a hung read could: the answer, or the error.
func serverRead(t *testing.T, c *Conn, p []byte) (int, error) {
	t.Helper()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := c.Read(p)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		return r.n, r.err
	case <-time.After(10 * time.Second):
		c.Close()
		t.Fatal("the server's read hung")
		return 0, nil
	}
}

// answerAndRead has the server hold back answer and read the next request,
// while the client reads the answer and then, after wait, sends next. It
// returns what the server read.
func answerAndRead(t *testing.T, c *Conn, client net.Conn, answer, next string, wait time.Duration) string {
	t.Helper()
	c.HoldTail()
	if _, err := c.Write([]byte(answer)); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		b := make([]byte, len(answer))
		if _, err := io.ReadFull(client, b); err != nil || string(b) != answer {
			got <- fmt.Errorf("client read %q, %v; want %q", b, err, answer)
			return
		}
		time.Sleep(wait)
		_, err := client.Write([]byte(next))
		got <- err
	}()
	p := make([]byte, 64)
	n, err := serverRead(t, c, p)
	if err != nil {
		t.Fatalf("server read: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	return string(p[:n])
}

// A held answer is sent by the read for the next request, which then waits
// for it: the client gets the answer and the server its next request, and a
// client that answers at once keeps the connection's requests awaited.
func TestAwaitedRequest(t *testing.T) {
	c, client := awaitPair(t)
	for i := range 3 {
		next := fmt.Sprintf("request %d", i)
		if got := answerAndRead(t, c, client, "answer", next, 0); got != next {
			t.Fatalf("server read %q, want %q", got, next)
		}
		if c.slow || c.early || c.holding.Load() || c.held != nil {
			t.Fatalf("after request %d: slow %v, early %v, holding %v; want awaited, nothing held",
				i, c.slow, c.early, c.holding.Load())
		}
	}
}

// A request that comes later than AwaitLimit after its answer is still read;
// the connection's next requests are read the usual way (slow) until one
// comes within AwaitLimit of its answer.
func TestAwaitSlowClient(t *testing.T) {
	c, client := awaitPair(t)
	if got := answerAndRead(t, c, client, "answer", "late", 3*AwaitLimit); got != "late" {
		t.Fatalf("server read %q", got)
	}
	if !c.slow || c.early {
		t.Fatalf("slow %v, early %v after a request %v after its answer; want slow", c.slow, c.early, 3*AwaitLimit)
	}
	if got := answerAndRead(t, c, client, "answer", "prompt", 0); got != "prompt" {
		t.Fatalf("server read %q", got)
	}
	if c.slow {
		t.Fatal("still slow after a request that came at once")
	}
}

// A request the client sent before it had the answer before it (pipelining),
// once the server had read the one before, is read: its readiness was spent
// before the wait, which finds it at AwaitLimit. The connection's requests
// are read the usual way from then on.
func TestAwaitPipelinedRequest(t *testing.T) {
	c, client := awaitPair(t)
	if _, err := client.Write([]byte("first")); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 64)
	if n, err := serverRead(t, c, p); err != nil || string(p[:n]) != "first" {
		t.Fatalf("server read %q, %v", p[:n], err)
	}
	if _, err := client.Write([]byte("second")); err != nil {
		t.Fatal(err)
	}
	// The goroutine sleeps: the process is idle, so the poller takes the
	// socket's readiness now, with no reader waiting for it.
	time.Sleep(50 * time.Millisecond)
	c.HoldTail()
	if _, err := c.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	n, err := serverRead(t, c, p)
	if err != nil || string(p[:n]) != "second" {
		t.Fatalf("server read %q, %v; want the pipelined request", p[:n], err)
	}
	b := make([]byte, len("answer"))
	if _, err := io.ReadFull(client, b); err != nil || string(b) != "answer" {
		t.Fatalf("client read %q, %v", b, err)
	}
	if !c.early {
		t.Fatal("a request sent before its answer did not mark the connection")
	}
	if got := answerAndRead(t, c, client, "answer", "third", 0); got != "third" {
		t.Fatalf("server read %q", got)
	}
}

// A read deadline sooner than AwaitLimit bounds the wait as it bounds any
// read: the read fails with a timeout, after the answer was sent.
func TestAwaitReadDeadline(t *testing.T) {
	c, client := awaitPair(t)
	if err := c.SetReadDeadline(time.Now().Add(AwaitLimit / 4)); err != nil {
		t.Fatal(err)
	}
	c.HoldTail()
	if _, err := c.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	_, err := serverRead(t, c, make([]byte, 8))
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("err %v, want a timeout", err)
	}
	b := make([]byte, len("answer"))
	if _, err := io.ReadFull(client, b); err != nil || string(b) != "answer" {
		t.Fatalf("client read %q, %v", b, err)
	}
	if c.slow || c.early {
		t.Fatalf("slow %v, early %v: a deadline of the server's is not the client's pace", c.slow, c.early)
	}
}

// Waits in quick succession share one bound: the deadline is set anew only
// when the bound in force has less than awaitReuse left.
func TestAwaitBoundKept(t *testing.T) {
	c, client := awaitPair(t)
	if got := answerAndRead(t, c, client, "answer", "first", 0); got != "first" {
		t.Fatalf("server read %q", got)
	}
	first := c.bound
	if first.IsZero() {
		t.Fatal("no bound in force after an awaited request")
	}
	start := time.Now()
	if got := answerAndRead(t, c, client, "answer", "second", 0); got != "second" {
		t.Fatalf("server read %q", got)
	}
	switch left := first.Sub(start); {
	case left >= awaitReuse && !c.bound.Equal(first):
		t.Fatalf("the bound moved though %v of it was left", left)
	case left >= awaitReuse:
	case !c.bound.After(first): // a loaded machine: the second wait came late
		t.Fatalf("only %v of the bound was left, and it was not set anew", left)
	}
}

// A read that is not a wait (here, for the rest of a request's body) puts the
// connection's own deadline back: it does not fail when the bound passes.
func TestAwaitBoundNotForOtherReads(t *testing.T) {
	c, client := awaitPair(t)
	if got := answerAndRead(t, c, client, "answer", "head", 0); got != "head" {
		t.Fatalf("server read %q", got)
	}
	if c.bound.IsZero() {
		t.Fatal("no bound in force after an awaited request")
	}
	go func() {
		time.Sleep(2 * AwaitLimit)
		client.Write([]byte("body"))
	}()
	p := make([]byte, 16)
	n, err := serverRead(t, c, p)
	if err != nil || string(p[:n]) != "body" {
		t.Fatalf("server read %q, %v; want the body sent after the bound", p[:n], err)
	}
	if !c.bound.IsZero() {
		t.Fatal("the bound is still in force after a read that is not a wait")
	}
}

// While a bound is in force, a read deadline after it is only noted, and
// one before it takes effect at once.
func TestAwaitBoundAndReadDeadline(t *testing.T) {
	c, client := awaitPair(t)
	if got := answerAndRead(t, c, client, "answer", "first", 0); got != "first" {
		t.Fatalf("server read %q", got)
	}
	bound := c.bound
	later := time.Now().Add(time.Minute)
	if err := c.SetReadDeadline(later); err != nil {
		t.Fatal(err)
	}
	if !c.bound.Equal(bound) || !c.readDeadline.Equal(later) {
		t.Fatalf("bound %v, deadline %v after a later deadline; want the bound kept and the deadline noted", c.bound, c.readDeadline)
	}
	if err := c.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if !c.bound.IsZero() {
		t.Fatal("a deadline before the bound did not replace it")
	}
	_, err := serverRead(t, c, make([]byte, 8))
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("err %v, want a timeout", err)
	}
}

// An answer larger than the socket's buffers takes leaves whole: the wait's
// write stops where the buffer is full, and the rest is written the usual
// way while the client reads.
func TestAwaitAnswerFillsTheBuffer(t *testing.T) {
	c, client := awaitPair(t)
	c.raw.SetWriteBuffer(4 << 10)
	answer := strings.Repeat("0123456789abcdef", (heldCap-64)/16)
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(20 * time.Millisecond) // the wait's write finds the buffer full
		b := make([]byte, len(answer))
		io.ReadFull(client, b)
		client.Write([]byte("next"))
		got <- b
	}()
	c.HoldTail()
	if _, err := c.Write([]byte(answer)); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 16)
	n, err := serverRead(t, c, p)
	if err != nil || string(p[:n]) != "next" {
		t.Fatalf("server read %q, %v", p[:n], err)
	}
	if b := <-got; string(b) != answer {
		t.Fatalf("client read %d bytes, not the answer", len(b))
	}
}

// A Close from another goroutine while the server awaits the next request
// ends the read; the answer went out before, once.
func TestAwaitClose(t *testing.T) {
	c, client := awaitPair(t)
	c.HoldTail()
	if _, err := c.Write([]byte("answer")); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(5 * time.Millisecond)
		c.Close()
	}()
	if _, err := serverRead(t, c, make([]byte, 8)); err == nil {
		t.Fatal("read after Close succeeded")
	}
	b, err := io.ReadAll(client)
	if err != nil || string(b) != "answer" {
		t.Fatalf("client read %q, %v; want the answer once, then the close", b, err)
	}
}

// BenchmarkClientExchange is a keep-alive exchange over loopback TCP: the
// client writes a request and reads its answer; the server reads the request
// through a Conn and writes the answer, held back and sent by its read
// for the next request ("awaited", as the gateway's answers are), or written
// at once and then read for ("read first"). cpu-ns/op is the whole process's
// CPU per exchange (both ends); compare the two, not the absolute figures.
func BenchmarkClientExchange(b *testing.B) {
	for _, mode := range []string{"awaited", "read first"} {
		b.Run(mode, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			defer ln.Close()
			client, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer client.Close()
			server, err := ln.Accept()
			if err != nil {
				b.Fatal(err)
			}
			c := newConn(server, time.Minute)
			defer c.Close()
			request, answer := make([]byte, 600), make([]byte, 1500)
			go func() {
				p := make([]byte, 4096)
				for {
					if _, err := io.ReadFull(c, p[:len(request)]); err != nil {
						return
					}
					if mode == "awaited" {
						c.HoldTail()
					}
					if _, err := c.Write(answer); err != nil {
						return
					}
				}
			}()
			got := make([]byte, len(answer))
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				if _, err := client.Write(request); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(client, got); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU returns the CPU time the process has used, user and system, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
