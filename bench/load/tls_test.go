package load

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunOverTLS drives an https target kept alive and with a new
// connection (a handshake) per call: every call succeeds, and the target
// sees as many connections as the mode says.
func TestRunOverTLS(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	conf := srv.Client().Transport.(*http.Transport).TLSClientConfig

	f := func(closeEach bool, wantConns func(n int64) bool) {
		t.Helper()
		conns.Store(0)
		spec := &Spec{URL: srv.URL + "/x", TLS: conf, CloseEach: closeEach}
		r, err := Run(context.Background(), spec, Options{Connections: 2, MaxRequests: 40, Duration: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if r.OK != 40 || r.ErrorCount() != 0 {
			t.Fatalf("closeEach %v: %d ok of %d, errors %v", closeEach, r.OK, r.Requests, r.Errors)
		}
		if n := conns.Load(); !wantConns(n) {
			t.Fatalf("closeEach %v: %d connections", closeEach, n)
		}
	}
	f(false, func(n int64) bool { return n <= 2 })
	f(true, func(n int64) bool { return n == 40 })

	_, err := Run(context.Background(), &Spec{URL: srv.URL + "/x"}, Options{MaxRequests: 1})
	if !errors.Is(err, ErrNoTLSConfig) {
		t.Fatalf("https without TLS: error %v, want ErrNoTLSConfig", err)
	}
}
