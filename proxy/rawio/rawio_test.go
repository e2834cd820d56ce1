package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns the two ends of a loopback TCP connection, the first
// wrapped in an IO.
func tcpPair(t *testing.T) (*IO, *net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	var x IO
	if !x.Init(c) {
		t.Fatal("Init refused a TCP connection")
	}
	return &x, c.(*net.TCPConn), peer.(*net.TCPConn)
}

// Bytes go both ways; a write larger than the socket buffers waits for the
// reader and arrives whole; a read waits for data and sees io.EOF at the
// peer's close.
func TestReadWrite(t *testing.T) {
	x, _, peer := tcpPair(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB: more than the buffers hold
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(peer, int64(len(big))))
		got <- b
	}()
	if n, err := x.Write(big); n != len(big) || err != nil {
		t.Fatalf("wrote %d, %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, big) {
		t.Fatalf("the peer read %d bytes, not what was written", len(b))
	}

	go func() {
		time.Sleep(10 * time.Millisecond) // the read below may or may not find it there: both must work
		peer.Write([]byte("answer"))
		peer.CloseWrite()
	}()
	var all []byte
	buf := make([]byte, 4)
	for {
		n, err := x.Read(buf)
		all = append(all, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if string(all) != "answer" {
		t.Fatalf("read %q", all)
	}
}

// A read past its deadline fails as net.Conn's does: a timeout.
func TestReadDeadline(t *testing.T) {
	x, c, _ := tcpPair(t)
	c.SetReadDeadline(time.Now().Add(-time.Second))
	_, err := x.Read(make([]byte, 8))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err %v, want a timeout", err)
	}
}

// A write to a connection the peer reset fails with the errno, wrapped as
// net.Conn wraps it; a closed connection fails with net.ErrClosed.
func TestWriteErrors(t *testing.T) {
	x, c, peer := tcpPair(t)
	peer.SetLinger(0)
	peer.Close() // sends a reset
	var err error
	for range 100 { // the first writes may land before the reset does
		if _, err = x.Write([]byte("data")); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "write" ||
		!(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		t.Fatalf("err %v, want a write OpError of ECONNRESET or EPIPE", err)
	}
	c.Close()
	if _, err := x.Write([]byte("data")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("err %v after close, want net.ErrClosed", err)
	}
}

// Reads and writes allocate nothing.
func TestNoAllocations(t *testing.T) {
	x, _, peer := tcpPair(t)
	msg := []byte("ping")
	buf := make([]byte, 16)
	pbuf := make([]byte, 16)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := x.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(peer, pbuf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
		peer.Write(msg)
		if _, err := io.ReadFull(x, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per write and read", allocs)
	}
}

// Only TCP connections are taken.
func TestInitRefusesOthers(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	var x IO
	if x.Init(a) {
		t.Fatal("Init took a pipe")
	}
}
