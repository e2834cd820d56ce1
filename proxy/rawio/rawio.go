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
// It does not own the connections: their deadlines, close and addresses stay
// with net.Conn. It is used only for *net.TCPConn; anything else (TLS runs
// above it, tests use pipes) keeps net.Conn's own reads and writes.
package rawio

import (
	"io"
	"net"
	"os"
	"syscall"
)

// IO reads and writes one TCP connection. Safe for one reader and one writer
// at a time, as fasthttp and the relay use a connection; the zero value is
// not usable, see Init.
type IO struct {
	conn   *net.TCPConn
	rc     syscall.RawConn
	rd, wr op
}

// op is the state of one direction: the method value handed to RawConn (made
// once, so that a call allocates nothing), the caller's buffer, and the
// outcome.
type op struct {
	step func(uintptr) bool
	p    []byte
	n    int
	err  error
}

// Init makes x read and write c, and reports whether it can: c must be a
// *net.TCPConn. Otherwise the caller keeps c's own Read and Write.
func (x *IO) Init(c net.Conn) bool {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	x.conn, x.rc = tc, rc
	x.rd.step, x.wr.step = x.readStep, x.writeStep
	return true
}

// Raw returns the connection's syscall.RawConn.
func (x *IO) Raw() syscall.RawConn { return x.rc }

// Read reads into p as net.Conn.Read does: what the socket holds, waiting
// for the poller while it holds nothing; io.EOF once the peer has closed.
func (x *IO) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	x.rd.p, x.rd.n, x.rd.err = p, 0, nil
	err := x.rc.Read(x.rd.step)
	n := x.rd.n
	if err == nil {
		err = x.rd.err
	}
	x.rd.p, x.rd.err = nil, nil
	return n, err
}

func (x *IO) readStep(fd uintptr) bool {
	for {
		n, e := sysRead(fd, x.rd.p)
		switch {
		case e == 0 && n == 0:
			x.rd.err = io.EOF
		case e == 0:
			x.rd.n = int(n)
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

// Write writes p whole as net.Conn.Write does, waiting for the poller while
// the socket's buffer is full; on an error it returns what was written.
func (x *IO) Write(p []byte) (int, error) {
	x.wr.p, x.wr.n, x.wr.err = p, 0, nil
	err := x.rc.Write(x.wr.step)
	n := x.wr.n
	if err == nil {
		err = x.wr.err
	}
	x.wr.p, x.wr.err = nil, nil
	return n, err
}

func (x *IO) writeStep(fd uintptr) bool {
	for x.wr.n < len(x.wr.p) {
		n, e := sysWrite(fd, x.wr.p[x.wr.n:])
		switch e {
		case 0:
			x.wr.n += int(n)
		case syscall.EAGAIN:
			return false
		case syscall.EINTR:
		default:
			x.wr.err = x.opError("write", e)
			return true
		}
	}
	return true
}

// opError wraps errno as net.Conn's reads and writes do.
func (x *IO) opError(op string, e syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: x.conn.LocalAddr(), Addr: x.conn.RemoteAddr(),
		Err: os.NewSyscallError(op, e)}
}

// Conn returns the connection with its reads and writes made by x, for a
// layer above it that reads and writes through net.Conn (TLS).
func (x *IO) Conn() net.Conn { return conn{x.conn, x} }

type conn struct {
	*net.TCPConn
	x *IO
}

func (c conn) Read(p []byte) (int, error)  { return c.x.Read(p) }
func (c conn) Write(p []byte) (int, error) { return c.x.Write(p) }
