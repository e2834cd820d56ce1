package wire

import "time"

// Observer is told what a deployment's connections see, for the gateway's
// routing and metrics (package upstream implements it); NewClient gives it
// to every connection it dials. Its methods are called on the call's
// goroutine and must not block.
type Observer interface {
	// HeadRead is told that an answer's head was read, or that its read
	// failed with err: sent is when the request's write began and read when
	// the head's read ended (MonoNow's clock, each one reading the transport
	// made for its own use too; the write may wait for the answer's first
	// byte, see deadlineConn.flushAwait), status the answer's status.
	HeadRead(sent, read int64, status int, err error)
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

// now returns the time from one reading of the monotonic clock alone (see
// MonoNow): time.Now reads the wall clock too, two readings of the vDSO's
// clock where one is enough for deadlines and durations. Its wall time is
// epoch's plus the time since, which a wall clock stepped since the process
// began does not move; deadlines and durations use its monotonic reading.
func now() time.Time { return epoch.Add(time.Since(epoch)) }

// mono is t on MonoNow's clock, for a t of now.
func mono(t time.Time) int64 { return int64(t.Sub(epoch)) }
