package wire

import (
	"errors"
	"net"
	"testing"
	"time"
)

// dialLoopback returns a deadlineConn to a loopback listener that accepts
// and holds the connection, with a minute for every read deadline.
func dialLoopback(t testing.TB) *deadlineConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := &dialer{connect: time.Second, firstByte: time.Minute, idle: time.Minute}
	c, err := d.Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c.(*deadlineConn)
}

// Cancel ends a read that waits on the attached connection at once, with
// ErrCanceled, and every read after it; detach then says to close it.
func TestCancelEndsTheWait(t *testing.T) {
	dc := dialLoopback(t)
	var c Cancel
	if !c.attach(dc) {
		t.Fatal("attach refused before any Cancel")
	}
	done := make(chan error, 1)
	go func() {
		_, err := dc.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond) // most likely blocked by now; either way must work
	c.Cancel()
	select {
	case err := <-done:
		if !errors.Is(err, ErrCanceled) {
			t.Fatalf("the read ended with %v, want ErrCanceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the read still waits after Cancel")
	}
	if _, err := dc.Read(make([]byte, 8)); !errors.Is(err, ErrCanceled) {
		t.Fatalf("a later read: %v, want ErrCanceled", err)
	}
	if !c.detach() || !c.Canceled() {
		t.Fatal("detach or Canceled does not report the Cancel: the connection would be reused")
	}
	c.Reset()
	if c.Canceled() || !c.attach(dialLoopback(t)) {
		t.Fatal("Reset did not make the Cancel ready for another call")
	}
}

// A call canceled before its connection is attached gets none, and a
// Cancel after detach touches no connection: it may be another call's.
func TestCancelOutsideTheAttachment(t *testing.T) {
	var c Cancel
	c.Cancel()
	if c.attach(dialLoopback(t)) {
		t.Fatal("attach took a connection for a canceled call")
	}
	c.Reset()
	dc := dialLoopback(t)
	c.attach(dc)
	if c.detach() {
		t.Fatal("detach reports a Cancel that did not come")
	}
	c.Cancel()
	if dc.canceled.Load() {
		t.Fatal("a Cancel after detach reached the connection")
	}
	var none *Cancel // a Request without one
	if !none.attach(dc) || none.detach() || none.Canceled() {
		t.Fatal("a nil Cancel is not inert")
	}
}

// BenchmarkCancelUncanceled is what a Cancel costs a call that is not
// canceled: attach, detach and Reset.
func BenchmarkCancelUncanceled(b *testing.B) {
	dc := dialLoopback(b)
	var c Cancel
	b.ReportAllocs()
	for b.Loop() {
		c.attach(dc)
		c.detach()
		c.Reset()
	}
}
