//go:build linux

package rawio

import (
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The parker is one goroutine for the process with an epoll instance of its
// own, as the watcher has (see watch_linux.go): a parked connection's socket
// is registered in it, edge-triggered, for EPOLLIN and EPOLLRDHUP, and the
// epoll instance is waited on through the runtime's poller, so the parker
// parks as any goroutine does. When a socket becomes readable, the parker
// calls its park's Waker: no goroutine waited for it meanwhile, so a stream
// that idles between its events holds no goroutine and no stack, only its
// state on the heap.
//
// A socket is registered at its connection's first Park and stays so until
// Unpark, which its owner calls before the connection goes back to a pool or
// closes: a park costs no system call. Edge-triggered, the parker hears of
// each arrival of bytes once; one that comes while the owner reads (not
// parked) is noted in the Parking's state, and the next Park looks at the
// socket (a recv of MSG_PEEK) before it parks, so bytes that came before the
// park are never left without a wake. The park's deadline is a timer of its
// own, moved only when the deadline moves (Go's deadline of the connection
// wakes only a goroutine waiting on it).

// Parking is a connection's park (see Conn.Park): made at its first Park and
// kept with it.
type Parking struct {
	state parkState
	due   atomic.Int64 // the deadline, counted from parkEpoch; 0: none
	armed int64        // the due the timer is set for: the owner's
	w     Waker
	timer *time.Timer
	fd    int32
	slot  int32 // in the parker's table, while registered; -1 otherwise
	getFD func(uintptr)
}

type parker struct {
	polledEpoll

	mu    sync.Mutex
	slots []*Parking
	free  []int32

	// The parker goroutine's own, made once.
	step   func(uintptr) bool
	events [128]syscall.EpollEvent
	n      int
	woken  []*Parking
}

var (
	parkerOnce sync.Once
	theParker  *parker
	// parks counts the sockets registered since the process began.
	parks atomic.Uint64
)

// Parks returns how many connections began to park (their socket registered
// with the parker at their first Park, see Conn.Park) since the process
// began.
func Parks() uint64 { return parks.Load() }

func getParker() *parker {
	parkerOnce.Do(func() { theParker = newParker() })
	return theParker
}

// newParker starts the parker, or returns nil when it cannot: nothing parks
// then, and every wait is a goroutine's.
func newParker() *parker {
	pe, ok := newPolledEpoll("rawio-park")
	if !ok {
		return nil
	}
	pk := &parker{polledEpoll: pe}
	pk.step = pk.wait
	go pk.run()
	return pk
}

// Park waits, without a goroutine, until x is readable (bytes, the peer's
// close, a failure), deadline passes (none when zero) or Kick comes, and
// then calls w.Wake once. It reports whether it parked: false when it cannot
// (no parker, a socket epoll refuses, a deadline passed already), or when
// the bytes came already, or a Kick did; the caller then reads, or waits as
// ever. Once it returns true the park may have ended already, on another
// goroutine: the caller must not touch what w's Wake goes on with. One Park
// at a time per Conn, from its reader; the next one comes after the last
// one's Wake. Unpark must come before x goes back to a pool or closes.
func (x *Conn) Park(deadline time.Time, w Waker) bool {
	pk := getParker()
	if pk == nil {
		return false
	}
	p := x.park.Load()
	if p == nil {
		p = &Parking{fd: -1, slot: -1}
		p.getFD = p.setFD
		p.timer = time.AfterFunc(time.Hour, p.expire)
		p.timer.Stop()
		x.park.Store(p)
	}
	var due int64
	if !deadline.IsZero() {
		due = max(1, int64(deadline.Sub(parkEpoch)))
	}
	// A deadline that moved is looked at, and the timer set for it; one
	// that did not has its timer set already, which ends the park (or, fired
	// while the owner read, has the next Park not park) once it passes.
	if due != p.armed && due != 0 && deadline.Before(time.Now()) {
		return false
	}
	if p.slot < 0 && !pk.register(x, p) {
		return false
	}
	p.w = w
	if due != p.armed {
		p.armed = due
		p.due.Store(due)
		if due != 0 {
			p.timer.Reset(time.Until(deadline))
		} else {
			p.timer.Stop()
		}
	}
	return p.enter()
}

// enter parks p, unless something came while its owner read: a Kick or the
// deadline (the caller then waits as ever, which returns at once), or bytes
// the socket still holds (the caller reads them).
func (p *Parking) enter() bool {
	for {
		s := p.state.s.Load()
		switch {
		case s&pendingOther != 0:
			p.state.s.Store(parkWokeOther)
			return false
		case s&pendingReady != 0:
			if !p.state.s.CompareAndSwap(s, parkRunning) {
				continue
			}
			if sysPeek(uintptr(p.fd)) != syscall.EAGAIN {
				p.state.s.CompareAndSwap(parkRunning, parkWokeReady)
				return false
			}
		case p.state.s.CompareAndSwap(s, parkWaiting):
			return true
		}
	}
}

func (p *Parking) setFD(fd uintptr) { p.fd = int32(fd) }

// parkEpoch is what a park's deadline is counted from: the monotonic clock,
// as the runtime counts the connection's own deadline, so that a step of the
// wall clock neither fires a park's timer early nor leaves it unheard.
var parkEpoch = time.Now()

// expire is the park's timer: it ends the park whose deadline passed. One
// set for an earlier deadline that fires once the deadline moved does
// nothing.
func (p *Parking) expire() {
	if due := p.due.Load(); due != 0 && int64(time.Since(parkEpoch)) >= due {
		p.state.end(parkWokeOther, pendingOther, p)
	}
}

// Unpark takes x's socket out of the parker's epoll set: before x goes back
// to a pool or closes. x is not parked when it is called (its owner's Park
// ended in a Wake).
func (x *Conn) Unpark() {
	p := x.park.Load()
	if p == nil || p.slot < 0 {
		return
	}
	p.timer.Stop()
	p.armed = 0
	p.due.Store(0)
	pk := theParker
	epollCtl(pk.ep, syscall.EPOLL_CTL_DEL, int(p.fd), nil)
	pk.release(p)
	p.w = nil
	p.state.s.Store(parkRunning)
}

// release gives p's slot of the table back.
func (pk *parker) release(p *Parking) {
	pk.mu.Lock()
	pk.slots[p.slot] = nil
	pk.free = append(pk.free, p.slot)
	pk.mu.Unlock()
	p.slot = -1
}

// register gives p a slot of the table and adds x's socket to the epoll
// set, edge-triggered, the slot its event's data.
func (pk *parker) register(x *Conn, p *Parking) bool {
	if p.fd < 0 && x.rc.Control(p.getFD) != nil {
		return false
	}
	pk.mu.Lock()
	if n := len(pk.free); n > 0 {
		p.slot, pk.free = pk.free[n-1], pk.free[:n-1]
	} else {
		p.slot = int32(len(pk.slots))
		pk.slots = append(pk.slots, nil)
	}
	pk.slots[p.slot] = p
	pk.mu.Unlock()
	ev := syscall.EpollEvent{Events: parkEvents, Fd: p.slot}
	if epollCtl(pk.ep, syscall.EPOLL_CTL_ADD, int(p.fd), &ev) != nil {
		pk.release(p)
		return false
	}
	parks.Add(1)
	return true
}

// parkEvents are what a parked socket is registered for: bytes, the peer's
// FIN, and, implied, a reset or failure; edge-triggered (EPOLLET, whose bit
// is past int32's range in package syscall).
const parkEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | uint32(1)<<31

// epollCtl is syscall.EpollCtl without the scheduler's system-call state
// (see the package doc): epoll_ctl does not block.
func epollCtl(ep, op, fd int, ev *syscall.EpollEvent) error {
	_, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_CTL, uintptr(ep), uintptr(op), uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// run is the parker's goroutine: it waits for its sockets and wakes their
// parks.
func (pk *parker) run() {
	for {
		if err := pk.rc.Read(pk.step); err != nil {
			return // not seen: the poller failed the epoll fd; Parks still made wait for their deadlines
		}
		pk.fire()
	}
}

// wait is run's step: it fetches the ready events without waiting, and asks
// the poller to wait while there are none.
func (pk *parker) wait(fd uintptr) bool {
	pk.n = fetch(fd, pk.events[:])
	return pk.n > 0
}

// fire wakes the parks whose sockets became readable (or notes it for
// those not parked): their Wakers are called outside the table's lock.
func (pk *parker) fire() {
	pk.mu.Lock()
	for _, ev := range pk.events[:pk.n] {
		if i := ev.Fd; i >= 0 && int(i) < len(pk.slots) {
			if p := pk.slots[i]; p != nil {
				pk.woken = append(pk.woken, p)
			}
		}
	}
	pk.n = 0
	pk.mu.Unlock()
	for i, p := range pk.woken {
		p.state.end(parkWokeReady, pendingReady, p)
		pk.woken[i] = nil
	}
	pk.woken = pk.woken[:0]
}
