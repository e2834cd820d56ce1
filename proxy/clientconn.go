package proxy

import (
	"errors"
	"net"
	"os"
	"time"
)

// Listener wraps the client-facing listener ln so that a client that stops
// reading cannot pin an answer, and the upstream connection under it, for
// ever: a write to its connection that makes no progress for
// timeouts.client_write_idle fails, and fasthttp then drops the connection,
// which ends the relay and frees the upstream connection. A slow client that
// keeps reading keeps its stream: only a period without a byte taken counts.
func (g *Gateway) Listener(ln net.Listener) net.Listener {
	return &clientListener{Listener: ln, g: g}
}

type clientListener struct {
	net.Listener
	g *Gateway
}

func (l *clientListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	idle := l.g.state.Load().cfg.Timeouts.ClientWriteIdle.D()
	return &clientConn{Conn: c, idle: idle}, nil
}

// clientConn is a client connection whose writes give up after idle without
// progress. Not safe for concurrent writes (fasthttp writes from one
// goroutine per connection).
type clientConn struct {
	net.Conn
	idle time.Duration
	// deadline is the write deadline in force; it is moved only when the
	// wanted one is later by more than a sixteenth of idle, so a busy stream
	// does not re-arm a timer on every write.
	deadline time.Time
	// readDeadline is the read deadline in force; see SetReadDeadline.
	readDeadline time.Time
}

func (c *clientConn) Write(p []byte) (int, error) {
	written := 0
	for {
		if err := c.arm(); err != nil {
			return written, err
		}
		n, err := c.Conn.Write(p[written:])
		written += n
		if err == nil || n == 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return written, err
		}
		// The client took bytes within the period: slow, not gone.
	}
}

func (c *clientConn) arm() error {
	want := time.Now().Add(c.idle)
	if want.Sub(c.deadline) <= c.idle>>4 {
		return nil
	}
	c.deadline = want
	return c.Conn.SetWriteDeadline(want)
}

// SetWriteDeadline and SetDeadline are fasthttp's; the next write re-arms
// the idle deadline.
func (c *clientConn) SetWriteDeadline(t time.Time) error {
	c.deadline = time.Time{}
	return c.Conn.SetWriteDeadline(t)
}

func (c *clientConn) SetDeadline(t time.Time) error {
	c.deadline, c.readDeadline = time.Time{}, t
	return c.Conn.SetDeadline(t)
}

// SetReadDeadline is fasthttp's: it sets one twice per request on a kept-alive
// connection (the idle timeout, then the read timeout). A deadline later than
// the one in force by at most a sixteenth of the time it leaves is not set, so
// a busy connection does not re-arm its timer on every request; a read
// deadline may thus fall up to a sixteenth of its timeout early. An earlier
// deadline, and clearing one, always take effect.
func (c *clientConn) SetReadDeadline(t time.Time) error {
	if !t.IsZero() && !c.readDeadline.IsZero() {
		if later := t.Sub(c.readDeadline); later >= 0 && later <= time.Until(t)>>4 {
			return nil
		}
	}
	c.readDeadline = t
	return c.Conn.SetReadDeadline(t)
}

// CloseWrite shuts the write side of the connection, for a lingering close
// (see lingerClose).
func (c *clientConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
