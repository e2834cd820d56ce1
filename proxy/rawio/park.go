package rawio

import "sync/atomic"

// Waker is what a Park calls when its wait ends: the connection is readable,
// the wait's deadline passed, or Kick came. It is called once per Park, from
// the parker's goroutine, a timer's or Kick's caller, and must not block.
type Waker interface {
	Wake()
}

// A Parking's state: the phase of its park, and what came while it was not
// parked (its owner was reading), which the next Park sees.
const (
	parkRunning   = 0 // not parked: its owner reads
	parkWaiting   = 1
	parkWokeReady = 2 // woken: the socket became readable (or its peer left, or it failed)
	parkWokeOther = 3 // woken: the deadline passed, or Kick
	phaseMask     = 3

	pendingReady = 4 // the socket became readable while not parked
	pendingOther = 8 // the deadline passed, or Kick came, while not parked
)

// parkState is a Parking's state word.
type parkState struct{ s atomic.Uint32 }

// WokeReady reports whether the last Park on x ended because its socket
// became readable: the Read after it finds the bytes (or the peer's close)
// without a look first. False after a deadline or a Kick, or when x never
// parked: the caller then waits as ever, which returns at once for a
// deadline passed or a cancel.
func (x *Conn) WokeReady() bool {
	p := x.park.Load()
	return p != nil && p.state.s.Load()&phaseMask == parkWokeReady
}

// Kick ends the Park in progress on x, if any, at once: its Waker is called.
// It is for a cancel from another goroutine (see package wire's Cancel),
// which first makes every later read fail, so the stream woken does not wait
// again; a Kick while x is not parked has its next Park not park.
func (x *Conn) Kick() {
	if p := x.park.Load(); p != nil {
		p.state.end(parkWokeOther, pendingOther, p)
	}
}

// end ends a park with phase (parkWokeReady or parkWokeOther) and calls its
// Waker, or, when none is in progress, notes pending for the next Park.
func (st *parkState) end(phase, pending uint32, p *Parking) {
	for {
		s := st.s.Load()
		switch s & phaseMask {
		case parkWaiting:
			if st.s.CompareAndSwap(s, phase) {
				p.w.Wake()
				return
			}
		default:
			if s&pending != 0 || st.s.CompareAndSwap(s, s|pending) {
				return
			}
		}
	}
}
