package edgetls

import (
	"crypto/tls"
	"net"
	"sync"
	"time"

	"github.com/modelgate/gateway/proxy/rawio"
)

// Listener returns ln with its connections spoken over TLS: the raw TCP
// connection (rawio's reads and writes) under TLS, the server above it. The
// handshake runs on the connection's first read or write, in the server's
// goroutine, not in Accept: a client that stalls delays no other.
func (c *Certs) Listener(ln net.Listener) net.Listener {
	return &listener{Listener: ln, c: c}
}

type listener struct {
	net.Listener
	c *Certs
}

func (l *listener) Accept() (net.Conn, error) {
	raw, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	under := raw
	if rc := rawio.Wrap(raw); rc != nil {
		under = rc
	}
	return &Conn{Conn: tls.Server(under, l.c.base), timeout: l.c.o.HandshakeTimeout}, nil
}

// Conn is a client's TLS connection whose handshake must end within a bound
// of its start, whatever deadlines the server sets meanwhile: a hello that
// stalls, junk or plaintext fails the first read within it, and the server
// closes the connection. Safe for one reader and one writer at a time, as
// tls.Conn.
type Conn struct {
	*tls.Conn
	timeout time.Duration

	once sync.Once
	err  error
	// mu guards the deadlines the server set before the handshake ended,
	// which it puts in force once it has.
	mu         sync.Mutex
	shaking    bool
	readAt     time.Time
	writeAt    time.Time
	hsDeadline time.Time
}

// Handshake runs the handshake, once, within the bound.
func (c *Conn) Handshake() error {
	c.once.Do(c.handshake)
	return c.err
}

func (c *Conn) handshake() {
	c.mu.Lock()
	c.shaking, c.hsDeadline = true, time.Now().Add(c.timeout)
	err := c.Conn.SetDeadline(c.hsDeadline)
	c.mu.Unlock()
	if err == nil {
		err = c.Conn.Handshake()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shaking = false
	if err != nil {
		c.err = err
		return
	}
	if err := c.Conn.SetReadDeadline(c.readAt); err != nil {
		c.err = err
		return
	}
	c.err = c.Conn.SetWriteDeadline(c.writeAt)
}

func (c *Conn) Read(p []byte) (int, error) {
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *Conn) Write(p []byte) (int, error) {
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// SetReadDeadline, SetWriteDeadline and SetDeadline are noted while the
// handshake runs, and put in force once it has ended; a sooner deadline
// takes effect at once.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readAt = t
	if c.shaking && !c.sooner(t) {
		return nil
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writeAt = t
	if c.shaking && !c.sooner(t) {
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *Conn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.readAt, c.writeAt = t, t
	if c.shaking && !c.sooner(t) {
		return nil
	}
	return c.Conn.SetDeadline(t)
}

// sooner reports whether t ends the handshake before its own bound.
func (c *Conn) sooner(t time.Time) bool { return !t.IsZero() && t.Before(c.hsDeadline) }
