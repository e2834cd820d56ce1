//go:build !race

package upstream

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/affinity"
	"github.com/modelgate/gateway/proxy/family"
)

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

// Relaying a stream allocates nothing per event, with its id and model read
// (a traced call) as without: the scanner is pooled and keeps the two values
// in itself.
func TestStreamIdentityAllocatesNothing(t *testing.T) {
	chunk := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-x","choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\n"
	stream := []byte(strings.Repeat(chunk, 200) + "data: [DONE]\n\n")
	var r Relay
	body := bytes.NewReader(nil)
	buf := make([]byte, 1024)
	dep := &Deployment{}
	relay := func(traced bool) func() {
		return func() {
			r.Reset()
			body.Reset(stream)
			r.dep, r.stream, r.sse, r.fam = dep, body, true, family.Beta
			if traced {
				r.ReadIdentity()
				r.beginIdentity(family.Beta, false)
			}
			for {
				if _, err := r.Read(buf); err != nil {
					break
				}
			}
		}
	}
	for _, traced := range []bool{false, true} {
		if n := testing.AllocsPerRun(100, relay(traced)); n != 0 {
			t.Fatalf("traced %v: %v allocations per relayed stream", traced, n)
		}
	}
	if id, model := r.Identity(); string(id) != "chatcmpl-1" || string(model) != "gpt-x" {
		t.Fatalf("id %q model %q", id, model)
	}
}
