// Package netfault makes the network faults of tests: listeners whose accepts
// fail, with the errors the kernel's accept gives. Not for production use.
package netfault

import (
	"net"
	"os"
	"sync"
	"syscall"
)

// Listener fails its first N accepts with Err, then accepts from the
// Listener it wraps. Safe for concurrent use.
type Listener struct {
	net.Listener
	N   int
	Err error

	mu sync.Mutex
}

func (l *Listener) Accept() (net.Conn, error) {
	l.mu.Lock()
	fail := l.N > 0
	l.N--
	l.mu.Unlock()
	if fail {
		return nil, l.Err
	}
	return l.Listener.Accept()
}

// AcceptError is what net.TCPListener.Accept returns for errno.
func AcceptError(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}
