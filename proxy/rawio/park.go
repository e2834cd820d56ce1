package rawio

// Waker is what a Park calls when its wait ends: the connection is readable,
// the wait's deadline passed, or Kick came. It is called once per Park, from
// the parker's goroutine, a timer's or Kick's caller, and must not block.
type Waker interface {
	Wake()
}

// The phases of a Parking's state, its low two bits; the rest is the park's
// generation, which tells an event fetched for an earlier park from one for
// this one.
const (
	parkIdle      = 0
	parkWaiting   = 1
	parkWokeReady = 2 // the socket became readable (or its peer left, or it failed)
	parkWokeOther = 3 // the deadline passed, or Kick
)

func parkGen(s uint64) uint32  { return uint32(s >> 2) }
func parkPhase(s uint64) uint8 { return uint8(s & 3) }

// WokeReady reports whether the last Park on x ended because its socket
// became readable: the Read after it finds the bytes (or the peer's close)
// without a look first. False after a deadline or a Kick, or when x never
// parked: the caller then waits as ever, which returns at once for a
// deadline passed or a cancel.
func (x *Conn) WokeReady() bool {
	p := x.park.Load()
	return p != nil && parkPhase(p.state.Load()) == parkWokeReady
}

// Kick ends the Park in progress on x, if any, at once: its Waker is called.
// It is for a cancel from another goroutine (see package wire's Cancel),
// which first makes every later read fail, so the stream woken does not wait
// again.
func (x *Conn) Kick() {
	if p := x.park.Load(); p != nil {
		p.wake(parkWokeOther)
	}
}

// wakeAt ends p's wait as ready when it is still the park of generation
// gen (see parker.fire): a later park is not woken by an earlier one's event.
func (p *Parking) wakeAt(gen uint32) {
	s := uint64(gen)<<2 | parkWaiting
	if p.state.CompareAndSwap(s, s&^3|parkWokeReady) {
		p.w.Wake()
	}
}

// wake ends p's wait with phase, unless it has ended already; the caller
// that ends it calls the Waker.
func (p *Parking) wake(phase uint64) {
	for {
		s := p.state.Load()
		if parkPhase(s) != parkWaiting {
			return
		}
		if p.state.CompareAndSwap(s, s&^3|phase) {
			p.w.Wake()
			return
		}
	}
}
