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
