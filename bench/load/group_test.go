package load

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// The groups count the calls by the answer header's value, only those sent
// after the shift: every call sent after it is answered by "slow".
func TestRunGroupsAfterShift(t *testing.T) {
	var shifted atomic.Bool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if shifted.Load() {
			ctx.Response.Header.Set("x-deployment", "slow")
		} else {
			ctx.Response.Header.Set("x-deployment", "fast")
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	defer func() { _ = srv.Shutdown() }()

	spec := &Spec{URL: "http://" + ln.Addr().String() + "/", GroupBy: "x-deployment"}
	calls := 0
	opts := Options{Connections: 2, Duration: 400 * time.Millisecond, ShiftAt: 100 * time.Millisecond,
		Shift: func() { calls++; shifted.Store(true) }}
	r, err := Run(context.Background(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("shift called %d times", calls)
	}
	if len(r.Groups) != 1 || r.Groups["slow"] == nil || r.Groups["slow"].OK == 0 || r.Groups["slow"].OK >= r.OK {
		t.Fatalf("groups %+v of %d calls", r.Groups, r.OK)
	}
	if g := r.Groups["slow"]; g.TTFB.Count != int64(g.OK) {
		t.Fatalf("TTFB of %d calls, %d counted", g.TTFB.Count, g.OK)
	}
	m := Merge(r, r)
	if m.Groups["slow"].OK != 2*r.Groups["slow"].OK {
		t.Fatalf("merged %d, want %d", m.Groups["slow"].OK, 2*r.Groups["slow"].OK)
	}

	// Without a shift, every call counts.
	r, err = Run(context.Background(), spec, Options{Connections: 1, MaxRequests: 10, Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if r.Groups["slow"] == nil || r.Groups["slow"].OK != 10 {
		t.Fatalf("groups %+v", r.Groups)
	}
}
