//go:build !race

package proxy

import "testing"

// With budgets kept in memory, a whole proxied call allocates nothing in
// steady state: the estimate, the reservation, the settlement and the count
// of its spend.
func TestBudgetedRequestAllocatesNothing(t *testing.T) {
	h := withBenchBudget(t, newHotBenchWith(t, Options{Now: newManualClock().now}))
	req, resp := h.warmRequest(t, hotBody)
	if allocs := testing.AllocsPerRun(500, func() { h.do(t, req, resp) }); allocs != 0 {
		t.Fatalf("%v allocations per budgeted request", allocs)
	}
	lines := h.gw.spend.ledger.Report()
	if len(lines) != 2 || lines[0].Spent == 0 || lines[0].Spent != lines[1].Spent || lines[0].Reserved != 0 {
		t.Fatalf("the calls were not charged to both budgets: %+v", lines)
	}
}
