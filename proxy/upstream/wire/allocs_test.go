//go:build !race

package wire

import "testing"

// Looking at an idle live connection allocates nothing, and answers that it
// can carry a request.
func TestClosedWhileIdleAllocatesNothing(t *testing.T) {
	setProbeAfter(t, 0)
	c := idleConn(t)
	allocs := testing.AllocsPerRun(1000, func() {
		if c.closedWhileIdle(now()) {
			t.Fatal("a live connection found closed")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per look", allocs)
	}
}
