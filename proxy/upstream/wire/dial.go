package wire

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/rawio"
)

// dialer makes upstream connections that own their deadlines: after a
// request is written, the next read may wait up to firstByte; every later read
// up to idle. fasthttp's own read deadline covers a whole streamed body, which
// would cut long streams, so it is ignored. A request's write may wait up to
// write for the upstream to take each piece of it (see deadlineConn.Write).
//
// It also speaks TLS to deployments that want it (tls is not nil), below
// deadlineConn, so that Stale and the deadlines see the connection whatever
// its scheme.
type dialer struct {
	connect, firstByte, idle, write time.Duration
	tls                             *tls.Config
	// obs, when not nil, is told what the connections see (see Observer).
	obs Observer
	// connectTo, when not nil, makes the connection in place of TCP (see
	// Options.Dial).
	connectTo func(addr string) (net.Conn, error)
}

// errDial marks a failure to connect: nothing reached the upstream, so the call
// may be retried on another deployment.
type errDial struct{ err error }

func (e *errDial) Error() string { return "cannot connect to upstream: " + e.err.Error() }
func (e *errDial) Unwrap() error { return e.err }

// dial connects to addr, over TLS when the deployment wants it, and gives
// the connection its deadlines; it runs dialHere on a goroutine of its own.
func (d *dialer) dial(addr string) (*deadlineConn, error) {
	done := make(chan dialed, 1)
	go func() {
		c, err := d.dialHere(addr)
		done <- dialed{c, err}
	}()
	r := <-done
	return r.c, r.err
}

// dialed is what dialHere made, handed back from its goroutine.
type dialed struct {
	c   *deadlineConn
	err error
}

