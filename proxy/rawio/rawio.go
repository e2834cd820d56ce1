// Package rawio owns the reads and writes of the gateway's TCP connections,
// client and upstream: it makes them with syscall.RawSyscall on the
// connection's non-blocking socket (through package syscall under the race
// detector, see sys_race.go), under the connection's own locks,
// deadlines and poller (syscall.RawConn), instead of through net.Conn.
//
// Why: a socket read or write made through net.Conn enters the scheduler's
// system-call state, and a goroutine entering it wakes the runtime's monitor
// thread (sysmon) whenever every P was idle. Woken that way, sysmon polls
// every 20 µs for at least a millisecond, and each of its sleeps is a system
// call and two context switches: 6 to 28 % of the gateway's CPU in the
// harness (perf, docs/performance.md). A read or write on a non-blocking
// socket never blocks: it copies what the socket buffers take or hold and
// returns, so it needs neither that state nor sysmon's watch. EAGAIN parks
// the goroutine on the poller exactly as net.Conn does.
//
// It also has a write and the wait for the peer's answer made as one
// (ReadAfter), without the read in between that would find nothing; and it
// watches a connection's peer for its leaving while nothing reads from the
// connection (Watch: one watcher goroutine and epoll instance for the
// process, Linux only), so that a client that goes away ends the upstream
// call it waits on at once; and it parks a connection that waits for its
// next bytes without a goroutine (Park: one parker goroutine and epoll
// instance for the process, Linux only), so that an idle stream holds no
// stack.
//
// It does not own the connections: their deadlines, close and addresses stay
// the *net.TCPConn's. It is used only for *net.TCPConn; anything else (tests
// use pipes) keeps net.Conn's own reads and writes. TLS runs above it.
package rawio

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Conn is a TCP connection whose reads and writes rawio makes; everything
// else is the *net.TCPConn's own. Callers use it in place of the connection,
// directly or under TLS. Safe for one reader and one writer at a time, as
// net.Conn is used by fasthttp and the relay.
type Conn struct {
	*net.TCPConn
	rc     syscall.RawConn
	rd, wr op
	aw     await
	// remote is the peer's address, read once: fasthttp asks an upstream
	// connection for it with every answer (Response.ParseNetConn), and the
	// TCP connection's own method reads a field of its netFD, a line no read
	// or write touches.
	remote net.Addr
	// stall is OnStall's function, or nil.
	stall atomic.Pointer[func()]
	// park is the connection's Parking once it parked (see Park).
	park atomic.Pointer[Parking]
}

// op is the state of one direction: the step handed to RawConn's Read or
// Write (a method value made once, so that a call allocates nothing), the
// caller's buffer, and the outcome. Which of RawConn's waits it takes is
// told by write, not kept as a method value of RawConn's: that would be one
// more object, cold under a thousand streams, loaded before each wait.
type op struct {
	step  func(uintptr) bool
	p     []byte
	n     int
	err   error
	write bool
}

// Wrap returns c with its reads and writes made by rawio, or nil when c is
// not a *net.TCPConn: the caller then keeps c's own.
func Wrap(c net.Conn) *Conn {
	x := new(Conn)
	if !x.Init(c) {
		return nil
	}
	return x
}

// Init makes x c with its reads and writes made by rawio, and reports
// whether it could: false, leaving x as it was, when c is not a
// *net.TCPConn. It is Wrap for a Conn kept inside the caller's own
// connection, where a stream's per-event state is one object fewer to load
// from memory. x must not be copied after Init.
func (x *Conn) Init(c net.Conn) bool {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	x.TCPConn, x.rc, x.remote = tc, rc, tc.RemoteAddr()
	x.rd.step = x.readStep
	x.wr.step, x.wr.write = x.writeStep, true
	return true
}

// RemoteAddr returns the peer's address.
func (x *Conn) RemoteAddr() net.Addr { return x.remote }

