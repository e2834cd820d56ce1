//go:build race

package rawio

import "syscall"

// Under the race detector the calls go through package syscall, whose Read
// and Write tell the detector what net.Conn's do: that a write to a socket
// happens before the read of what it wrote (a test that sets a field, then
// sends a request that a handler reads it for, relies on that), and which
// bytes of p each call touched. Only the system-call state differs from the
// build without it.
func sysRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return result(n, err)
}

func sysWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return result(n, err)
}

func result(n int, err error) (int, syscall.Errno) {
	if err != nil {
		e, _ := err.(syscall.Errno)
		return 0, e
	}
	return n, 0
}
