package proxy

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/modelgate/gateway/bench/sim"
)

// An upstream that closes every connection right after its answer, without
// saying so, leaves a dead connection in the pool each time: every call after
// the first lands on it. Each is sent again on a fresh connection, so the
// client sees no error and the upstream sees each request once. No timing is
// involved: the connection is dead before the next call begins.
func TestStaleKeepAliveIsSentAgain(t *testing.T) {
	e := newEnv(t, func(y string) string {
		// idle connections are kept long enough that none is dropped first
		return strings.Replace(y, "idle: 10s}", "idle: 10s, idle_conn: 10m}", 1)
	})
	e.sim("d1").SetFault(sim.Fault{DropIdle: true})
	client := e.openai(keyA)
	const calls = 20
	for i := range calls {
		p := chatParams("plain-model")
		stream := i%2 == 1
		if !stream {
			if _, err := client.Chat.Completions.New(context.Background(), p); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
			continue
		}
		s := client.Chat.Completions.NewStreaming(context.Background(), p)
		for s.Next() {
		}
		if err := s.Err(); err != nil {
			t.Fatalf("call %d (stream): %v", i, err)
		}
	}
	if got := len(e.sim("d1").Requests()); got != calls {
		t.Fatalf("the upstream saw %d requests, want %d", got, calls)
	}
	// Every call after the first finds the connection the last one left,
	// unless its SDK started it before the gateway had read the end of the
	// previous stream (an SDK stops at [DONE]): then it dials afresh. A plain
	// answer lets its connection go before the client has it, so each stream
	// (every odd call) surely finds a stale one. A call that comes over a
	// second after the last finds the dead connection before writing on it
	// instead (a loaded machine may pause that long): it is not sent again.
	dep := e.gw.state.Load().deps["d1-beta"]
	if got := dep.Stats.StaleRetries() + dep.Stats.IdleClosed(); got < calls/2 || got > calls-1 {
		t.Fatalf("%d calls sent again, want %d, and at least the %d streams", got, calls-1, calls/2)
	}
}

// A fresh connection that fails before the answer is not sent again: the
// upstream may have acted on the request.
func TestFreshConnectionFailureIsNotSentAgain(t *testing.T) {
	e := newEnv(t, nil)
	e.sim("d1").SetFault(sim.Fault{Reset: true})
	_, err := e.openai(keyA).Chat.Completions.New(context.Background(), chatParams("plain-model"),
		option.WithHeader("x-session-id", "s"))
	if err == nil {
		t.Fatal("want an error")
	}
	if got := len(e.sim("d1").Requests()); got != 1 {
		t.Fatalf("the upstream saw %d requests, want 1", got)
	}
}
