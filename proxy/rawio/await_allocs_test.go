//go:build !race

package rawio

import "testing"

// A wait allocates nothing (the race detector's build allocates in it).
func TestAwaitReadableNoAllocations(t *testing.T) {
	x, _, peer := tcpPair(t)
	buf := make([]byte, 16)
	allocs := testing.AllocsPerRun(100, func() {
		peer.Write([]byte("x"))
		if err := x.AwaitReadable(); err != nil {
			t.Fatal(err)
		}
		x.Read(buf)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per wait", allocs)
	}
}
