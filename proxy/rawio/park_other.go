//go:build !linux

package rawio

import "time"

// Outside Linux nothing parks: every wait is a goroutine's.

// Parking is a connection's park; outside Linux there is none.
type Parking struct {
	state parkState
	w     Waker
}

// Park does not park outside Linux: the caller waits as ever.
func (x *Conn) Park(deadline time.Time, w Waker) bool { return false }

// Unpark does nothing outside Linux.
func (x *Conn) Unpark() {}

// Parks returns 0 outside Linux.
func Parks() uint64 { return 0 }
