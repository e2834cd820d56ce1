package proxy

import (
	"context"
	"strconv"
	"testing"

	"github.com/modelgate/gateway/proxy/trace/tracetest"
)

// TestTraceCarriesCost: the call span of a priced model carries
// gateway.cost_usd, the cost the access line and the budgets count; an
// unpriced model's call span has none.
func TestTraceCarriesCost(t *testing.T) {
	r := tracetest.NewReceiver()
	defer r.Close()
	traced := func(y string) string {
		return y + `tracing: {endpoint: "` + r.URL() + `", service_name: gw-cost, timeout: 2s}` + "\n"
	}
	priced, access := newOpsEnv(t, func(y string) string { return traced(withBudget("{usd: 100, period: month}")(y)) }, Options{})
	line, server := tracedChat(t, priced, access, r, "cost-1")
	logged, _ := line["cost_usd"].(string)
	want, err := strconv.ParseFloat(logged, 64)
	if err != nil || want <= 0 {
		t.Fatalf("access line cost_usd %q: want a positive cost", logged)
	}
	got, err := strconv.ParseFloat(server.Attrs["gateway.cost_usd"], 64)
	if err != nil || got != want {
		t.Fatalf("gateway.cost_usd = %q, want %v as the access line (all: %v)", server.Attrs["gateway.cost_usd"], want, server.Attrs)
	}
	unpriced, access := newOpsEnv(t, traced, Options{})
	if _, server := tracedChat(t, unpriced, access, r, "cost-2"); server.Attrs["gateway.cost_usd"] != "" {
		t.Fatalf("an unpriced model's call has gateway.cost_usd %q", server.Attrs["gateway.cost_usd"])
	}
}

// tracedChat makes a chat call with request id id and returns its access
// line and its server span, once exported to r.
func tracedChat(t *testing.T, e *testEnv, access *syncBuffer, r *tracetest.Receiver, id string) (map[string]any, tracetest.Span) {
	t.Helper()
	if status, _, body := e.do("POST", chatPath, withHeaders(keyA, "x-request-id", id), chatBody("")); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	line := accessLine(t, access, id)
	tid, _ := line["trace_id"].(string)
	var server tracetest.Span
	eventually(t, "the call's server span exported", func() bool {
		e.gw.FlushTraces(context.Background())
		for _, s := range r.Spans() {
			if s.TraceID == tid && s.Kind == "server" {
				server = s
				return true
			}
		}
		return false
	})
	return line, server
}
