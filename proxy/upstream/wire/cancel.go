package wire

import (
	"errors"
	"net"
	"sync"
	"time"

	"github.com/modelgate/gateway/proxy/rawio"
)

// ErrCanceled is the error of an upstream call that its Cancel ended: the
// wait for the answer's head, or for the next bytes of its body, returned at
// once, and the connection is closed, never reused. It is not the
// deployment's failure: health does not count it and nothing retries it.
var ErrCanceled = errors.New("upstream: the call was canceled")

// Cancel ends an upstream call from another goroutine: the proxy's watch of
// the client's connection calls Cancel when the client leaves (see
// rawio.Watch), so that the provider stops generating, and billing, for a
// caller that is gone. It is given to the call's Request (Request.Cancel);
// the transport attaches the connection the call uses while it uses it, and
// Cancel moves that connection's read deadline to the past, which wakes the
// read that waits on it: the relay's goroutine then closes the connection
// itself. No goroutine waits on a Cancel, and no timer is armed for it.
//
// The zero value is ready. Cancel and Canceled are safe for concurrent use;
// Reset is the owner's, once no Cancel can come any more.
type Cancel struct {
	mu       sync.Mutex
	conn     *deadlineConn // the connection in use, when attached
	canceled bool
}

// Cancel ends the call: a read waiting on its connection returns
// ErrCanceled, and so does every later step of the call.
func (c *Cancel) Cancel() {
	c.mu.Lock()
	c.canceled = true
	if c.conn != nil {
		c.conn.cancel()
	}
	c.mu.Unlock()
}

// Canceled reports whether Cancel was called since the last Reset.
func (c *Cancel) Canceled() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.canceled
}

// Reset makes c ready for another call.
func (c *Cancel) Reset() {
	c.mu.Lock()
	c.conn, c.canceled = nil, false
	c.mu.Unlock()
}

// attach makes conn the connection Cancel ends, and reports false when the
// call was canceled already: the caller gives conn back unused. A nil c
// attaches nothing.
func (c *Cancel) attach(conn net.Conn) bool {
	if c == nil {
		return true
	}
	dc, _ := conn.(*deadlineConn)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.canceled {
		return false
	}
	c.conn = dc
	return true
}

// detach is called before the attached connection goes back to the pool or
// is closed: no Cancel touches it afterwards. It reports whether the call was
// canceled, in which case the connection must be closed, not reused: its read
// deadline is in the past.
func (c *Cancel) detach() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conn = nil
	return c.canceled
}

// pastDeadline is a read deadline that has passed: setting it wakes a
// blocked read at once.
var pastDeadline = time.Unix(1, 0)

// cancel makes the connection's reads fail with ErrCanceled: the one
// waiting now, by a read deadline in the past, and every later one (see
// Read, which checks after it arms its own deadline).
func (c *deadlineConn) cancel() {
	c.canceled.Store(true)
	c.Conn.SetReadDeadline(pastDeadline)
	if rc, ok := c.Conn.(*rawio.Conn); ok {
		rc.Kick() // a parked stream: no read waits (see answerBody.Park)
	}
}
