package proxy

import (
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/config"
)

// withBenchBudget prices the hot bench's models and gives its key a budget
// of its own and a shared one that a benchmark never spends.
func withBenchBudget(tb testing.TB, h *hotBench) *hotBench {
	tb.Helper()
	cfg := *h.gw.Config()
	pricing := &config.Pricing{Input: 1_000_000, Output: 2_000_000} // $0.000001 and $0.000002 per million tokens
	cfg.Models = append([]config.Model(nil), cfg.Models...)
	for i := range cfg.Models {
		cfg.Models[i].Pricing = pricing
	}
	cfg.Budgets = []config.Budget{{Name: "team", USD: 1_000_000 * config.PicoPerUSD, Period: "month"}}
	cfg.Keys = []config.Key{{ID: "bench", Key: "bench-key", Budgets: []string{"team"},
		Budget: &config.KeyBudget{USD: 1_000_000 * config.PicoPerUSD, Period: "day"}}}
	cfg.RateLimit.Timeout = config.Duration(10 * time.Second) // no decision by the fail mode
	if err := h.gw.Reload(&cfg); err != nil {
		tb.Fatal(err)
	}
	return h
}

// BenchmarkBudgets is BenchmarkProxiedRequest with the key's budgets off,
// kept in memory, and kept in the test Redis Cluster (a reservation and a
// settlement, each one round trip).
func BenchmarkBudgets(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		newHotBench(b).proxied(b, hotBody)
	})
	b.Run("memory", func(b *testing.B) {
		withBenchBudget(b, newHotBench(b)).proxied(b, hotBody)
	})
	b.Run("redis", func(b *testing.B) {
		h := withBenchBudget(b, redisHotBench(b, "spendbench-"))
		before := h.gw.spend.ledger.RoundTrips()
		h.proxied(b, hotBody)
		b.ReportMetric(float64(h.gw.spend.ledger.RoundTrips()-before)/float64(b.N), "redis-calls/op")
		h.gw.spend.ledger.Flush()
		if lines := h.gw.spend.ledger.Report(); len(lines) != 2 || lines[0].Spent == 0 {
			b.Fatalf("nothing spent: %+v", lines)
		}
	})
}
