//go:build !race

package upstream

import (
	"testing"
	"time"

	"github.com/modelgate/gateway/affinity"
)

// Looking at an idle live connection allocates nothing, and answers that it
// can carry a request.
func TestClosedWhileIdleAllocatesNothing(t *testing.T) {
	setProbeAfter(t, 0)
	c := idleConn(t)
	allocs := testing.AllocsPerRun(1000, func() {
		if c.closedWhileIdle() {
			t.Fatal("a live connection found closed")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per look", allocs)
	}
}

// TestPickZeroAllocs: a pick allocates nothing, with or without a session,
// with peak-EWMA costs, loads at the bound and a deployment excluded.
func TestPickZeroAllocs(t *testing.T) {
	r := newTestRoute(t, 4, 1.25, nil)
	now := monoNow()
	for i, d := range r.deps {
		d.ttfb.observe(time.Duration(i+1)*time.Millisecond, now)
		d.inflight.Store(int64(10 * i))
	}
	r.deps[3].ExcludeFor(time.Hour)
	key := affinity.Hash([]byte("session"))
	var sink *Deployment
	f := func(name string, fn func()) {
		t.Helper()
		if n := testing.AllocsPerRun(1000, fn); n != 0 {
			t.Fatalf("%s: %v allocations per run, want 0", name, n)
		}
	}
	f("without a session", func() { _, sink = r.Pick(0, false, 0) })
	f("with a session", func() { _, sink = r.Pick(key, true, 0) })
	r.deps[r.ring.PickHash(key, 0)].inflight.Store(1000) // the session's first choice at its bound
	f("with a session moved", func() { _, sink = r.Pick(key, true, 0) })
	f("retry", func() { _, sink = r.Pick(key, true, affinity.Set(0).With(0)) })
	_ = sink
}
