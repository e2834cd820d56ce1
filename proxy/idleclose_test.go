package proxy

import (
	"net"
	"sync"
	"testing"
	"time"
)

// connsListener keeps the connections it accepts, so that a test can close
// them from the upstream's side.
type connsListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *connsListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}

// closeAll closes every connection accepted so far, as a provider closes
// its idle ones: a FIN each (nothing is left unread on an idle one). It
// returns how many it closed.
func (l *connsListener) closeAll() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(l.conns)
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
	return n
}

// idleLook is longer than the idle time after which the gateway looks at a
// pooled connection before writing on it (a second, see upstream's
// probeAfter).
const idleLook = 1500 * time.Millisecond

// With a warm pool whose every connection the upstream closed cleanly after
// it had been idle for longer than the gateway waits before it looks, a call
// goes on a new connection: the upstream reads it once, and it is not a
// stale call sent again. So a Responses create, which is never sent again,
// succeeds as a chat call does. The connections found closed are counted.
// Before, the create was written on a closed connection and answered 502;
// the chat call was sent again.
func TestIdleClosedPoolIsReplaced(t *testing.T) {
	const warm = 4
	for _, tc := range []struct {
		name string
		call staleCall
	}{{"responses create", staleCreate}, {"chat", staleChat}} {
		t.Run(tc.name, func(t *testing.T) {
			u := newResetUpstream(t)
			e := staleEnv(t, u, nil)
			u.warmPool(t, e, "d3-beta", warm, staleChat)
			if n := u.ln.(*connsListener).closeAll(); n != warm {
				t.Fatalf("the upstream closed %d connections, want %d", n, warm)
			}
			// The warm calls' last reads are at least this long ago: each
			// pooled connection is looked at.
			time.Sleep(idleLook)
			u.requests.Store(0)
			before := e.scrape()
			status, _, body := e.do(tc.call.method, tc.call.path, tc.call.headers, tc.call.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, body)
			}
			if got := u.requests.Load(); got != 1 {
				t.Errorf("the upstream saw %d requests, want 1", got)
			}
			dep := e.gw.state.Load().deps["d3-beta"]
			if got := dep.Stats.StaleRetries(); got != 0 {
				t.Errorf("%d stale-connection resends, want none", got)
			}
			if got := dep.Stats.IdleClosed(); got != warm {
				t.Errorf("%d connections found closed, want %d", got, warm)
			}
			if got := dep.Conns(); got != 1 {
				t.Errorf("%d connections after the call, want the one dialled for it", got)
			}
			const series = `gateway_upstream_idle_closed_total{deployment="d3-beta"}`
			if got := e.scrape()[series] - before[series]; got != warm {
				t.Errorf("%s rose by %v, want %d", series, got, warm)
			}
		})
	}
}
