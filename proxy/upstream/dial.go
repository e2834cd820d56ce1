package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// dialer makes upstream connections that own their read deadlines: after a
// request is written, the next read may wait up to firstByte; every later read
// up to idle. fasthttp's own read deadline covers a whole streamed body, which
// would cut long streams, so it is ignored.
//
// It also speaks TLS to deployments that want it (tls is not nil), below
// deadlineConn, so that Stale and the deadlines see the connection whatever
// its scheme.
type dialer struct {
	connect, firstByte, idle time.Duration
	tls                      *tls.Config
}

// errDial marks a failure to connect: nothing reached the upstream, so the call
// may be retried on another deployment.
type errDial struct{ err error }

func (e *errDial) Error() string { return "cannot connect to upstream: " + e.err.Error() }
func (e *errDial) Unwrap() error { return e.err }

func (d *dialer) Dial(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, d.connect)
	if err != nil {
		return nil, &errDial{err: err}
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if d.tls != nil {
		if c, err = d.handshake(c); err != nil {
			return nil, &errDial{err: err}
		}
	}
	dc := &deadlineConn{Conn: c, firstByte: d.firstByte, idle: d.idle}
	dc.local = connAddr{Addr: c.LocalAddr(), conn: dc}
	return dc, nil
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
	firstByte, idle time.Duration
	awaiting        bool
	// answers counts the answers whose first byte was read: a request
	// written when it is not zero goes over a reused connection.
	answers int
	reused  bool // the request being served went over a reused connection
	// stale records that the request being served failed on a reused
	// connection before any byte of its answer: the upstream had closed it
	// while idle. See Stale.
	stale bool
	local connAddr
	// deadline is the read deadline in force; it is moved only when the
	// wanted one is later by more than a sixteenth of the timeout, so a busy
	// stream does not re-arm a timer on every read.
	deadline time.Time
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	if !c.awaiting {
		c.reused, c.stale = c.answers > 0, false
	}
	c.awaiting = true
	n, err := c.Conn.Write(p)
	if err != nil && c.reused && !IsTimeout(err) {
		c.stale = true
	}
	return n, err
}

// DeadlineMoves reports whether a connection's deadline in force, current,
// must be moved to want, for a timeout of d: when want is earlier, or later by
// more than a sixteenth of d. A busy connection thus does not re-arm its
// timer on every read or write, and a deadline falls at most d/16 early.
func DeadlineMoves(current, want time.Time, d time.Duration) bool {
	return want.Before(current) || want.Sub(current) > d>>4
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	d := c.idle
	if c.awaiting {
		d = c.firstByte
	}
	if d > 0 {
		want := time.Now().Add(d)
		if DeadlineMoves(c.deadline, want, d) {
			if err := c.Conn.SetReadDeadline(want); err != nil {
				return 0, err
			}
			c.deadline = want
		}
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		if c.awaiting {
			c.answers++
		}
		c.awaiting = false
	} else if err != nil && c.awaiting && c.reused && !IsTimeout(err) {
		c.stale = true
	}
	return n, err
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
// reused connection that the upstream had closed while it was idle: the
// write failed or the connection ended before any byte of the answer (a
// timeout is not that). Such a call may go again on a fresh connection to
// the same deployment, as nginx and Go's http.Transport do: the upstream
// dropped the connection without reading the request. fasthttp closes a
// connection that failed, so its state is read once nothing else uses it.
func Stale(resp *fasthttp.Response) bool {
	a, ok := resp.LocalAddr().(*connAddr)
	return ok && a.conn.stale
}

// SetReadDeadline is owned by Read; see dialer.
func (c *deadlineConn) SetReadDeadline(time.Time) error { return nil }

// SetDeadline keeps the write half; reads are owned by Read.
func (c *deadlineConn) SetDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(t) }
