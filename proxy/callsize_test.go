package proxy

import (
	"testing"
	"unsafe"
)

// A held stream keeps its call for the stream's whole life, and the
// allocator rounds a call up to its size class: past 2,304 bytes the next
// class is 2,688, 384 bytes more of live heap per held stream (about twice
// that resident, as the heap grows to twice the live heap between
// collections). What only some calls use (a Responses stream's scan and
// record, a relay's read-ahead) is pooled apart; a field that pushes call
// past its class belongs there too.
func TestCallFitsItsSizeClass(t *testing.T) {
	const sizeClass = 2304
	if n := unsafe.Sizeof(call{}); n > sizeClass {
		t.Fatalf("call is %d bytes, past the %d-byte size class: every held stream pays the next class (2,688 bytes)", n, sizeClass)
	}
}
