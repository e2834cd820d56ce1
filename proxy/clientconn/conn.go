package clientconn

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/rawio"
	"github.com/modelgate/gateway/proxy/upstream"
)

// NewListener wraps the client-facing listener ln so that a client that
// stops reading cannot pin an answer, and the upstream connection under it,
// for ever: a write to its connection that makes no progress for
// cfg.WriteIdle() fails, and fasthttp then drops the connection, which ends
// the relay and frees the upstream connection. A slow client that keeps
// reading keeps its stream: only a period without a byte taken counts. An
// answer the provider finished meanwhile, and that fits the bound of a held
// answer, lets its upstream connection go before that (see Conn.OnStall).
//
// A failed accept is retried, never returned (see acceptor), and a client
// connection that would take the descriptors kept for upstream dials is
// closed at once and counted in cfg.Refused (see descriptors). The
// connections it accepts are *Conn.
func NewListener(ln net.Listener, cfg ListenerConfig) net.Listener {
	l := &listener{cfg: cfg}
	l.init(ln, "client", cfg.Errs, cfg.Log)
	LogDescriptors(cfg.Log)
	return l
}

// ListenerConfig is what a client listener needs from the gateway.
type ListenerConfig struct {
	Errs    *metrics.Counter // failed accepts
	Refused *metrics.Counter // connections closed to keep descriptors
	Log     *slog.Logger
	// Busy returns the upstream connections that serve calls (see
	// descriptors.admitClient); WriteIdle the timeout of a write without progress in
	// force, asked at each accept.
	Busy      func() int64
	WriteIdle func() time.Duration
}

type listener struct {
	acceptor
	cfg ListenerConfig
}

func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.accept()
		if err != nil {
			return nil, err
		}
		if !procFDs.admitClient(time.Now(), l.cfg.Busy) {
			l.cfg.Refused.Inc()
			c.Close()
			continue
		}
		cc := newConn(c, l.cfg.WriteIdle())
		cc.counted.Store(true)
		return cc, nil
	}
}

// newConn wraps c, whose writes give up after idle without progress;
// its reads and writes are rawio's when it is TCP.
func newConn(c net.Conn, idle time.Duration) *Conn {
	cc := &Conn{Conn: c, idle: idle}
	if cc.tcp.Init(c) {
		cc.Conn, cc.raw = &cc.tcp, &cc.tcp
	}
	return cc
}

