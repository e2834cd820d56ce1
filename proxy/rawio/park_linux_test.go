package rawio

import (
	"runtime"
	"testing"
	"time"
)

// chanWaker is a Waker that tells a channel.
type chanWaker chan struct{}

func (w chanWaker) Wake() { w <- struct{}{} }

// awaitWake fails the test unless w is woken within a generous bound (a
// test on a loaded machine must not fail for its slowness), and then checks
// that it is not woken twice for one park.
func awaitWake(t *testing.T, w chanWaker) {
	t.Helper()
	select {
	case <-w:
	case <-time.After(30 * time.Second):
		t.Fatal("the park was not woken")
	}
}

func expectNoWake(t *testing.T, w chanWaker) {
	t.Helper()
	runtime.Gosched()
	select {
	case <-w:
		t.Fatal("woken without a cause")
	default:
	}
}

// A parked connection is woken once its peer writes, as ready, and the
// bytes are then read without a wait; it parks again for the next bytes, and
// is woken by the peer's close too.
func TestParkWakesOnBytes(t *testing.T) {
	x, _, peer := tcpPair(t)
	w := make(chanWaker, 2)
	for i := range 3 {
		if !x.Park(time.Time{}, w) {
			t.Fatal("Park refused a TCP connection")
		}
		expectNoWake(t, w)
		if i < 2 {
			peer.Write([]byte("event"))
		} else {
			peer.Close()
		}
		awaitWake(t, w)
		if !x.WokeReady() {
			t.Fatal("woken by bytes, WokeReady is false")
		}
		var b [16]byte
		n, err := x.Read(b[:])
		if i < 2 && (n != 5 || err != nil) {
			t.Fatalf("read %d, %v after the wake", n, err)
		}
		if i == 2 && err == nil {
			t.Fatalf("read %d, no error after the peer's close", n)
		}
	}
	x.Unpark()
}

// awaitPending waits until the parker has noted bytes that came while x was
// not parked (an outcome awaited, not a speed).
func awaitPending(t *testing.T, x *Conn) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for x.park.Load().state.s.Load()&pendingReady == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the parker did not note the bytes")
		}
		time.Sleep(time.Millisecond)
	}
}

// Bytes that came while the connection was not parked (its owner was
// reading) are not left without a wake, though the edge-triggered parker
// heard of them only then: the next Park sees them and does not park. Once
// they were read, the next Park parks.
func TestParkBytesCameWhileReading(t *testing.T) {
	x, _, peer := tcpPair(t)
	w := make(chanWaker, 2)
	if !x.Park(time.Time{}, w) {
		t.Fatal("Park refused")
	}
	peer.Write([]byte("a"))
	awaitWake(t, w)
	var b [16]byte
	if n, err := x.Read(b[:]); n != 1 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	peer.Write([]byte("early")) // while not parked
	awaitPending(t, x)
	if x.Park(time.Time{}, w) {
		t.Fatal("parked with bytes in the socket")
	}
	if !x.WokeReady() {
		t.Fatal("not parked for the bytes, WokeReady is false")
	}
	if n, err := x.Read(b[:]); n != 5 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	peer.Write([]byte("late")) // noted, then read before the next park
	awaitPending(t, x)
	if n, err := x.Read(b[:]); n != 4 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	if !x.Park(time.Time{}, w) {
		t.Fatal("did not park once the bytes noted were read")
	}
	expectNoWake(t, w)
	peer.Write([]byte("next"))
	awaitWake(t, w)
	x.Unpark()
}

// Bytes already in the socket at a connection's first park wake it at once,
// or have it not park.
func TestParkBytesAlreadyThere(t *testing.T) {
	x, _, peer := tcpPair(t)
	peer.Write([]byte("early"))
	var b [16]byte
	w := make(chanWaker, 2)
	for x.Park(time.Time{}, w) { // parked before the bytes reached x's socket
		awaitWake(t, w)
		if x.WokeReady() {
			break
		}
	}
	if n, err := x.Read(b[:]); n != 5 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	x.Unpark()
}

// A park's deadline wakes it, not as ready; an earlier park's deadline
// does not wake a later park whose deadline is ahead.
func TestParkDeadline(t *testing.T) {
	x, _, peer := tcpPair(t)
	w := make(chanWaker, 2)
	if !x.Park(time.Now().Add(20*time.Millisecond), w) {
		t.Fatal("Park refused")
	}
	awaitWake(t, w)
	if x.WokeReady() {
		t.Fatal("woken by the deadline, WokeReady is true")
	}
	if x.Park(time.Now().Add(-time.Second), w) {
		t.Fatal("parked with its deadline passed")
	}
	// A park armed with an hour, woken by bytes; the next with none.
	if !x.Park(time.Now().Add(time.Hour), w) {
		t.Fatal("Park refused")
	}
	peer.Write([]byte("x"))
	awaitWake(t, w)
	var b [4]byte
	x.Read(b[:])
	if !x.Park(time.Time{}, w) {
		t.Fatal("Park refused")
	}
	x.park.Load().expire() // the first park's timer, firing late
	expectNoWake(t, w)
	x.Kick()
	awaitWake(t, w)
	x.Unpark()
}

// Kick wakes a park at once, not as ready, and does nothing to a connection
// not parked.
func TestParkKick(t *testing.T) {
	x, _, _ := tcpPair(t)
	x.Kick() // never parked
	w := make(chanWaker, 2)
	if !x.Park(time.Time{}, w) {
		t.Fatal("Park refused")
	}
	x.Kick()
	awaitWake(t, w)
	if x.WokeReady() {
		t.Fatal("woken by Kick, WokeReady is true")
	}
	x.Kick() // while not parked: the next Park does not park
	expectNoWake(t, w)
	if x.Park(time.Time{}, w) {
		t.Fatal("parked after a Kick")
	}
	if !x.Park(time.Time{}, w) { // the Kick was seen once
		t.Fatal("Park refused")
	}
	x.Kick()
	awaitWake(t, w)
	x.Unpark()
	x.Unpark() // twice is harmless
}

// A parked connection holds no goroutine: a hundred parks leave the
// goroutine count where it was.
func TestParkHoldsNoGoroutine(t *testing.T) {
	getParker() // its goroutine, once for the process
	type pair struct {
		x *Conn
		w chanWaker
	}
	pairs := make([]pair, 100)
	peers := make([]func(), 100)
	for i := range pairs {
		x, _, peer := tcpPair(t)
		pairs[i] = pair{x, make(chanWaker, 1)}
		peers[i] = func() { peer.Write([]byte("x")) }
	}
	before := runtime.NumGoroutine()
	for _, p := range pairs {
		if !p.x.Park(time.Now().Add(time.Hour), p.w) {
			t.Fatal("Park refused")
		}
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines with 100 parks, %d before", n, before)
	}
	for i, p := range pairs {
		peers[i]()
		awaitWake(t, p.w)
		p.x.Unpark()
	}
}
