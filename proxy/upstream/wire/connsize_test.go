package wire

import (
	"testing"
	"unsafe"
)

// Every upstream connection has its deadlineConn for its life, a held
// stream's included, and the allocator rounds it up to its size class:
// past 288 bytes the next class is 320. Its flags sit side by side for that.
func TestDeadlineConnFitsItsSizeClass(t *testing.T) {
	const sizeClass = 288
	if n := unsafe.Sizeof(deadlineConn{}); n > sizeClass {
		t.Fatalf("deadlineConn is %d bytes, past the %d-byte size class: every upstream connection pays the next (320)", n, sizeClass)
	}
}
