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
// wrapped by rawio.
func tcpPair(t testing.TB) (*Conn, *net.TCPConn, *net.TCPConn) {
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
	x := Wrap(c)
	if x == nil {
		t.Fatal("Wrap refused a TCP connection")
	}
	return x, c.(*net.TCPConn), peer.(*net.TCPConn)
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
func TestWrapRefusesOthers(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Wrap(a) != nil {
		t.Fatal("Wrap took a pipe")
	}
}

// processCPU returns the CPU time the process has used, user and system, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkPingPong is one 64-byte exchange over loopback TCP, both ends
// read and written through rawio or both through net.Conn. A busy loop keeps
// a P running, so sysmon never sleeps deeply here and the two cost the same
// (18-19 µs of CPU per exchange on the 2-core machine): it shows that rawio
// adds nothing. What rawio saves, sysmon's waking when the process goes idle
// between requests, shows in the harness's chat-open scenario. cpu-ns/op is the whole process's CPU (both ends,
// and the runtime's threads) per exchange; compare the two sub-benchmarks,
// not the absolute figures.
func BenchmarkPingPong(b *testing.B) {
	for _, mode := range []string{"rawio", "net.Conn"} {
		b.Run(mode, func(b *testing.B) {
			x, c, peer := tcpPair(b)
			var far io.ReadWriter = peer
			var rw io.ReadWriter = x
			if mode == "net.Conn" {
				rw = c
			} else {
				far = Wrap(peer)
			}
			go func() {
				buf := make([]byte, 64)
				for {
					if _, err := io.ReadFull(far, buf); err != nil {
						return
					}
					if _, err := far.Write(buf); err != nil {
						return
					}
				}
			}()
			msg := make([]byte, 64)
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				if _, err := rw.Write(msg); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(rw, msg); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// The wrapped connection names the same peer as the TCP connection.
func TestRemoteAddr(t *testing.T) {
	x, c, peer := tcpPair(t)
	if got, want := x.RemoteAddr().String(), c.RemoteAddr().String(); got != want {
		t.Fatalf("RemoteAddr %s, want %s", got, want)
	}
	if got, want := x.RemoteAddr().String(), peer.LocalAddr().String(); got != want {
		t.Fatalf("RemoteAddr %s, the peer is at %s", got, want)
	}
}

// ReadAfter writes through send, then reads what the peer sends after it;
// the peer's bytes that come later wake its wait.
func TestReadAfter(t *testing.T) {
	x, _, peer := tcpPair(t)
	go func() {
		b := make([]byte, len("answer"))
		io.ReadFull(peer, b)
		time.Sleep(10 * time.Millisecond) // the wait may or may not have begun: both must work
		peer.Write(append([]byte("next:"), b...))
	}()
	var wrote int
	send := func(write func([]byte) (int, error)) bool {
		n, err := write([]byte("answer"))
		wrote = n
		return err == nil
	}
	buf := make([]byte, 64)
	n, sent, err := x.ReadAfter(send, buf)
	if err != nil || !sent || wrote != len("answer") || string(buf[:n]) != "next:answer" {
		t.Fatalf("read %q, sent %v, wrote %d, %v", buf[:n], sent, wrote, err)
	}
}

// When the socket's buffer cannot take what send writes, the write says so
// with what it took, and ReadAfter returns at once, having read nothing.
func TestReadAfterFullBuffer(t *testing.T) {
	x, c, _ := tcpPair(t)
	c.SetWriteBuffer(4 << 10)
	big := make([]byte, 8<<20) // the peer reads nothing: the buffers fill
	var wrote int
	var werr error
	send := func(write func([]byte) (int, error)) bool {
		wrote, werr = write(big)
		return werr == nil
	}
	n, sent, err := x.ReadAfter(send, make([]byte, 8))
	if n != 0 || sent || err != nil || !errors.Is(werr, ErrWouldBlock) || wrote == 0 || wrote >= len(big) {
		t.Fatalf("read %d, sent %v, %v; write took %d of %d, %v", n, sent, err, wrote, len(big), werr)
	}
}

// TryRead takes what the socket holds and does not wait when it holds nothing.
func TestTryRead(t *testing.T) {
	x, _, peer := tcpPair(t)
	buf := make([]byte, 16)
	if n, ok, err := x.TryRead(buf); n != 0 || ok || err != nil {
		t.Fatalf("empty socket: %d, %v, %v", n, ok, err)
	}
	peer.Write([]byte("data"))
	var n int
	var ok bool
	var err error
	for range 1000 { // the bytes cross the loopback: look until they are there
		if n, ok, err = x.TryRead(buf); ok {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !ok || err != nil || string(buf[:n]) != "data" {
		t.Fatalf("read %q, %v, %v", buf[:n], ok, err)
	}
	peer.CloseWrite()
	for range 1000 {
		if n, ok, err = x.TryRead(buf); ok {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if n != 0 || !ok || err != io.EOF {
		t.Fatalf("after the peer's close: %d, %v, %v; want io.EOF", n, ok, err)
	}
}

// ReadAfter allocates nothing.
func TestReadAfterNoAllocations(t *testing.T) {
	x, _, peer := tcpPair(t)
	msg := []byte("ping")
	buf := make([]byte, 16)
	pbuf := make([]byte, 16)
	send := func(write func([]byte) (int, error)) bool { _, err := write(msg); return err == nil }
	go func() {
		for {
			if _, err := io.ReadFull(peer, pbuf[:len(msg)]); err != nil {
				return
			}
			peer.Write(msg)
		}
	}()
	allocs := testing.AllocsPerRun(200, func() {
		if n, sent, err := x.ReadAfter(send, buf[:len(msg)]); err != nil || !sent || n == 0 {
			t.Fatal(n, sent, err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per ReadAfter", allocs)
	}
}

// A write that finds the socket's buffer full calls the OnStall function
// before it waits, and goes on once the peer reads; a write that finds room
// does not call it.
func TestOnStall(t *testing.T) {
	x, _, peer := tcpPair(t)
	stalls := make(chan struct{}, 1)
	f := func() {
		select {
		case stalls <- struct{}{}:
		default:
		}
	}
	x.OnStall(&f)
	if _, err := x.Write([]byte("small")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stalls:
		t.Fatal("a write that found room called OnStall's function")
	default:
	}
	big := make([]byte, 64<<20) // more than any socket buffers on loopback hold
	wrote := make(chan error, 1)
	go func() {
		_, err := x.Write(big)
		wrote <- err
	}()
	<-stalls // the write waits for the peer
	x.OnStall(nil)
	if n, err := io.CopyN(io.Discard, peer, int64(len("small")+len(big))); err != nil {
		t.Fatal(n, err)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}

// AwaitReadable returns once bytes are there, whether they came before it
// or while it waited, and leaves them for the Read that follows; it returns
// at the peer's close, and fails at the read deadline as Read does.
func TestAwaitReadable(t *testing.T) {
	x, c, peer := tcpPair(t)
	buf := make([]byte, 16)
	peer.Write([]byte("early"))
	for range 2 { // the second time, it finds the same bytes, untaken
		if err := x.AwaitReadable(); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := x.Read(buf); err != nil || string(buf[:n]) != "early" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}

	waited := make(chan error, 1)
	go func() { waited <- x.AwaitReadable() }()
	peer.Write([]byte("late")) // before or after the wait began: both must work
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if n, err := x.Read(buf); err != nil || string(buf[:n]) != "late" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}

	c.SetReadDeadline(time.Now().Add(-time.Second))
	var ne net.Error
	if err := x.AwaitReadable(); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("err %v past the deadline, want a timeout", err)
	}
	c.SetReadDeadline(time.Time{})
	peer.CloseWrite()
	if err := x.AwaitReadable(); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Read(buf); err != io.EOF {
		t.Fatalf("err %v after the peer's close, want io.EOF", err)
	}
}
