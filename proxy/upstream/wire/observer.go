package wire

import "time"

// Observer is told what a deployment's connections see, for the gateway's
// routing and metrics (package upstream implements it); NewClient gives it
// to every connection it dials. Its methods are called on the call's
// goroutine and must not block.
type Observer interface {
	// HeadRead is told that an answer's head was read, or that its read
	// failed with err: sent is when the request's write began (MonoNow's
	// clock; the write may wait for the answer's first byte, see
	// deadlineConn.flushAwait), status the answer's status.
	HeadRead(sent int64, status int, err error)
	// IdleClosed is told that a pooled connection was found closed by the
	// upstream while idle, and replaced before any byte of the request was
	// written on it (see deadlineConn.closedWhileIdle).
	IdleClosed()
}

// epoch is the origin of MonoNow.
var epoch = time.Now()

// MonoNow returns the monotonic clock's nanoseconds since the process began:
// one clock for the times the wire and its Observer compare.
func MonoNow() int64 { return int64(time.Since(epoch)) }
