package ratelimit

import (
	"testing"

	"github.com/modelgate/gateway/proxy/config"
)

// BenchmarkAdmit is one decision and its settlement, in memory, from parallel
// callers: of one key (one bucket's mutex shared by all) and of a key without
// limits (the lookup alone).
func BenchmarkAdmit(b *testing.B) {
	for _, key := range []string{"limited", "unlimited"} {
		b.Run(key, func(b *testing.B) {
			l, _ := newLimiter(b, keyWith("limited", config.KeyLimits{RequestsPerMinute: 1e8, TokensPerMinute: 1e9, Concurrent: 1e6,
				Models: map[string]config.RateLimits{"m": {RequestsPerMinute: 1e8}}}))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var t Ticket
				for pb.Next() {
					if !l.Admit(key, "m", &t).Admitted() {
						b.Fatal("refused")
					}
					l.Done(&t, 40)
				}
			})
		})
	}
}