// Conn is a client connection whose writes give up after idle without
// progress, and which can hold back the end of a stream so that it leaves in
// one write (see HoldTail). Not safe for concurrent writes (fasthttp writes
// from one goroutine per connection); Close may come from another goroutine
// (fasthttp's shutdown closes idle connections).
type Conn struct {
	net.Conn // a rawio.Conn when the listener's is TCP
	idle     time.Duration
	// raw is Conn when it is a rawio.Conn (tcp, kept in Conn so that a
	// write loads one object fewer), and sendStep sendNow as a method value,
	// made at the first awaitNext.
	raw      *rawio.Conn
	tcp      rawio.Conn
	sendStep func(write func([]byte) (int, error)) bool
	// slow is set once a request did not come within AwaitLimit of the answer
	// before it, and cleared by one that did; early once the client sent a
	// request before it had the answer before it (HTTP/1.1 pipelining). The
	// next request is awaited (see awaitNext) while neither is set.
	slow, early bool
	// holding is set by HoldTail; mu guards held and the writes made while
	// holding, against a Close from another goroutine.
	holding atomic.Bool
	mu      sync.Mutex
	held    *[]byte // pooled; nil when nothing is held
	// splice is an answer's header lines in waiting (see splice.go); under
	// mu.
	splice headSplice
	// deadline is the write deadline in force; it is moved only when the
	// wanted one is later by more than a sixteenth of idle, so a busy stream
	// does not re-arm a timer on every write.
	deadline time.Time
	// readDeadline is the read deadline fasthttp asked for (see
	// SetReadDeadline). It is in force but while a wait's bound is: bound is
	// then the connection's read deadline, earlier than readDeadline, kept
	// from one wait to the next (see awaitNext) until a read that is not a
	// wait, or a sooner deadline, puts readDeadline back (see unbind).
	readDeadline time.Time
	bound        time.Time
	// head holds the first bytes of the read that began the request being
	// read (the first read since the last write), so that proxy's requestError can
	// answer a request fasthttp could not parse in its family's shape.
	head  [32]byte // "OPTIONS /v1/router/alpha" fits
	headN uint8
	begun bool // a read was made since the last write
	// headBytes are the bytes given to the server since the read that began
	// the request, while they may still be its head: the server's reader
	// fills its buffer on from their end until it has read the head. scan has
	// read the first scanned of them (see Read). draining is set once the
	// connection only drains before its close, and reads no more heads.
	headBytes []byte
	scanned   int
	scan      headScan
	draining  bool
	// rawLeft is how many more bytes the request being served may read, its
	// chunked body's framing included, once bounded (see BoundChunked).
	rawLeft    int64
	rawBounded bool
	// counted is set while the connection counts among the client
	// connections (procFDs.clients).
	counted atomic.Bool
	// writeFailed is set once a write to the client failed otherwise than by
	// its idle deadline (the client is gone; one that stopped reading is
	// not).
	writeFailed atomic.Bool
	// resume is the connection's state once served again after a stream
	// written outside the server (proxy's hijack.go).
	resume resumeState
	// detached is set from Detach until the server's Close of the hijacked
	// connection, which it makes a no-op; released is locked meanwhile (see
	// Detach, Attach).
	detached atomic.Bool
	released sync.Mutex
}

// heldCap bounds the bytes a connection holds back: an SSE relay's largest
// write (one pooled relay buffer of events) and its chunk framing.
const heldCap = 32<<10 + 64

var heldPool = sync.Pool{New: func() any { b := make([]byte, 0, heldCap); return &b }}

// AcquireWriteBuffer returns an empty buffer that holds a relay's largest
// write and its chunk framing in one write to a Conn. ReleaseWriteBuffer
// gives it back once the write returned.
func AcquireWriteBuffer() *[]byte { return heldPool.Get().(*[]byte) }

// ReleaseWriteBuffer gives back a buffer of AcquireWriteBuffer; b is not
// used after.
func ReleaseWriteBuffer(b *[]byte) {
	*b = (*b)[:0]
	heldPool.Put(b)
}

// HoldTail holds back the writes that follow, until the next read, write
// deadline change or close, which sends them in one write. An SSE relay calls
// it before the last events of a stream: fasthttp writes them, then the
// chunked body's end in two more flushes, then reads the next request. The
// gateway calls it after the handler of a whole answer (proxy's holdAnswer), which
// fasthttp then writes. Bytes that would not fit in heldCap are sent at once,
// after what was held.
func (c *Conn) HoldTail() { c.holding.Store(true) }

// OnStall has a write to the connection that finds no room in the socket's
// buffer call *f before it waits (see rawio.Conn.OnStall): a relay then takes
// a finished answer off its upstream connection while the client does not
// read (upstream.Stalls). nil stops it; a connection that is not TCP never
// calls f.
func (c *Conn) OnStall(f *func()) {
	if c.raw != nil {
		c.raw.OnStall(f)
	}
}

// WriteFailed reports whether a write to the client failed otherwise than by
// its idle deadline: the client is gone.
func (c *Conn) WriteFailed() bool { return c.writeFailed.Load() }

func (c *Conn) Write(p []byte) (int, error) {
	if c.holding.Load() {
		held, err := c.hold(p)
		if err != nil {
			return 0, err
		}
		if held {
			return len(p), nil
		}
	}
	return c.write(p)
}

