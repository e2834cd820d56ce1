//go:build linux

package rawio

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The watcher is one goroutine for the process with an epoll instance of its
// own, in which a watched socket is registered for EPOLLRDHUP (its peer sent
// FIN) and, implied, EPOLLHUP and EPOLLERR (a reset), one shot: never for
// EPOLLIN, so a request the client pipelined behind the one being served
// does not count as its leaving.
//
// The epoll instance is itself waited on through the runtime's poller (an
// epoll fd is readable while one of its sockets is ready), so the watcher
// parks as any goroutine does: no thread blocked in epoll_wait and no
// system-call state, which would wake sysmon (see the package doc). Its read
// deadline is its clock: while watches wait to be registered it wakes every
// WatchAfter to register those that lasted that long; otherwise it sleeps
// until a socket it watches is ready.
//
// A watch begins in a list of pending watches (two short critical sections,
// for Watch and Stop, no system call): most calls end within WatchAfter and
// never cost more. The watcher registers a watch at its second tick, so
// after WatchAfter to 2*WatchAfter, with epoll_ctl on the connection's
// RawConn.Control, which holds the descriptor open: a connection closed
// meanwhile fails Control instead of registering a descriptor that was
// reused. Stop removes a registered socket the same way. The epoll data is
// a slot of the watcher's table and the slot's generation, so an event that
// was fetched for a watch that Stop ended since is dropped.

type watchState struct {
	prev, next *Watch // on the pending list, oldest first
	listed     bool
	since      uint64 // the watcher's tick when the watch began
	conn       *Conn
	gone       Canceler
	registered bool // in the epoll set, at slot
	fired      bool
	slot       int32
	del        func(uintptr) // Stop's epoll_ctl, made at its first use
}

type watcher struct {
	polledEpoll

	mu         sync.Mutex
	head, tail *Watch // pending
	ticks      uint64
	armed      bool // a tick is due: the file's read deadline is set
	dead       bool // the watcher stopped: Watch does nothing
	slots      []watchSlot
	free       []int32

	// The watcher goroutine's own, made once: its step for rc.Read and the
	// events it fetched; the epoll_ctl of a registration (under mu).
	step   func(uintptr) bool
	events [64]syscall.EpollEvent
	n      int
	add    func(uintptr)
	addEv  syscall.EpollEvent
	addErr error
}

type watchSlot struct {
	w   *Watch
	gen uint32
}

var (
	watcherOnce sync.Once
	theWatcher  *watcher
	// registrations counts the sockets registered since the process began.
	registrations atomic.Uint64
)

// Registrations returns how many watches lasted long enough to have their
// socket registered with the watcher (see WatchAfter).
func Registrations() uint64 { return registrations.Load() }

func getWatcher() *watcher {
	watcherOnce.Do(func() { theWatcher = newWatcher() })
	return theWatcher
}

// newWatcher starts the watcher, or returns nil when it cannot: nothing is
// watched then.
func newWatcher() *watcher {
	pe, ok := newPolledEpoll("rawio-watch")
	if !ok {
		return nil
	}
	wt := &watcher{polledEpoll: pe}
	wt.step, wt.add = wt.wait, wt.addFD
	go wt.run()
	return wt
}

// Watch calls gone.Cancel at once when the connection's peer leaves (its
// FIN, or a reset), from now until w.Stop, which must come before the
// connection is closed. Only the first call counts until Stop. A peer that
// left already is noticed when the socket is registered, WatchAfter to
// 2*WatchAfter after Watch.
func (x *Conn) Watch(w *Watch, gone Canceler) {
	s := &w.w
	if s.conn != nil {
		return
	}
	wt := getWatcher()
	if wt == nil {
		return
	}
	wt.mu.Lock()
	if wt.dead {
		wt.mu.Unlock()
		return
	}
	s.conn, s.gone = x, gone
	if !wt.armed {
		// A tick period begins now: this watch is a full period old at
		// its end, as one that began with the period before.
		wt.armed = true
		wt.ticks++
		wt.file.SetReadDeadline(time.Now().Add(WatchAfter))
		s.since = wt.ticks - 1
	} else {
		s.since = wt.ticks
	}
	wt.push(w)
	wt.mu.Unlock()
}