// Raw returns the connection's syscall.RawConn.
func (x *Conn) Raw() syscall.RawConn { return x.rc }

// Read reads into p as net.Conn.Read does: what the socket holds, waiting
// for the poller while it holds nothing; io.EOF once the peer has closed.
func (x *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return x.run(&x.rd, p, x.rd.step)
}

// Write writes p whole as net.Conn.Write does, waiting for the poller while
// the socket's buffer is full; on an error it returns what was written.
func (x *Conn) Write(p []byte) (int, error) { return x.run(&x.wr, p, x.wr.step) }

// run has RawConn call step on p, with o's state, until it is done, and
// returns the bytes it moved and its error, or the wait's (a deadline, a
// close).
func (x *Conn) run(o *op, p []byte, step func(uintptr) bool) (int, error) {
	o.p, o.n, o.err = p, 0, nil
	var err error
	if o.write {
		err = x.rc.Write(step)
	} else {
		err = x.rc.Read(step)
	}
	if err == nil {
		err = o.err
	}
	n := o.n
	o.p, o.err = nil, nil
	return n, err
}

func (x *Conn) readStep(fd uintptr) bool {
	if x.rd.p == nil {
		return x.readyStep(fd)
	}
	for {
		n, e := sysRead(fd, x.rd.p)
		switch {
		case e == 0 && n == 0:
			x.rd.err = io.EOF
		case e == 0:
			x.rd.n = n
		case e == syscall.EAGAIN:
			return false
		case e == syscall.EINTR:
			continue
		default:
			x.rd.err = x.opError("read", e)
		}
		return true
	}
}

// AwaitReadable waits until a Read would return at once: bytes are there,
// the peer has closed, or the socket failed; or the read deadline passes, or
// the connection is closed, which it returns as Read would. It takes nothing
// from the socket, so its caller needs no buffer while it waits. It costs
// what a Read that finds nothing costs: one recv(2) of MSG_PEEK, which
// fails with EAGAIN, then the poller's wait, after which the Read that
// follows finds the bytes. (RawConn's Read resets the socket's readiness
// before its first step, so the look must come after that reset: bytes
// that came before it would otherwise wake nothing.)
func (x *Conn) AwaitReadable() error {
	x.rd.n = 0 // readyStep's: set once it asked for the poller's wait
	return x.rc.Read(x.rd.step)
}

// readyStep is readStep for AwaitReadable (an op without a buffer): it looks
// at the socket, asks for the wait when it holds nothing, and is done at its
// next call, after the poller woke it (a readiness the runtime saw before
// the look only makes the Read after wait as Read waits).
func (x *Conn) readyStep(fd uintptr) bool {
	if x.rd.n != 0 {
		return true
	}
	for {
		switch sysPeek(fd) {
		case syscall.EAGAIN:
			x.rd.n = 1
			return false
		case syscall.EINTR:
			continue
		}
		return true // bytes, the peer's close or an error: Read returns at once
	}
}

// sysPeek looks at fd's first pending byte with one recv(2) of MSG_PEEK,
// which takes nothing, and returns its error: 0 when a byte or the peer's
// close is there. It moves no byte, so the race detector has nothing to be
// told of it (see sys_race.go): the Read after it is made as ever.
func sysPeek(fd uintptr) syscall.Errno {
	var b byte
	_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b)), 1, syscall.MSG_PEEK, 0, 0)
	return e
}

func (x *Conn) writeStep(fd uintptr) bool {
	for x.wr.n < len(x.wr.p) {
		n, e := sysWrite(fd, x.wr.p[x.wr.n:])
		switch e {
		case 0:
			x.wr.n += n
		case syscall.EAGAIN:
			if f := x.stall.Load(); f != nil {
				(*f)()
			}
			return false
		case syscall.EINTR:
		default:
			x.wr.err = x.opError("write", e)
			return true
		}
	}
	return true
}

