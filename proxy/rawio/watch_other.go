//go:build !linux

package rawio

// Outside Linux nothing is watched: a peer that leaves is noticed at the
// next write to it, as net.Conn's users notice it.

type watchState struct{}

// Watch does nothing outside Linux.
func (x *Conn) Watch(w *Watch, gone Canceler) {}

// Stop does nothing outside Linux.
func (w *Watch) Stop() {}
