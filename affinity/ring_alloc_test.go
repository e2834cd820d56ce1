//go:build !race

package affinity

import "testing"

func TestZeroAllocs(t *testing.T) {
	r := mustNew(t, testNames(16))
	key := []byte("0b6f3c1e-8a55-4f4e-9d2b-61a7c0a4e0f1")
	excluded := Set(0).With(3)
	loads := make([]int64, 16)
	load := func(i int) int64 { return loads[i] } // long-lived func value, built once
	var sink int
	var sinkHash uint64
	f := func(name string, fn func()) {
		t.Helper()
		if n := testing.AllocsPerRun(1000, fn); n != 0 {
			t.Fatalf("%s: %v allocations per run, want 0", name, n)
		}
	}
	f("Hash", func() { sinkHash = Hash(key) })
	f("Pick", func() { sink = r.Pick(key, excluded) })
	f("PickHash", func() { sink = r.PickHash(sinkHash, excluded) })
	f("PickLeast", func() { sink = r.PickLeast(sinkHash, excluded, load) })
	_ = sink
}