// hold keeps p with the bytes held back, and reports whether it did. When p
// would not fit, what is held is sent and holding ends: p is the caller's to
// write. Nothing is held once a Close from another goroutine sent it.
func (c *Conn) hold(p []byte) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.holding.Load() {
		return false, nil
	}
	if c.splice.state == spliceArmed {
		return true, c.holdSpliced(p)
	}
	if c.held == nil {
		c.held = heldPool.Get().(*[]byte)
	}
	if len(*c.held)+len(p) <= heldCap {
		*c.held = append(*c.held, p...)
		return true, nil
	}
	return false, c.sendHeldLocked()
}

// sendHeld sends what HoldTail held back, and stops holding.
func (c *Conn) sendHeld() error {
	if !c.holding.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sendHeldLocked()
}

// sendHeldLocked sends the held bytes; holding ends only once they are
// written, so that a write racing a Close waits for them in hold. While an
// answer's mark is looked for (see splice.go), it sends only the bytes
// searched, and holding goes on: the answer is still being written, as an
// answer is when the server reads a request that the client pipelined.
func (c *Conn) sendHeldLocked() error {
	if c.splice.state == spliceArmed {
		return c.sendSearched()
	}
	defer c.holding.Store(false)
	if c.held == nil {
		return nil
	}
	b := *c.held
	_, err := c.write(b)
	*c.held = b[:0]
	heldPool.Put(c.held)
	c.held = nil
	return err
}

// continueLine is fasthttp's interim answer to Expect: 100-continue. The
// request's body follows it, not a new request.
var continueLine = []byte("HTTP/1.1 100 Continue\r\n\r\n")

// write writes p, re-arming the idle deadline while the client takes bytes.
func (c *Conn) write(p []byte) (int, error) {
	if !bytes.HasSuffix(p, continueLine) {
		c.begun, c.headBytes, c.rawBounded = false, nil, false
	}
	written := 0
	for {
		if err := c.arm(); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(p[written:])
		written += n
		if err == nil {
			return written, nil
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			c.writeFailed.Store(true) // a reset, a broken pipe: the client is gone
			return written, err
		}
		if n == 0 {
			return written, err
		}
		// The client took bytes within the period: slow, not gone.
	}
}

func (c *Conn) arm() error {
	want := time.Now().Add(c.idle)
	if !upstream.DeadlineMoves(c.deadline, want, c.idle) {
		return nil
	}
	c.deadline = want
	return c.Conn.SetWriteDeadline(want)
}

// SetWriteDeadline and SetDeadline are fasthttp's; the next write re-arms
// the idle deadline.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if err := c.sendHeld(); err != nil {
		return err
	}
	c.deadline = time.Time{}
	return c.Conn.SetWriteDeadline(t)
}

func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.sendHeld(); err != nil {
		return err
	}
	c.deadline, c.readDeadline, c.bound = time.Time{}, t, time.Time{}
	return c.Conn.SetDeadline(t)
}

// Read sends what is held back first: the server reads the next request
// only once the answer before it is complete.
//
// A read that fills the server's buffer on from the end of the bytes of the
// request so far is one for more of its head: the server's reader moves or
// leaves its buffer once it has read a head. Only then are those bytes
// scanned, and if they hold the head's end already, and it is not CRLF CRLF
// (see headScan), the read fails with ErrHeadEnd instead of waiting.
func (c *Conn) Read(p []byte) (int, error) {
	if c.resume.on {
		if n, ok, err := c.readResumed(p); ok {
			return n, err
		}
	}
	if c.raw != nil && !c.slow && !c.early && !c.draining && c.holding.Load() {
		if n, ok, err := c.awaitNext(p); ok {
			return c.took(p, n, err)
		}
	}
	var sent time.Time
	if c.slow && c.holding.Load() {
		sent = time.Now() // the held answer leaves now: how long until the next request?
	}
	if err := c.sendHeld(); err != nil {
		return 0, err
	}
	if err := c.unbind(); err != nil {
		return 0, err
	}
	if c.headBytes != nil {
		if !c.moreHead(p) {
			c.headBytes = nil // the head was read; this is its body
		} else if c.scanHead(); c.scan.bad() {
			return 0, ErrHeadEnd
		}
	}
	if c.rawBounded && c.rawLeft < 0 {
		return 0, errChunkedTooLarge
	}
	n, err := c.Conn.Read(p)
	if n > 0 && !sent.IsZero() && time.Since(sent) < AwaitLimit {
		c.slow = false
	}
	return c.took(p, n, err)
}

