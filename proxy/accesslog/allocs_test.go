//go:build !race

package accesslog

import (
	"io"
	"testing"
)

// A line of either format allocates nothing in steady state.
func TestLineAllocatesNothing(t *testing.T) {
	attrs := callAttrs("req_1", "team-a", "gpt-4o\n\"x\"", "upstream: connection refused")
	for _, f := range []Format{Text, JSON} {
		l := New(io.Discard, f)
		allocs := testing.AllocsPerRun(500, func() {
			ln := l.Begin("request")
			addAll(ln, attrs)
			ln.End()
		})
		if allocs != 0 {
			t.Errorf("format %d: %v allocations per line", f, allocs)
		}
	}
}
