package upstream

import "github.com/modelgate/gateway/parse"

// usageReader reads the token usage an answer reports as the relay passes
// it on, buffered or streamed: see parse.UsageScanner. It is off unless the
// caller asks (Relay.CountUsage). The zero value is ready (and off).
type usageReader struct {
	on bool
	s  parse.UsageScanner
}

func (u *usageReader) feed(p []byte) {
	if u.on {
		u.s.Feed(p)
	}
}

func (u *usageReader) reset() {
	if u.on {
		u.s.Reset()
		u.on = false
	}
}

// CountUsage makes r read the token usage of the answer of the next Send.
func (r *Relay) CountUsage() { r.usage.on = true }

// Usage returns the token usage read from the answer so far; Found is false
// when there was none or CountUsage was not called.
func (r *Relay) Usage() parse.Usage { return r.usage.s.Usage() }
