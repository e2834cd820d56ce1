//go:build !race

package ratelimit

import (
	"testing"

	"github.com/modelgate/gateway/proxy/config"
)

func TestAdmitDoesNotAllocate(t *testing.T) {
	l, _ := newLimiter(t, keyWith("a", config.KeyLimits{RequestsPerMinute: 1e8, TokensPerMinute: 1e9, Concurrent: 10,
		Models: map[string]config.RateLimits{"m": {RequestsPerMinute: 1e8}}}))
	var tk Ticket
	n := testing.AllocsPerRun(1000, func() {
		if !l.Admit("a", "m", &tk).Admitted() {
			t.Fatal("refused")
		}
		l.Done(&tk, 10)
	})
	if n != 0 {
		t.Fatalf("Admit+Done: %v allocations, want 0", n)
	}
}