// Stop ends the watch: gone is not called after Stop returns.
func (w *Watch) Stop() {
	s := &w.w
	if s.conn == nil {
		return
	}
	wt := theWatcher
	wt.mu.Lock()
	if s.listed {
		wt.unlink(w)
	}
	registered := s.registered
	if registered {
		wt.slots[s.slot].w = nil
		wt.free = append(wt.free, s.slot)
	}
	wt.mu.Unlock()
	if registered {
		if s.del == nil {
			s.del = wt.delFD
		}
		s.conn.rc.Control(s.del) // fails when closed: the kernel dropped it then
	}
	s.conn, s.gone, s.registered, s.fired = nil, nil, false, false
}

func (wt *watcher) delFD(fd uintptr) {
	syscall.EpollCtl(wt.ep, syscall.EPOLL_CTL_DEL, int(fd), nil)
}

func (wt *watcher) addFD(fd uintptr) {
	wt.addErr = syscall.EpollCtl(wt.ep, syscall.EPOLL_CTL_ADD, int(fd), &wt.addEv)
}

// push appends w to the pending list; under mu.
func (wt *watcher) push(w *Watch) {
	s := &w.w
	s.prev, s.next, s.listed = wt.tail, nil, true
	if wt.tail != nil {
		wt.tail.w.next = w
	} else {
		wt.head = w
	}
	wt.tail = w
}

// unlink takes w off the pending list; under mu.
func (wt *watcher) unlink(w *Watch) {
	s := &w.w
	if s.prev != nil {
		s.prev.w.next = s.next
	} else {
		wt.head = s.next
	}
	if s.next != nil {
		s.next.w.prev = s.prev
	} else {
		wt.tail = s.prev
	}
	s.prev, s.next, s.listed = nil, nil, false
}

// run is the watcher's goroutine: it waits for its sockets and its clock.
func (wt *watcher) run() {
	for {
		err := wt.rc.Read(wt.step)
		wt.mu.Lock()
		wt.fire()
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				// Not seen: the poller failed the epoll fd. Nothing is
				// watched from now on; writes still notice a peer gone.
				wt.dead = true
				wt.mu.Unlock()
				return
			}
			wt.tick()
		}
		wt.mu.Unlock()
	}
}

// wait is run's step: it fetches the ready events without waiting, and asks
// the poller to wait while there are none.
func (wt *watcher) wait(fd uintptr) bool {
	wt.n = fetch(fd, wt.events[:])
	return wt.n > 0
}

// fire cancels the waits whose peer left; under mu.
func (wt *watcher) fire() {
	for _, ev := range wt.events[:wt.n] {
		i := ev.Fd
		if i < 0 || int(i) >= len(wt.slots) {
			continue
		}
		sl := &wt.slots[i]
		if sl.w == nil || sl.gen != uint32(ev.Pad) || sl.w.w.fired {
			continue // a watch that Stop ended since
		}
		sl.w.w.fired = true
		sl.w.w.gone.Cancel()
	}
	wt.n = 0
}

// tick registers the watches that lasted a tick period, and sets the next
// tick while others wait; under mu.
func (wt *watcher) tick() {
	wt.ticks++
	for w := wt.head; w != nil && w.w.since+2 <= wt.ticks; w = wt.head {
		wt.unlink(w)
		wt.register(w)
	}
	if wt.head == nil {
		wt.armed = false
		wt.file.SetReadDeadline(time.Time{})
		return
	}
	wt.file.SetReadDeadline(time.Now().Add(WatchAfter))
}

// register adds w's socket to the epoll set; under mu. A connection closed
// meanwhile is not watched.
func (wt *watcher) register(w *Watch) {
	var i int32
	if n := len(wt.free); n > 0 {
		i, wt.free = wt.free[n-1], wt.free[:n-1]
	} else {
		i = int32(len(wt.slots))
		wt.slots = append(wt.slots, watchSlot{})
	}
	sl := &wt.slots[i]
	sl.gen++
	wt.addEv = syscall.EpollEvent{Events: syscall.EPOLLRDHUP | syscall.EPOLLONESHOT, Fd: i, Pad: int32(sl.gen)}
	wt.addErr = nil
	if err := w.w.conn.rc.Control(wt.add); err != nil || wt.addErr != nil {
		wt.free = append(wt.free, i)
		return
	}
	sl.w = w
	w.w.registered, w.w.slot = true, i
	registrations.Add(1)
}
