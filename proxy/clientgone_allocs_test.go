//go:build !race

package proxy

import (
	"net"
	"testing"

	"github.com/valyala/fasthttp"
)

// A chat completion from a client over loopback TCP, whose connection the
// gateway wraps and watches while the call waits on its upstream, allocates
// nothing in steady state, in the whole process: a watch that ends within
// rawio.WatchAfter costs two short critical sections and nothing else.
func TestWatchedRequestAllocatesNothing(t *testing.T) {
	h := newHotBench(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := h.gw.NewServer()
	go srv.Serve(h.gw.Listener(ln))
	t.Cleanup(func() { srv.Shutdown() })
	h.client = &fasthttp.HostClient{Addr: ln.Addr().String(), MaxConns: 1}
	req, resp := h.warmRequest(t, hotBody)
	if allocs := testing.AllocsPerRun(500, func() { h.do(t, req, resp) }); allocs != 0 {
		t.Fatalf("%v allocations per proxied request", allocs)
	}
}
