//go:build linux

package rawio

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// polledEpoll is an epoll instance of the gateway's own that is itself
// waited on through the runtime's poller (an epoll fd is readable while one
// of its sockets is ready): its goroutine parks as any goroutine does, with
// no thread blocked in epoll_wait and no system-call state, which would wake
// sysmon (see the package doc). The watcher and the parker each have one.
type polledEpoll struct {
	ep   int
	file *os.File // ep, in the runtime's poller
	rc   syscall.RawConn
}

// newPolledEpoll makes one, named name, or reports false when it cannot.
func newPolledEpoll(name string) (polledEpoll, bool) {
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return polledEpoll{}, false
	}
	if syscall.SetNonblock(ep, true) != nil {
		syscall.Close(ep)
		return polledEpoll{}, false
	}
	f := os.NewFile(uintptr(ep), name)
	rc, err := f.SyscallConn()
	if err != nil || f.SetReadDeadline(time.Time{}) != nil { // not in the runtime's poller
		f.Close()
		return polledEpoll{}, false
	}
	return polledEpoll{ep: ep, file: f, rc: rc}, true
}

// fetch is the step of a wait on the epoll fd (given to rc.Read): it
// fetches the ready events into events without waiting, and returns their
// count, 0 when there are none (the poller's wait is then asked for).
func fetch(fd uintptr, events []syscall.EpollEvent) int {
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, fd,
			uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
		switch {
		case e == syscall.EINTR:
			continue
		case e != 0:
			return 0
		}
		return int(n)
	}
}
