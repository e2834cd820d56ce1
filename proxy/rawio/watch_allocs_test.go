//go:build linux && !race

package rawio

import "testing"

// A watch that ends before its registration allocates nothing.
func TestWatchNoAllocations(t *testing.T) {
	x, _, _ := tcpPair(t)
	c := make(canceled, 1)
	var w Watch
	x.Watch(&w, c) // the watcher starts
	w.Stop()
	if n := testing.AllocsPerRun(1000, func() {
		x.Watch(&w, c)
		w.Stop()
	}); n != 0 {
		t.Fatalf("%v allocations per Watch and Stop", n)
	}
}
