//go:build !race

package proxy

import (
	"testing"

	"github.com/valyala/fasthttp"
)

// A proxied request to deployments that know the model by their own name
// allocates nothing either: the name is spliced into a pooled buffer.
func TestRenamedRequestAllocatesNothing(t *testing.T) {
	h := newHotBench(t)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	hotRequest(req, []byte(`{"model":"n","session_id":"session-0001","messages":[{"role":"user","content":"Say hello."}]}`))
	for range 100 {
		h.do(t, req, resp)
	}
	if allocs := testing.AllocsPerRun(500, func() { h.do(t, req, resp) }); allocs != 0 {
		t.Fatalf("%v allocations per proxied request", allocs)
	}
}
