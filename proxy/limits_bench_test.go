package proxy

import (
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/store"
)

// benchLimits are limits that a benchmark never reaches: every call is
// decided, none refused.
var benchLimits = config.KeyLimits{RequestsPerMinute: 100_000_000, TokensPerMinute: 1_000_000_000, Concurrent: 1_000_000,
	Models: map[string]config.RateLimits{"m": {RequestsPerMinute: 100_000_000}}}

// withBenchLimits puts benchLimits on the hot bench's key.
func withBenchLimits(tb testing.TB, h *hotBench) *hotBench {
	tb.Helper()
	cfg := *h.gw.Config()
	cfg.Keys = []config.Key{{ID: "bench", Key: "bench-key", Limits: &benchLimits}}
	cfg.RateLimit.Timeout = config.Duration(10 * time.Second) // no decision by the fail mode
	if err := h.gw.Reload(&cfg); err != nil {
		tb.Fatal(err)
	}
	return h
}

// BenchmarkRateLimits is BenchmarkProxiedRequest with the key's limits off,
// kept in memory, and kept in the test Redis Cluster (with local allowances).
func BenchmarkRateLimits(b *testing.B) {
	b.Run("off", func(b *testing.B) {
		newHotBench(b).proxied(b, hotBody)
	})
	b.Run("memory", func(b *testing.B) {
		withBenchLimits(b, newHotBench(b)).proxied(b, hotBody)
	})
	b.Run("redis", func(b *testing.B) {
		h := withBenchLimits(b, redisHotBench(b, "rlbench-"))
		before := backendCallsOf(h.gw)
		h.proxied(b, hotBody)
		b.ReportMetric(float64(backendCallsOf(h.gw)-before)/float64(b.N), "redis-calls/op")
		if open, closed := h.gw.limits.BackendFailures(); open+closed != 0 {
			b.Fatalf("%d decisions made without Redis", open+closed)
		}
	})
}

func backendCallsOf(gw *Gateway) int {
	return backendCalls([]*testEnv{{gw: gw}})
}

// BenchmarkRateLimitedStream is BenchmarkProxiedStream with the key's limits
// off and kept in memory: with a tokens limit, the request is edited to ask
// for the stream's usage and the usage chunk is taken out of the answer.
func BenchmarkRateLimitedStream(b *testing.B) {
	stream := []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	b.Run("off", func(b *testing.B) {
		newHotBench(b).proxied(b, stream)
	})
	b.Run("memory", func(b *testing.B) {
		withBenchLimits(b, newHotBench(b)).proxied(b, stream)
	})
}

// redisHotBench is the hot bench on a store in the test Redis Cluster, its
// keys under a fresh prefix that starts with prefix, the rate limits and
// budgets kept there as cmd/gateway wires them.
func redisHotBench(b *testing.B, prefix string) *hotBench {
	rs, err := store.OpenRedis(store.RedisOptions{Addrs: limitCluster.Addrs(b), KeyPrefix: prefix + time.Now().Format("150405.000000") + "-"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rs.Close() })
	return newHotBenchWith(b, Options{Store: rs, Limits: redisLimits(rs)})
}
