//go:build linux

package rawio

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// The parker is one goroutine for the process with an epoll instance of its
// own, as the watcher has (see watch_linux.go): a parked connection's socket
// is registered in it for EPOLLIN and EPOLLRDHUP, one shot, and the epoll
// instance is waited on through the runtime's poller, so the parker parks as
// any goroutine does. When a socket is ready, the parker calls the park's
// Waker: no goroutine waited for it meanwhile, so a stream that idles between
// its events holds no goroutine and no stack, only its state on the heap.
//
// A socket stays registered from its first Park until Unpark, which its
// owner calls before the connection goes back to a pool or closes; each Park
// after the first re-arms it (EPOLL_CTL_MOD) with the park's slot and
// generation as the event's data, so an event fetched for an earlier park is
// dropped. Level-triggered and one shot: bytes that came before the re-arm
// report at once. The park's deadline is a timer of its own, reset by each
// Park (Go's deadline of the connection wakes only a goroutine waiting on
// it).

// Parking is a connection's park (see Conn.Park): made at its first Park and
// kept with it.
type Parking struct {
	state atomic.Uint64 // generation<<2 | phase
	due   atomic.Int64  // the deadline's UnixNano; 0: none
	w     Waker
	timer *time.Timer
	fd    int32
	slot  int32 // in the parker's table, while registered; -1 otherwise
	added bool  // the socket is in the parker's epoll set (a hint: see Park)
	getFD func(uintptr)
}

type parker struct {
	ep   int
	file *os.File // ep, in the runtime's poller
	rc   syscall.RawConn

	mu    sync.Mutex
	slots []*Parking
	free  []int32

	// The parker goroutine's own, made once.
	step   func(uintptr) bool
	events [128]syscall.EpollEvent
	n      int
	woken  []woken
}

// woken is a park that fire found ready: p, at generation gen.
type woken struct {
	p   *Parking
	gen uint32
}

var (
	parkerOnce sync.Once
	theParker  *parker
	// parks counts the parks since the process began.
	parks atomic.Uint64
)

// Parks returns how many waits were parked (see Conn.Park) since the
// process began.
func Parks() uint64 { return parks.Load() }

func getParker() *parker {
	parkerOnce.Do(func() { theParker = newParker() })
	return theParker
}

// newParker starts the parker, or returns nil when it cannot: nothing parks
// then, and every wait is a goroutine's.
func newParker() *parker {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	if syscall.SetNonblock(ep, true) != nil {
		syscall.Close(ep)
		return nil
	}
	f := os.NewFile(uintptr(ep), "rawio-park")
	rc, err := f.SyscallConn()
	if err != nil || f.SetReadDeadline(time.Time{}) != nil { // not in the runtime's poller
		f.Close()
		return nil
	}
	pk := &parker{ep: ep, file: f, rc: rc}
	pk.step = pk.wait
	go pk.run()
	return pk
}

// Park waits, without a goroutine, until x is readable (bytes, the peer's
// close, a failure), deadline passes (none when zero) or Kick comes, and
// then calls w.Wake once. It reports whether it parked: false when it cannot
// (no parker, a socket epoll refuses, a deadline passed already), and the
// caller then waits as ever. Once it returns true the park may have ended
// already, on another goroutine: the caller must not touch what w's Wake
// goes on with. One Park at a time per Conn, from its reader; the next one
// comes after the last one's Wake. Unpark must come before x goes back to a
// pool or closes.
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
	if p.fd < 0 && x.rc.Control(p.getFD) != nil {
		return false
	}
	if p.slot < 0 && !pk.assign(p) {
		return false
	}
	var due int64
	if !deadline.IsZero() {
		due = deadline.UnixNano()
		if deadline.Before(time.Now()) {
			return false
		}
	}
	gen := parkGen(p.state.Load()) + 1
	p.w = w
	p.due.Store(due)
	add := !p.added
	p.added = true
	p.state.Store(uint64(gen)<<2 | parkWaiting)
	// From here on the park may end on another goroutine: only what is local
	// and p's atomics are touched (the timer is safe for concurrent use).
	if due != 0 {
		p.timer.Reset(time.Until(deadline))
	}
	if pk.arm(p, gen, add) {
		parks.Add(1)
		return true
	}
	s := uint64(gen)<<2 | parkWaiting
	if p.state.CompareAndSwap(s, s&^3|parkIdle) {
		p.timer.Stop()
		p.added = false
		return false
	}
	return true // the deadline or a Kick ended it meanwhile: its Wake is called
}

