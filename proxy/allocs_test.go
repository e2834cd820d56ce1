//go:build !race

package proxy

import (
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/affinity"
	"github.com/modelgate/gateway/parse"
	"github.com/modelgate/gateway/proxy/family"
)

// The routing hot path allocates nothing: peek the body, hash the session
// key, pick a deployment, splice session_id out.
func TestPeekPickSpliceAllocateNothing(t *testing.T) {
	h := newHotBench(t)
	r := h.gw.state.Load().models["m"].routes[family.Beta]
	var f parse.Fields
	dst := make([]byte, 0, 1024)
	allocs := testing.AllocsPerRun(1000, func() {
		if err := parse.Peek(hotBody, &f); err != nil {
			t.Fatal(err)
		}
		_ = affinity.Hash(f.SessionID)
		if _, d := r.Pick(f.SessionID, 0); d == nil {
			t.Fatal("no deployment")
		}
		if _, d := r.Pick(nil, 0); d == nil {
			t.Fatal("no deployment")
		}
		dst = parse.AppendWithoutSessionID(dst[:0], hotBody, &f)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per peek+pick+splice", allocs)
	}
}

// A whole proxied chat completion allocates nothing in steady state, in the
// whole process: client, gateway and upstream.
func TestProxiedRequestAllocatesNothing(t *testing.T) {
	h := newHotBench(t)
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	hotRequest(req, hotBody)
	for i := 0; i < 100; i++ {
		h.do(t, req, resp)
	}
	allocs := testing.AllocsPerRun(500, func() { h.do(t, req, resp) })
	if allocs != 0 {
		t.Fatalf("%v allocations per proxied request", allocs)
	}
}