// OnStall has Write call *f each time it finds the socket's buffer full,
// before it waits for room: the writer learns that the peer is not taking
// bytes without a system call of its own. f runs on the writing goroutine,
// inside the write, and must not block. nil stops it.
func (x *Conn) OnStall(f *func()) { x.stall.Store(f) }

// await is the state of ReadAfter: the caller's send, and the steps and the
// write handed to RawConn and to send (method values made at their first
// use: an upstream connection never makes them).
type await struct {
	send  func(write func([]byte) (int, error)) bool
	step  func(uintptr) bool
	try   func(uintptr) bool
	write func([]byte) (int, error)
	fd    uintptr
	sent  bool
	empty bool
}

// ErrWouldBlock is what ReadAfter's write returns when the socket's buffer
// took only part of what it was given.
var ErrWouldBlock = errors.New("rawio: the socket's buffer is full")

// ReadAfter calls send once inside the connection's read wait, then reads
// into p as Read does, except that it waits for the poller before its first
// read instead of trying it. It reports whether send wrote all it had.
//
// A client sends its next request only once it has its answer: a read
// right after the answer is written finds nothing and fails with EAGAIN,
// one system call for nothing per request (about 1.1 µs on the 2-core
// machine before the kernel does anything). RawConn.Read resets the
// connection's readiness before it calls the step, so whatever arrives
// after send's write wakes the wait. What arrived before the call does not:
// its readiness was spent, and the wait sees it only when more comes or its
// deadline passes. The caller bounds the wait with a read deadline and then
// looks with TryRead (see the proxy's clientConn.awaitNext).
//
// send is given a write that does not wait: it returns ErrWouldBlock with
// what it wrote when the socket's buffer is full. When send returns false,
// ReadAfter returns at once, having read nothing, and the caller finishes
// its write the usual way.
func (x *Conn) ReadAfter(send func(write func([]byte) (int, error)) bool, p []byte) (n int, sent bool, err error) {
	if len(p) == 0 {
		return 0, false, nil
	}
	if x.aw.step == nil {
		x.aw.step, x.aw.write = x.awaitStep, x.writeNow
	}
	x.aw.send, x.aw.sent = send, false
	n, err = x.run(&x.rd, p, x.aw.step)
	sent = x.aw.sent
	x.aw.send = nil
	return n, sent, err
}

func (x *Conn) awaitStep(fd uintptr) bool {
	if x.aw.sent {
		return x.readStep(fd)
	}
	x.aw.fd = fd
	if !x.aw.send(x.aw.write) {
		return true
	}
	x.aw.sent = true
	return false // wait for the poller before the first read
}

// writeNow writes p on the socket ReadAfter's step was given, without
// waiting for room in its buffer.
func (x *Conn) writeNow(p []byte) (int, error) {
	w := 0
	for w < len(p) {
		n, e := sysWrite(x.aw.fd, p[w:])
		switch e {
		case 0:
			w += n
		case syscall.EAGAIN:
			return w, ErrWouldBlock
		case syscall.EINTR:
		default:
			return w, x.opError("write", e)
		}
	}
	return w, nil
}

// TryRead reads into p what the socket holds, without waiting: ok is false
// when it held nothing.
func (x *Conn) TryRead(p []byte) (n int, ok bool, err error) {
	if len(p) == 0 {
		return 0, true, nil
	}
	if x.aw.try == nil {
		x.aw.try = x.tryStep
	}
	x.aw.empty = false
	n, err = x.run(&x.rd, p, x.aw.try)
	return n, !x.aw.empty, err
}

func (x *Conn) tryStep(fd uintptr) bool {
	if !x.readStep(fd) {
		x.aw.empty = true
	}
	return true
}

// opError wraps errno as net.Conn's reads and writes do.
func (x *Conn) opError(op string, e syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: x.LocalAddr(), Addr: x.RemoteAddr(),
		Err: os.NewSyscallError(op, e)}
}