// dialHere is dial on the calling goroutine. dial runs it on a goroutine of
// its own because its stack is deep: Go's TCP dial takes about 3.5 KiB of
// stack, a TLS handshake more, below the 4 KiB a call's way takes from
// fasthttp's worker to the wire. On the worker, a call that dials grew the
// worker's stack from 8 to 16 KiB, which the worker keeps while it waits,
// idle, for its next connection (up to fasthttp's MaxIdleWorkerDuration,
// 10 s): a burst of new streams, each with a connection of its own, left as
// many workers holding 16 KiB each (TestDialLeavesTheCallersStack). The short
// goroutine's stack is freed when it ends. A dial costs a connect's round
// trip and a handshake; the goroutine and its handoff, about a microsecond.
func (d *dialer) dialHere(addr string) (*deadlineConn, error) {
	c, err := d.connectTCP(addr)
	if err != nil {
		return nil, &errDial{err: err}
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	dc := &deadlineConn{firstByte: d.firstByte, idle: d.idle, write: d.write, obs: d.obs}
	if rc := rawio.Wrap(c); rc != nil {
		c, dc.raw = rc, rc.Raw()
	}
	if d.tls != nil {
		if c, err = d.handshake(c); err != nil {
			return nil, &errDial{err: err}
		}
	}
	dc.Conn = c
	dc.local = connAddr{Addr: c.LocalAddr(), conn: dc}
	return dc, nil
}

// connectTCP connects to addr within the connect timeout, or with connectTo.
func (d *dialer) connectTCP(addr string) (net.Conn, error) {
	if d.connectTo != nil {
		return d.connectTo(addr)
	}
	return net.DialTimeout("tcp", addr, d.connect)
}

// handshake starts TLS on c within the connect timeout.
func (d *dialer) handshake(c net.Conn) (net.Conn, error) {
	tc := tls.Client(c, d.tls)
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if d.connect > 0 {
		ctx, cancel = context.WithTimeout(ctx, d.connect)
	}
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

// IsDialError reports whether err is a failure to reach the deployment at
// all (no connection, or none free in time): nothing was sent, so the call
// may go to another deployment.
func IsDialError(err error) bool {
	var de *errDial
	return errors.As(err, &de) || errors.Is(err, fasthttp.ErrNoFreeConns)
}

type deadlineConn struct {
	net.Conn
	// raw is the TCP connection under Conn (under TLS too), for flushAwait
	// and closedWhileIdle; nil when there is none. That connection is a rawio.Conn.
	raw                    syscall.RawConn
	firstByte, idle, write time.Duration
	awaiting               bool
	// pinned keeps the read deadline in force instead of moving it on each
	// read: from a request's write until its answer's head is read whole, so
	// that the head must come whole within firstByte however its bytes
	// trickle; and for a body that must come whole within idle, once its
	// first read waits (whole; see headRead, pinIdle).
	pinned, whole bool
	reused        bool // the request being served went over a reused connection
	// stale records that the request being served failed on a reused
	// connection before any byte of its answer: the upstream had closed it
	// while idle. See Stale.
	stale bool
	// answers counts the answers whose first byte was read: a request
	// written when it is not zero goes over a reused connection.
	answers int
	local   connAddr
	// deadline is the read deadline in force; it is moved only when the
	// wanted one is later by more than a sixteenth of the timeout, so a busy
	// stream does not re-arm a timer on every read. writeDeadline is the
	// write deadline in force, moved alike.
	deadline, writeDeadline time.Time
	// lastRead is when the last read began, or, for an answer's head, when
	// its read ended; see flushAwait.
	lastRead time.Time
	// sendAt is the clock's reading as the transport began to write the
	// request (see beginSend): the write's first piece and the wait for the
	// answer arm their deadlines from it rather than reading the clock
	// again. Zero once the first piece is armed. awaitArmed says that
	// flushAwait armed the answer's deadline from it, which the reads of
	// the answer's head then keep without a reading of their own.
	sendAt     time.Time
	awaitArmed bool
	// obs is the dialer's; peekStep, peekBuf and peekDead are
	// closedWhileIdle's, kept here so that a look allocates nothing.
	obs      Observer
	peekStep func(uintptr)
	peekBuf  [1]byte
	peekDead bool
	// step, pending, pendingTo and flushErr are flushAwait's, kept here so
	// that a call allocates nothing.
	step      func(uintptr) bool
	pending   *bufio.Writer
	pendingTo writerPool
	flushErr  error
	// counted is set while the connection counts in OpenConns.
	counted atomic.Bool
	// canceled is set by a Cancel from another goroutine: every read fails
	// with ErrCanceled from then on (see cancel.go).
	canceled atomic.Bool
}

// writePiece bounds what one write to the connection may carry: the upstream
// must take each piece within the write timeout. A Write of a larger p (a
// body written past the buffer) goes in pieces, so that a large body is
// bounded by the upstream's progress, not by its size.
const writePiece = 256 << 10

// Write writes p within the write timeout a piece: an upstream that stops
// taking the request (it accepted the connection and does not read, or its
// window stays shut) fails the call with a timeout, and the connection is
// closed, rather than holding it and the call for ever.
func (c *deadlineConn) Write(p []byte) (int, error) {
	if !c.awaiting {
		c.reused, c.stale = c.answers > 0, false
	}
	c.awaiting, c.pinned, c.whole = true, true, false
	var n int
	for {
		piece := p[n:]
		if len(piece) > writePiece {
			piece = piece[:writePiece]
		}
		if err := c.armWrite(); err != nil {
			return n, err
		}
		c.sendAt = time.Time{} // a later piece reads the clock
		m, err := c.Conn.Write(piece)
		n += m
		if err != nil {
			if c.reused && !isTimeout(err) {
				c.stale = true
			}
			return n, err
		}
		if n == len(p) {
			return n, nil
		}
	}
}

// armWrite sets the write deadline for the next piece: write from now (the
// request's sendAt for its first piece), moved as the read deadline is (see
// DeadlineMoves), so that a busy connection re-arms its timer about once a
// sixteenth of the timeout, not per request.
func (c *deadlineConn) armWrite() error {
	if c.write <= 0 {
		return nil
	}
	at := c.sendAt
	if at.IsZero() {
		at = now()
	}
	want := at.Add(c.write)
	if !DeadlineMoves(c.writeDeadline, want, c.write) {
		return nil
	}
	c.writeDeadline = want
	return c.Conn.SetWriteDeadline(want)
}

// DeadlineMoves reports whether a connection's deadline in force, current,
// must be moved to want, for a timeout of d: when want is earlier, or later by
// more than a sixteenth of d. A busy connection thus does not re-arm its
// timer on every read or write, and a deadline falls at most d/16 early.
func DeadlineMoves(current, want time.Time, d time.Duration) bool {
	return want.Before(current) || want.Sub(current) > d>>4
}

// beginSend is told by the transport that a request's write begins at at,
// the clock's reading it shares with the write's deadlines (see sendAt).
func (c *deadlineConn) beginSend(at time.Time) {
	c.sendAt, c.awaitArmed = at, false
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	if !c.awaitArmed {
		if err := c.armRead(); err != nil {
			return 0, err
		}
	}
	// After armRead: a Cancel sets canceled before it moves the deadline to
	// the past, so either this sees it, or its deadline replaces armRead's.
	if c.canceled.Load() {
		return 0, ErrCanceled
	}
	n, err := c.Conn.Read(p)
	if err != nil && c.canceled.Load() {
		return n, ErrCanceled
	}
	if n > 0 {
		if c.awaiting {
			c.answers++
		}
		c.awaiting, c.awaitArmed = false, false
	} else if err != nil && c.awaiting && c.reused && !isTimeout(err) {
		c.stale = true
	}
	return n, err
}

// readyAwaiter is a connection that can wait until a read would return at
// once without reading: a rawio.Conn (see its AwaitReadable).
type readyAwaiter interface{ AwaitReadable() error }

// awaitRead waits as Read would, under the same deadline and Cancel, until
// a Read returns at once, reading nothing, on rc, the connection under c.
// The Read that follows keeps the deadline the wait armed (see awaitArmed):
// it returns at once, and the idle time counts from the wait's start as it
// would from its own.
func (c *deadlineConn) awaitRead(rc readyAwaiter) error {
	if !c.awaitArmed {
		if err := c.armRead(); err != nil {
			return err
		}
	}
	if c.canceled.Load() { // as in Read
		return ErrCanceled
	}
	err := rc.AwaitReadable()
	if err != nil && c.canceled.Load() {
		return ErrCanceled
	}
	c.awaitArmed = true
	return err
}

// headRead says that the answer's head was read whole at at: the reads that
// follow wait up to idle each, or, when whole is set, all of them together
// (see pinIdle).
func (c *deadlineConn) headRead(whole bool, at time.Time) {
	c.pinned, c.whole, c.awaitArmed = false, whole, false
	c.lastRead = at
}

// pinIdle has the rest of the answer come within idle of the first read that
// goes to the network for it: a body that was not asked for as a stream comes
// at once after its head, and one whose bytes trickle, each within idle, must
// not hold the call for its whole length at the upstream's pace. A body
// already read with its head arms no deadline at all.
func (c *deadlineConn) pinIdle() { c.whole = true }

// armRead sets the read deadline for the next read: firstByte while an answer
// is awaited, and for the rest of its head the same deadline; idle after it,
// from each read or, for a whole body, from its first.
//
// A read of the head of an answer whose deadline flushAwait armed (see
// awaitArmed) does not come here: the deadline stands, from the request's
// write, and so does lastRead.
func (c *deadlineConn) armRead() error { return c.armReadAt(now()) }

// armReadAt is armRead at now.
func (c *deadlineConn) armReadAt(now time.Time) error {
	d := c.idle
	switch {
	case c.awaiting:
		d = c.firstByte
	case c.pinned:
		c.lastRead = now
		return nil
	case c.whole:
		c.pinned = true // once armed below
	}
	c.lastRead = now
	if d <= 0 {
		return nil
	}
	want := c.lastRead.Add(d)
	if !DeadlineMoves(c.deadline, want, d) {
		return nil
	}
	c.deadline = want
	return c.Conn.SetReadDeadline(want)
}

// awaitAfter bounds how long a connection may have been idle for flushAwait to
// wait on it: an upstream closes an idle connection after seconds, not sooner.
const awaitAfter = time.Second

// flushAwait calls flush, which writes the whole request, and returns once
// the answer can be read (or the connection failed, or the first-byte
// deadline passed: the read that follows reports it). Without it the read
// right after a write finds nothing yet, fails with EAGAIN and only then
// waits: one system call per call for nothing.
//
// The wait is armed before the write (syscall.RawConn.Read resets the
// connection's readiness, then calls f), so anything that arrives after the
// write wakes it. What arrived before is the risk: its readiness was spent.
// No answer comes before its request; an upstream that closed the idle
// connection sent its FIN before, but answers the request with a reset,
// which wakes the wait. So flushAwait waits only when every byte of the
// request goes in this flush (nothing went before that could be answered
// early) and on a connection that is new or was read from within
// awaitAfter; otherwise it flushes and the read finds what is there.
//
// bw goes back to pool once flushed, before the wait: a
// request's write buffer (8 KiB) is not held while its answer is awaited,
// which for a stream is until its head comes, and a burst of streams opening
// at once would hold as many buffers as streams are waiting (256 in the
// harness's llm-streams: 2 MB, whose pages stay in the process).
func (c *deadlineConn) flushAwait(bw *bufio.Writer, pool writerPool) error {
	if c.raw == nil || c.awaiting {
		return flushRelease(bw, pool)
	}
	at := c.sendAt // the transport's reading, for the check and the deadline
	if at.IsZero() {
		at = now()
	}
	if c.answers > 0 && at.Sub(c.lastRead) > awaitAfter {
		return flushRelease(bw, pool)
	}
	c.awaiting = true // the answer's deadline, armed before the wait
	err := c.armReadAt(at)
	c.awaiting = false // Write decides whether the connection is reused
	if err != nil {
		pool.ReleaseWriter(bw)
		return err
	}
	c.awaitArmed = true // the head's reads keep this deadline
	if c.step == nil {
		c.step = c.flushStep // one method value per connection, not per call
	}
	c.pending, c.pendingTo, c.flushErr = bw, pool, nil
	_ = c.raw.Read(c.step)
	if c.pending != nil { // the wait failed before the step ran
		c.pendingTo.ReleaseWriter(c.pending)
	}
	err, c.pending, c.pendingTo, c.flushErr = c.flushErr, nil, nil, nil
	return err
}

// flushStep is flushAwait's function for syscall.RawConn.Read: at the first
// call it flushes, gives the writer back, and asks for the wait (false)
// unless the flush failed; at the next, after the wait, it is done.
func (c *deadlineConn) flushStep(uintptr) bool {
	if c.pending == nil {
		return true
	}
	bw := c.pending
	c.pending = nil
	c.flushErr = flushRelease(bw, c.pendingTo)
	return c.flushErr != nil
}

// writerPool is where a request's write buffer goes back: the deployment's
// fasthttp.HostClient.
type writerPool interface{ ReleaseWriter(*bufio.Writer) }

// flushRelease flushes bw and gives it back to pool.
func flushRelease(bw *bufio.Writer, pool writerPool) error {
	err := bw.Flush()
	pool.ReleaseWriter(bw)
	return err
}

// probeAfter is how long a pooled connection must have been idle for
// closedWhileIdle to look at it: as awaitAfter, an upstream closes an idle
// connection after seconds, so a busy kept-alive connection is never looked
// at. A variable for tests.
var probeAfter = awaitAfter

// closedWhileIdle reports whether the pooled connection, idle for longer
// than probeAfter, can no longer carry a request: the upstream closed it
// (a FIN or a reset is pending) or sent bytes that no request asked for
// (under TLS, a close_notify alert is such bytes). It looks with one
// non-blocking recv(2) of MSG_PEEK on the TCP socket, which takes nothing
// from it: no byte of a request has been written yet, so a connection found
// closed is not a call sent again, and is safe to replace for any endpoint.
// A connection read from within probeAfter, or without a TCP socket under
// it, is not looked at. A connection it reports is the caller's to close.
//
// at is the time now, as the transport read it for the call.
func (c *deadlineConn) closedWhileIdle(at time.Time) bool {
	if c.raw == nil || at.Sub(c.lastRead) <= probeAfter {
		return false
	}
	if c.peekStep == nil {
		c.peekStep = c.peek // one method value per connection, not per look
	}
	if err := c.raw.Control(c.peekStep); err != nil {
		return true // the socket is closed
	}
	return c.peekDead
}

// peek is closedWhileIdle's function for syscall.RawConn.Control: only an
// empty socket whose peer has not closed (EAGAIN) is fit for a request.
// Control neither takes the read lock nor waits, so a read deadline that
// passed while the connection was idle does not stop it.
func (c *deadlineConn) peek(fd uintptr) {
	for {
		_, _, err := syscall.Recvfrom(int(fd), c.peekBuf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		if err == syscall.EINTR {
			continue
		}
		// nil: EOF or pending bytes; any other error: a reset or worse.
		c.peekDead = err != syscall.EAGAIN
		return
	}
}

// LocalAddr returns the connection's local address, which also tells
// Stale about the connection (fasthttp hands it to the Response).
func (c *deadlineConn) LocalAddr() net.Addr { return &c.local }

// connAddr is a connection's local address, with the connection it names.
type connAddr struct {
	net.Addr
	conn *deadlineConn
}

// Stale reports whether the call that filled resp and failed did so on a
// reused connection that the upstream had closed, most likely while it was
// idle: the write failed or the connection ended before any byte of the
// answer (a timeout is not that). The request may still have reached the
// upstream (a write that succeeded only reached the kernel), so only a call
// that may be done twice goes again, once, on a connection dialled for it
// (see package upstream's Relay.Redial): as nginx and Go's http.Transport,
// which send a non-idempotent request again only when none of it was
// written. fasthttp closes a connection that failed, so its state is read
// once nothing else uses it.
func Stale(resp *fasthttp.Response) bool {
	a, ok := resp.LocalAddr().(*connAddr)
	return ok && a.conn.stale
}

// SetReadDeadline is owned by Read; see dialer.
func (c *deadlineConn) SetReadDeadline(time.Time) error { return nil }

// SetWriteDeadline is owned by Write; see dialer.
func (c *deadlineConn) SetWriteDeadline(time.Time) error { return nil }

// SetDeadline is owned by Read and Write; see dialer.
func (c *deadlineConn) SetDeadline(time.Time) error { return nil }
