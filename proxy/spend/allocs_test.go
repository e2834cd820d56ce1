//go:build !race

package spend

import (
	"testing"
	"time"

	"github.com/modelgate/gateway/proxy/config"
)

func TestReserveSettleAllocs(t *testing.T) {
	clk := newClock(time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC))
	keys := []config.Key{{ID: "a", Budget: &config.KeyBudget{USD: config.USD(10 * usd), Period: "month"}, Budgets: []string{"team"}}}
	l, _ := newLedger(t, clk, keys, []config.Budget{{Name: "team", USD: config.USD(15 * usd), Period: "day"}})
	var h Hold
	if n := testing.AllocsPerRun(1000, func() {
		l.Reserve("a", 1000, &h)
		l.Settle(&h, 900)
	}); n != 0 {
		t.Fatalf("%v allocations per reserve and settle", n)
	}
}
