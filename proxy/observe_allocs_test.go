//go:build !race

package proxy

import (
	"io"
	"strings"
	"testing"

	"github.com/modelgate/gateway/affinity"
)

// With the access log off, ending a call allocates nothing once its counters
// exist: a served call, a rejection, a finished stream.
func TestFinishZeroAllocs(t *testing.T) {
	g, c := finishFixture(t, Options{})
	f := func(name string, edit func(c *call)) {
		t.Helper()
		edit(c)
		g.finish(c) // creates the counters
		if n := testing.AllocsPerRun(1000, func() { g.finish(c) }); n != 0 {
			t.Errorf("%s: %v allocations per finish", name, n)
		}
	}
	f("served", func(c *call) {})
	f("rejected", func(c *call) { c.model, c.dep, c.status, c.reason = nil, nil, 401, "auth_invalid" })
	f("stream", func(c *call) {
		c.model, c.dep = g.state.Load().models["chat-model"], g.state.Load().deps["d2-beta"]
		c.status, c.reason, c.sse, c.stream = 200, "", true, io.Reader(strings.NewReader(""))
	})
}

// Counting a pick, a session move included, allocates nothing.
func TestPickCountsWithoutAllocating(t *testing.T) {
	g, _ := finishFixture(t, Options{})
	r := g.state.Load().models["chat-model"].routes[Beta]
	key := []byte("session-x")
	first, _ := r.pick(key, 0)
	tried := affinity.Set(0).With(first)
	if n := testing.AllocsPerRun(1000, func() { r.pick(key, tried) }); n != 0 {
		t.Fatalf("%v allocations per pick", n)
	}
	moved := r.deps[1-first].stats.moves.Load()
	if moved < 1000 || r.deps[first].stats.moves.Load() != 0 {
		t.Fatalf("moves: %d on the second choice, %d on the first", moved, r.deps[first].stats.moves.Load())
	}
}
