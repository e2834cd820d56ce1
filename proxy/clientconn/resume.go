package clientconn

import (
	"bytes"
	"errors"
	"net"
	"slices"
	"sync"
)

// A connection whose stream is written outside the server (proxy's
// hijack.go) outlives the server's hijack handler (Detach, Attach), and is
// served again by the server as a new Conn (HandOver): the bytes of the next
// request that the hijacked connection's reader held (TakeBuffered) or that
// were awaited (ReadNext) are read first.

// Detach lets a stream written outside the server keep the connection past
// the hijack handler, which then returns at once: fasthttp frees the
// connection's reader and RequestCtx only when its hijack handler returns,
// and then closes the connection it was given (Server.KeepHijackedConns
// false). That Close, the next one, does nothing. The stream's goroutine
// calls Attach before it closes the connection or hands it over, which
// waits for that Close; after Attach, Close closes. Between the two, only
// the stream's goroutine uses the connection.
func (c *Conn) Detach() {
	c.released.Lock()
	c.detached.Store(true)
}

// Attach waits for the Close that Detach made a no-op, which the server
// makes once the hijack handler returned.
func (c *Conn) Attach() {
	c.released.Lock()
	c.released.Unlock()
}

// SpliceHead puts the answer's lines in the place of the mark in head, the
// bytes of a head fasthttp built, and forgets them (see splice.go).
func (c *Conn) SpliceHead(head []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.splice.state != spliceTaken {
		return head
	}
	if i := bytes.Index(head, spliceLine); i >= 0 {
		head = c.putLines(head, i)
	}
	c.dropSplice()
	return head
}

// HandOver returns a new Conn for c's socket, to be served again with
// the bytes of the next request c read, after it sent what it held back;
// nil when that failed. c is left a shell whose Close does not close the
// socket.
func (c *Conn) HandOver() *Conn {
	if c.sendHeld() != nil {
		return nil
	}
	n := &Conn{Conn: c.Conn, idle: c.idle, raw: c.raw}
	n.resume = resumeState{on: true, pending: c.resume.pending, buf: c.resume.buf}
	n.counted.Store(c.counted.Swap(false))
	c.Conn, c.resume.pending, c.resume.buf = handedOver{c.Conn}, nil, nil
	return n
}

// handedOver is a socket that another Conn serves now: closing the
// one it was handed over from leaves it open.
type handedOver struct{ net.Conn }

func (handedOver) Close() error { return nil }

// resumeState is a client connection's state once a stream written outside
// the server ended and the server serves it again.
type resumeState struct {
	on      bool   // the connection was served again after a stream
	noWait  bool   // a read returns errNoWait instead of reading the socket
	pending []byte // bytes of the next request the server's reader held
	// buf is the pooled buffer pending was taken from, held until pending
	// is read (see dropPending); probe is TakeBuffered's first read.
	buf   *[awaitedRead]byte
	probe [1]byte
}

// pendingPool holds the buffers of the bytes of a next request kept while
// none is read: a stream's connection holds none while the stream lasts.
var pendingPool = sync.Pool{New: func() any { return new([awaitedRead]byte) }}

// pendingBuf returns an empty buffer for resume.pending.
func (c *Conn) pendingBuf() []byte {
	if c.resume.buf == nil {
		c.resume.buf = pendingPool.Get().(*[awaitedRead]byte)
	}
	return c.resume.buf[:0]
}

// dropPending lets go of resume.pending, all of it read.
func (c *Conn) dropPending() {
	if c.resume.buf != nil {
		pendingPool.Put(c.resume.buf)
		c.resume.buf = nil
	}
	c.resume.pending = nil
}

// errNoWait ends a read that TakeBuffered makes: the socket is not read.
var errNoWait = errors.New("the connection is not read")

// TakeBuffered keeps, for the next reads of the connection, the bytes that
// the hijacked connection's reader r (fasthttp's, with the request's head and
// body read from it) holds past the stream's request: a request the client
// pipelined behind it. It reports false when r failed (then the connection
// closes). r holding nothing, the usual case, costs no buffer.
func (c *Conn) TakeBuffered(r net.Conn) bool {
	c.resume.on, c.resume.noWait = true, true
	defer func() { c.resume.noWait = false }()
	switch n, err := r.Read(c.resume.probe[:]); {
	case err == errNoWait || n == 0 && err == nil:
		return true
	case err != nil:
		return false
	}
	b := append(c.pendingBuf(), c.resume.probe[0])
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, awaitedRead)
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		switch {
		case err == errNoWait:
			c.resume.pending = b
			return true
		case err != nil:
			return false
		}
	}
}

// awaitedRead is how much of the next request awaitRequest reads.
const awaitedRead = 1 << 10

// ReadNext reads the first bytes of the client's next request into
// resume.pending, after what is held back (the stream's end), and reports
// whether any came. They are read again by the server, as new.
func (c *Conn) ReadNext() bool {
	p := c.pendingBuf()[:awaitedRead]
	n, _ := c.Read(p)
	c.begun, c.headBytes = false, nil // the server's read of them begins the request
	if c.resume.pending = p[:n]; n == 0 {
		c.dropPending()
	}
	return n > 0
}

// readResumed is Read on a connection served again after a stream: the
// bytes TakeBuffered kept come first, after what is held back. ok is false
// when the read is Read's to make.
func (c *Conn) readResumed(p []byte) (n int, ok bool, err error) {
	if c.resume.noWait {
		return 0, true, errNoWait
	}
	if len(c.resume.pending) == 0 {
		return 0, false, nil
	}
	if err := c.sendHeld(); err != nil {
		return 0, true, err
	}
	n = copy(p, c.resume.pending)
	if c.resume.pending = c.resume.pending[:copy(c.resume.pending, c.resume.pending[n:])]; len(c.resume.pending) == 0 {
		c.dropPending()
	}
	n, err = c.took(p, n, nil)
	return n, true, err
}

// NextBuffered reports whether bytes of the next request are kept, to be
// read first (see TakeBuffered, ReadNext).
func (c *Conn) NextBuffered() bool { return len(c.resume.pending) > 0 }
