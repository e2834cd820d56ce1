//go:build linux

package rawio

import (
	"testing"
	"time"
)

// canceled records when the watcher called Cancel.
type canceled chan time.Time

func (c canceled) Cancel() {
	select {
	case c <- time.Now():
	default:
	}
}

// awaitCancel returns when c was canceled, failing the test after a bound
// that only a watch that never fires reaches.
func awaitCancel(t *testing.T, c canceled) time.Time {
	t.Helper()
	select {
	case at := <-c:
		return at
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not notice that the peer left")
		return time.Time{}
	}
}

// awaitRegistered waits until the watcher registered a socket more than it
// had at before: the watch is in the epoll set from then on.
func awaitRegistered(t *testing.T, before uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for Registrations() <= before {
		if time.Now().After(deadline) {
			t.Fatal("the watch was never registered")
		}
		time.Sleep(time.Millisecond)
	}
}

// A peer that closes, or resets, the connection is noticed: at once once
// the socket is registered, and within about 2*WatchAfter when it left
// before (the registration finds it gone).
func TestWatchPeerLeaves(t *testing.T) {
	f := func(name string, reset, registerFirst bool) {
		t.Run(name, func(t *testing.T) {
			x, _, peer := tcpPair(t)
			c := make(canceled, 1)
			var w Watch
			before := Registrations()
			x.Watch(&w, c)
			defer w.Stop()
			if registerFirst {
				awaitRegistered(t, before)
			}
			if reset {
				peer.SetLinger(0)
			}
			left := time.Now()
			peer.Close()
			at := awaitCancel(t, c)
			t.Logf("noticed %v after the peer left", at.Sub(left))
		})
	}
	f("close/registered", false, true)
	f("reset/registered", true, true)
	f("close/pending", false, false)
	f("reset/pending", true, false)
}

// Bytes from the peer, such as a request pipelined behind the one being
// served, are not its leaving; its close after them is.
func TestWatchIgnoresData(t *testing.T) {
	x, _, peer := tcpPair(t)
	c := make(canceled, 1)
	var w Watch
	before := Registrations()
	x.Watch(&w, c)
	defer w.Stop()
	awaitRegistered(t, before)
	if _, err := peer.Write([]byte("POST /next HTTP/1.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c:
		t.Fatal("the peer's bytes were taken for its leaving")
	case <-time.After(5 * WatchAfter):
	}
	peer.Close()
	awaitCancel(t, c)
}

// After Stop, the peer's leaving calls nothing, whether the watch was
// registered or not; the watch can be used again.
func TestWatchStop(t *testing.T) {
	f := func(name string, registerFirst bool) {
		t.Run(name, func(t *testing.T) {
			x, _, peer := tcpPair(t)
			c := make(canceled, 1)
			var w Watch
			before := Registrations()
			x.Watch(&w, c)
			if registerFirst {
				awaitRegistered(t, before)
			}
			w.Stop()
			peer.Close()
			select {
			case <-c:
				t.Fatal("canceled after Stop")
			case <-time.After(5 * WatchAfter):
			}
			x.Watch(&w, c) // again: the peer is gone already
			defer w.Stop()
			awaitCancel(t, c)
		})
	}
	f("registered", true)
	f("pending", false)
}

// A connection closed while its watch waits to be registered is not
// registered, and its Stop does nothing more.
func TestWatchClosedConn(t *testing.T) {
	x, c, _ := tcpPair(t)
	var w Watch
	x.Watch(&w, make(canceled, 1))
	c.Close()
	time.Sleep(3 * WatchAfter) // the watcher's ticks pass over it
	w.Stop()
}

// BenchmarkWatch is the cost of a watch that ends before WatchAfter, as most
// calls' do: Watch and Stop, no system call.
// The parallel one has every P at it: the watcher's lock is shared.
func BenchmarkWatch(b *testing.B) {
	x, _, _ := tcpPair(b)
	c := make(canceled, 1)
	b.Run("serial", func(b *testing.B) {
		var w Watch
		b.ReportAllocs()
		for b.Loop() {
			x.Watch(&w, c)
			w.Stop()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var w Watch
			for pb.Next() {
				x.Watch(&w, c)
				w.Stop()
			}
		})
	})
}

// BenchmarkWatchNotice measures how long a registered watch takes to notice
// that its peer left: from the peer's close to Cancel (the ns/op is the
// round, the notice is reported apart).
func BenchmarkWatchNotice(b *testing.B) {
	var total time.Duration
	for b.Loop() {
		x, _, peer := tcpPair(b)
		c := make(canceled, 1)
		var w Watch
		before := Registrations()
		x.Watch(&w, c)
		for Registrations() <= before {
			time.Sleep(time.Millisecond)
		}
		left := time.Now()
		peer.Close()
		total += (<-c).Sub(left)
		w.Stop()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs-notice/op")
}
