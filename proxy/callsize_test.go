package proxy

import (
	"testing"
	"unsafe"
)

// A held stream keeps its call for the stream's whole life, and the
// allocator rounds a call up to its size class: past the 2,048-byte class
// the next is 2,304, 256 bytes more of live heap per held stream (up to
// twice that resident, as the heap grows to about twice the live heap
// between collections). Go's allocator puts an 8-byte header of the type
// before an object with pointers larger than 512 bytes, so the call itself
// must leave those 8 bytes of its class. What only some calls use (a
// Responses stream's scan and record, a relay's read-ahead, a budget's
// reservation) is pooled apart, and the call's flags sit side by side; a
// field that pushes call past its class belongs apart too.
func TestCallFitsItsSizeClass(t *testing.T) {
	const sizeClass, mallocHeader = 2048, 8
	if n := unsafe.Sizeof(call{}); n+mallocHeader > sizeClass {
		t.Fatalf("call is %d bytes, with the allocator's header past the %d-byte size class: every held stream pays the next class (2,304 bytes)", n, sizeClass)
	}
}