// took notes the n bytes a read put in p: the first bytes of a request, or
// more of its head.
func (c *Conn) took(p []byte, n int, err error) (int, error) {
	if n > 0 {
		c.rawLeft -= int64(n)
		switch {
		case !c.begun:
			c.headN, c.begun = uint8(copy(c.head[:], p[:n])), true
			if !c.draining {
				c.headBytes, c.scanned = p[:n], 0
				c.scan.start()
			}
		case c.headBytes != nil:
			c.headBytes = c.headBytes[:len(c.headBytes)+n]
		}
	}
	return n, err
}

// AwaitLimit bounds awaitNext's wait for a request that may already be
// there: the first pipelined request on a connection waits this long at
// most, once. A bound is kept for the waits that follow while at least
// awaitReuse of it is left, so the first pipelined request waits at least
// that long. AwaitLimit is exported for proxy's tests of calls through the
// gateway, which wait past it.
const (
	AwaitLimit = 20 * time.Millisecond
	awaitReuse = 5 * time.Millisecond
)

// awaitNext sends what is held back (the answer, or a stream's end) and
// waits for the client's next request into p without first reading for it,
// which would find nothing: the client sends it once it has the answer (see
// rawio.ReadAfter). ok is false when it read nothing and the caller reads
// the usual way, sending first what is still held; so it is when nothing is
// held: only an answer just written makes a read for nothing certain.
//
// A client that sent its next request before it had the answer (HTTP/1.1
// pipelining) is the risk: those bytes' readiness may have been spent before
// the wait, which then sees them only at its deadline. So the wait is
// bounded by a read deadline AwaitLimit away (or the connection's own, when
// sooner), which the waits that follow keep while awaitReuse of it is left:
// each wait lasts from awaitReuse to AwaitLimit at most. If no request came
// by then, a read without a wait looks. Bytes there were sent early: the
// connection's requests are read the usual way from then on. Nothing there:
// the client is slow, and its requests are read the usual way until one
// comes within AwaitLimit of its answer.
func (c *Conn) awaitNext(p []byte) (n int, ok bool, err error) {
	now := monoNow()
	limit := now.Add(AwaitLimit)
	bounded := c.readDeadline.IsZero() || limit.Before(c.readDeadline)
	switch {
	case !bounded:
		if c.unbind() != nil {
			return 0, false, nil
		}
	case c.bound.IsZero() || c.bound.Sub(now) < awaitReuse:
		// Set the bound anew only when the one in force is nearly spent:
		// a busy connection's waits share one, instead of moving the
		// deadline's timer twice a request.
		if c.raw.SetReadDeadline(limit) != nil {
			return 0, false, nil
		}
		c.bound = limit
	}
	if c.sendStep == nil {
		c.sendStep = c.sendNow
	}
	n, sent, err := c.raw.ReadAfter(c.sendStep, p)
	switch {
	case !sent:
		return 0, false, nil
	case bounded && n == 0 && errors.Is(err, os.ErrDeadlineExceeded):
		if err := c.unbind(); err != nil {
			return 0, true, err
		}
		n, there, err := c.raw.TryRead(p)
		if there {
			c.early = true
			return n, true, err
		}
		c.slow = true
		return 0, false, nil
	}
	return n, true, err
}

// epoch is the origin of monoNow's readings.
var epoch = time.Now()

