//go:build !race

package proxy

import (
	"bytes"
	"strings"
	"testing"
)

// With limits kept in memory, a whole proxied call still allocates nothing
// in steady state: the decision, the slot and the charge of its tokens.
func TestRateLimitedRequestAllocatesNothing(t *testing.T) {
	// A still clock: the debts the calls leave are not repaid while counted.
	h := withBenchLimits(t, newHotBenchWith(t, Options{Now: newManualClock().now}))
	req, resp := h.warmRequest(t, hotBody)
	if allocs := testing.AllocsPerRun(500, func() { h.do(t, req, resp) }); allocs != 0 {
		t.Fatalf("%v allocations per rate-limited request", allocs)
	}
	var m bytes.Buffer
	h.gw.WritePrometheus(&m)
	if !strings.Contains(m.String(), `gateway_ratelimit_used{key="bench",model="m",kind="requests"} 601`+"\n") {
		t.Fatalf("the calls were not counted against the limits:\n%s", m.String())
	}
}

// A chat stream on a key with a tokens limit, whose client did not ask for
// its usage, allocates no more than any stream (TestProxiedStreamAllocatesAtMostOne):
// the request is edited to ask for it in the call's buffer, and the usage
// chunk is taken out of the client's stream in the relay's.
func TestRateLimitedStreamAllocatesAtMostOne(t *testing.T) {
	h := withBenchLimits(t, newHotBenchWith(t, Options{Now: newManualClock().now}))
	req, resp := h.warmRequest(t, []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if !bytes.Contains(resp.Body(), []byte("data: [DONE]")) || bytes.Contains(resp.Body(), []byte(`"usage"`)) {
		t.Fatalf("not a stream without its usage chunk: %.300q", resp.Body())
	}
	if allocs := testing.AllocsPerRun(500, func() { h.do(t, req, resp) }); allocs > 1 {
		t.Fatalf("%v allocations per rate-limited stream", allocs)
	}
	// 100 + 501 streams of 11 tokens
	const want = `gateway_ratelimit_used{key="bench",model="",kind="tokens"} 6611` + "\n"
	waitFor(t, "the streams' tokens charged", func() bool {
		var m bytes.Buffer
		h.gw.WritePrometheus(&m)
		return bytes.Contains(m.Bytes(), []byte(want))
	})
}
