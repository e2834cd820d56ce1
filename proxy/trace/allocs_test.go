//go:build !race

package trace

import "testing"

// TestOffAllocatesNothing: an off call's hooks allocate nothing.
func TestOffAllocatesNothing(t *testing.T) {
	var c Call
	a, o := &Attempt{}, &Outcome{}
	if n := testing.AllocsPerRun(100, func() {
		c.StartAttempt(a)
		c.Retry("x", nil)
		c.AppendContext(nil)
		c.End(o)
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
