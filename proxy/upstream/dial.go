package upstream

import (
	"errors"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// dialer makes upstream connections that own their read deadlines: after a
// request is written, the next read may wait up to firstByte; every later read
// up to idle. fasthttp's own read deadline covers a whole streamed body, which
// would cut long streams, so it is ignored.
type dialer struct {
	connect, firstByte, idle time.Duration
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
	return &deadlineConn{Conn: c, firstByte: d.firstByte, idle: d.idle}, nil
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
	// deadline is the read deadline in force; it is moved only when the
	// wanted one is later by more than a sixteenth of the timeout, so a busy
	// stream does not re-arm a timer on every read.
	deadline time.Time
}

func (c *deadlineConn) Write(p []byte) (int, error) {
	c.awaiting = true
	return c.Conn.Write(p)
}

func (c *deadlineConn) Read(p []byte) (int, error) {
	d := c.idle
	if c.awaiting {
		d = c.firstByte
	}
	if d > 0 {
		want := time.Now().Add(d)
		if want.Sub(c.deadline) > d>>4 || want.Before(c.deadline) {
			if err := c.Conn.SetReadDeadline(want); err != nil {
				return 0, err
			}
			c.deadline = want
		}
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.awaiting = false
	}
	return n, err
}

// SetReadDeadline is owned by Read; see dialer.
func (c *deadlineConn) SetReadDeadline(time.Time) error { return nil }

// SetDeadline keeps the write half; reads are owned by Read.
func (c *deadlineConn) SetDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(t) }