func (p *Parking) setFD(fd uintptr) { p.fd = int32(fd) }

// expire is the park's timer: it ends the park whose deadline passed. One
// that an earlier park armed, and that fires once the next park began, does
// nothing while the next one's deadline is ahead.
func (p *Parking) expire() {
	if due := p.due.Load(); due != 0 && time.Now().UnixNano() >= due {
		p.wake(parkWokeOther)
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
	p.due.Store(0)
	// A later generation: an event fetched for this park is dropped.
	p.state.Store(uint64(parkGen(p.state.Load())+1) << 2)
	pk := theParker
	if p.added {
		syscall.EpollCtl(pk.ep, syscall.EPOLL_CTL_DEL, int(p.fd), nil)
		p.added = false
	}
	pk.mu.Lock()
	pk.slots[p.slot] = nil
	pk.free = append(pk.free, p.slot)
	pk.mu.Unlock()
	p.slot, p.fd = -1, -1
}

// assign gives p a slot of the table.
func (pk *parker) assign(p *Parking) bool {
	pk.mu.Lock()
	defer pk.mu.Unlock()
	if n := len(pk.free); n > 0 {
		p.slot, pk.free = pk.free[n-1], pk.free[:n-1]
	} else {
		p.slot = int32(len(pk.slots))
		pk.slots = append(pk.slots, nil)
	}
	pk.slots[p.slot] = p
	return true
}

// arm registers p's socket for its park of generation gen, or re-arms it:
// added says whether it is thought out of the set (a Park whose arm raced a
// deadline may have left it wrong, which the other operation mends).
func (pk *parker) arm(p *Parking, gen uint32, add bool) bool {
	ev := syscall.EpollEvent{
		Events: syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT,
		Fd:     p.slot,
		Pad:    int32(gen),
	}
	fd := int(p.fd)
	op, other := syscall.EPOLL_CTL_MOD, syscall.EPOLL_CTL_ADD
	if add {
		op, other = other, op
	}
	err := epollCtl(pk.ep, op, fd, &ev)
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.EEXIST) {
		err = epollCtl(pk.ep, other, fd, &ev)
	}
	return err == nil
}

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
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, fd,
			uintptr(unsafe.Pointer(&pk.events[0])), uintptr(len(pk.events)), 0, 0, 0)
		switch {
		case e == syscall.EINTR:
			continue
		case e != 0 || n == 0:
			pk.n = 0
			return false
		}
		pk.n = int(n)
		return true
	}
}

// fire wakes the parks whose sockets are ready: their Wakers are called
// outside the table's lock.
func (pk *parker) fire() {
	pk.mu.Lock()
	for _, ev := range pk.events[:pk.n] {
		if i := ev.Fd; i >= 0 && int(i) < len(pk.slots) {
			if p := pk.slots[i]; p != nil {
				s := p.state.Load()
				if parkGen(s) == uint32(ev.Pad) && parkPhase(s) == parkWaiting {
					pk.woken = append(pk.woken, woken{p, uint32(ev.Pad)})
				}
			}
		}
	}
	pk.n = 0
	pk.mu.Unlock()
	for i, k := range pk.woken {
		k.p.wakeAt(k.gen)
		pk.woken[i] = woken{}
	}
	pk.woken = pk.woken[:0]
}