// monoNow returns the time from one reading of the monotonic clock alone:
// time.Now reads the wall clock too, a second reading of the vDSO's clock
// that a wait's bound does not need (deadlines are compared and set on
// their monotonic readings).
func monoNow() time.Time { return epoch.Add(time.Since(epoch)) }

// unbind puts back the read deadline fasthttp asked for when a wait's bound
// is in force.
func (c *Conn) unbind() error {
	if c.bound.IsZero() {
		return nil
	}
	c.bound = time.Time{}
	return c.Conn.SetReadDeadline(c.readDeadline)
}

// sendNow writes what is held back with write, which does not wait for room
// in the socket's buffer, and reports whether all of it went; what did not
// stays held, for sendHeld. It reports false when nothing is held. Under mu,
// as sendHeld: a Close from another goroutine sends the held bytes itself,
// and only one of the two does.
func (c *Conn) sendNow(write func([]byte) (int, error)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.holding.Load() || c.held == nil {
		return false
	}
	if c.splice.state == spliceArmed {
		return false // the answer is still being written: sendHeld sends what it can
	}
	b := *c.held
	c.begun, c.headBytes, c.rawBounded = false, nil, false // as write does
	n, err := write(b)
	if err != nil {
		*c.held = b[:copy(b, b[n:])]
		return false
	}
	*c.held = b[:0]
	heldPool.Put(c.held)
	c.held = nil
	c.holding.Store(false)
	return true
}

// errChunkedTooLarge fails the reads of a chunked body whose framing went
// past its bound (see BoundChunked).
var errChunkedTooLarge = errors.New("the chunked body's framing is too large")

// Chunked framing: what a chunked body may take on the wire besides its
// bytes. ChunkSlack bytes, and ChunkCredit more for each byte of body read.
// A body sent in chunks of one byte takes 6 bytes a byte.
const (
	ChunkSlack  = 64 << 10
	ChunkCredit = 8
)

// BoundChunked bounds what the request being served reads from here on,
// until the answer, to n bytes and ChunkCredit more for each byte of body
// read (see CreditChunked). fasthttp bounds neither a chunk's size line nor
// its extensions, and neither counts as body: without a bound, a client could
// send one size line for as long as the read timeout lasts.
func (c *Conn) BoundChunked(n int64) {
	c.rawLeft, c.rawBounded = n, true
}

// CreditChunked counts n bytes of body read under BoundChunked.
func (c *Conn) CreditChunked(n int) { c.rawLeft += ChunkCredit * int64(n) }

// ChunkedTooLarge reports whether the request's reads went past their bound.
func (c *Conn) ChunkedTooLarge() bool { return c.rawBounded && c.rawLeft < 0 }

// moreHead reports whether p starts where the request's bytes so far end.
func (c *Conn) moreHead(p []byte) bool {
	h := c.headBytes
	return len(p) > 0 && cap(h) > len(h) && &h[:len(h)+1][len(h)] == &p[0]
}

// scanHead feeds the scan the head's bytes it has not read yet.
func (c *Conn) scanHead() {
	if c.scan.open() {
		c.scan.feed(c.headBytes[c.scanned:])
	}
	c.scanned = len(c.headBytes)
}

// drainOnly says that the connection now only drains what the client sends
// before it closes: it reads no more heads.
func (c *Conn) drainOnly() { c.draining, c.headBytes = true, nil }

// RequestHead returns the first bytes of the request being read, as far as
// the read that began it holds them.
func (c *Conn) RequestHead() []byte { return c.head[:c.headN] }

