package wire

import (
	"net"
	"sync/atomic"
)

// openConns counts the upstream connections of the process that hold a file
// descriptor: from the dial's socket to the connection's Close. The client
// side reads it (OpenConns) to keep descriptors in reserve for the dials.
var openConns atomic.Int64

// OpenConns returns the upstream connections open in the process, those
// being dialed included.
func OpenConns() int64 { return openConns.Load() }

// Dial connects to addr (see dialer), counted in OpenConns until the
// connection's Close.
func (d *dialer) Dial(addr string) (net.Conn, error) {
	openConns.Add(1)
	c, err := d.dial(addr)
	if err != nil {
		openConns.Add(-1)
		return nil, err
	}
	c.counted.Store(true)
	return c, nil
}

// Close closes the connection; the first Close of a dialed one counts it out
// of OpenConns.
func (c *deadlineConn) Close() error {
	if c.counted.Swap(false) {
		openConns.Add(-1)
	}
	return c.Conn.Close()
}
