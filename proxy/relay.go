package proxy

import "io"

// A streamed answer is the body of the client's response: fasthttp reads it
// through the call, which hands the reading to its upstream.Relay and is
// released when fasthttp closes the body.

// Read relays the upstream body (see upstream.Relay.Read).
func (c *call) Read(p []byte) (int, error) { return c.up.Read(p) }

// SupportsBodyWriteTo tells fasthttp to relay the body with WriteTo when the
// relay prefers it (fixed-size and SSE bodies).
func (c *call) SupportsBodyWriteTo() bool { return c.up.SupportsBodyWriteTo() }

// WriteTo relays the upstream body to w (see upstream.Relay.WriteTo).
func (c *call) WriteTo(w io.Writer) (int64, error) { return c.up.WriteTo(w) }

// Chunk passes a chunk of the streamed answer to onStream.
func (c *call) Chunk(p []byte) { c.onStream(c, p) }

// Close ends the relay: the upstream body is closed (its connection reused
// when fully read, else closed, which cancels the upstream call) and the call
// is released.
func (c *call) Close() error {
	c.up.Close()
	c.g.finish(c)
	c.release()
	return nil
}