// WatchPeer has the client's leaving (its FIN or reset) call
// gone.Cancel at once while w is on, from now until w.Stop: a call that
// waits on its upstream, for the answer's head or between two events of a
// stream, otherwise notices only at its next write to the client, up to
// timeouts.first_byte or timeouts.idle later, while the provider goes on
// generating for nobody (nginx's proxy_ignore_client_abort off does the
// same). See rawio.Watch: the watch costs a call nothing but two short
// critical sections until it has lasted rawio.WatchAfter; only a longer
// call has its socket registered with the watcher's epoll. Nothing is
// watched without rawio (tests over pipes) or outside Linux.
//
// Only the end of the client's side counts: a request it pipelined behind
// this one is not its leaving. w.Stop must come before the connection is
// closed (the call's release, inside the server's handling of the
// connection).
func (c *Conn) WatchPeer(w *rawio.Watch, gone rawio.Canceler) {
	if c.raw != nil {
		c.raw.Watch(w, gone)
	}
}

// Close sends what is held back, then closes the connection; but the first
// Close after Detach does nothing (see Detach).
func (c *Conn) Close() error {
	if c.detached.Load() && c.detached.CompareAndSwap(true, false) {
		c.released.Unlock()
		return nil
	}
	c.endSplice()
	c.sendHeld()
	if c.counted.Swap(false) {
		procFDs.clients.Add(-1)
	}
	return c.Conn.Close()
}

// SetReadDeadline is fasthttp's: it sets one twice per request on a kept-alive
// connection (the idle timeout, then the read timeout). A deadline later than
// the one in force by at most a sixteenth of the time it leaves is not set, so
// a busy connection does not re-arm its timer on every request; a read
// deadline may thus fall up to a sixteenth of its timeout early. An earlier
// deadline, and clearing one, always take effect. What is held back stays
// held: the read that follows sends it.
//
// While a wait's bound is in force (see awaitNext), a deadline after it, or
// none, is only noted: the bound stays until a read that is not a wait.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if !c.bound.IsZero() {
		c.readDeadline = t
		if !t.IsZero() && t.Before(c.bound) {
			c.bound = time.Time{}
			return c.Conn.SetReadDeadline(t)
		}
		return nil
	}
	if !upstream.DeadlineMoves(c.readDeadline, t, time.Until(t)) {
		return nil
	}
	c.readDeadline = t
	return c.Conn.SetReadDeadline(t)
}

// CloseWrite shuts the write side of the connection, for a lingering close
// (see lingerClose).
func (c *Conn) CloseWrite() error {
	c.endSplice()
	c.sendHeld()
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// The end of a connection whose request body a call did not read to its end
// (proxy's call.settleBody and upload.finishBody).
const (
	// MaxQuietDrain is the longest rest of a request body that is read and
	// dropped before the answer, to keep the connection.
	MaxQuietDrain = 1 << 20
	// lingerTimeout and maxLingerDrain bound what lingerClose reads after the answer.
	lingerTimeout  = 5 * time.Second
	maxLingerDrain = 256 << 20
)

// CloseAfterAnswer ends the connection after the answer with lingerClose.
// The answer says the connection closes, so no client sends another request
// into the drain; fasthttp would close at once on such an answer, so the
// connection is hijacked and the answer written here.
func CloseAfterAnswer(ctx *fasthttp.RequestCtx) {
	ctx.Response.SetConnectionClose()
	answer := []byte(ctx.Response.String())
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		if _, err := c.Write(answer); err == nil {
			lingerClose(c)
		}
	})
}

// lingerClose ends a connection whose request body was not read to its end, on the
// principle of a lingering close: closing at once, with unread data, makes the kernel
// reset the connection, and a client still sending its body would lose the answer. So the
// write side is shut, telling the client the answer is complete, and what it still sends
// is read and dropped for a while before the connection closes.
func lingerClose(c net.Conn) {
	raw := c
	if u, ok := c.(interface{ UnsafeConn() net.Conn }); ok {
		raw = u.UnsafeConn()
		if cw, ok := raw.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
	}
	if cc, ok := raw.(*Conn); ok {
		cc.drainOnly()
	}
	if c.SetReadDeadline(time.Now().Add(lingerTimeout)) == nil {
		io.CopyN(io.Discard, c, maxLingerDrain)
	}
}
