package proxy

import (
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/store"
)

// TestKeysRuntimeBudgetAcrossNodes: a budget set through the admin API of one gateway is in
// force on another once that node reads the change from the shared Redis store, both spend
// the same shared counters, and a raise through the API admits the key on both again with
// what was spent kept.
func TestKeysRuntimeBudgetAcrossNodes(t *testing.T) {
	addrs := limitCluster.Addrs(t)
	cfg, sims := limitFixture(t, func(y string) string { return withRuntimeBudgets(y) + "rate_limit: {timeout: 10s}\n" })
	prefix := "rtbudget-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	var gws []*keysEnv
	for range 2 {
		rs, err := store.OpenRedis(store.RedisOptions{Addrs: addrs, KeyPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		e := &keysEnv{testEnv: serveNode(t, cfg, Options{Store: rs, Keys: rs, Limits: redisLimits(rs),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, sims)}
		e.serveAdmin()
		gws = append(gws, e)
	}
	a, b := gws[0], gws[1]
	if !a.gw.spend.ledger.Shared() {
		t.Fatal("the ledger is not shared")
	}
	// $0.01: room for a call on each node while the other's settlement is still on its
	// way (a reservation is 1.43e9 pico-USD), so both nodes spend before the refusals.
	secret := a.adminJSON("POST", "/admin/v1/keys", `{"id":"rt-x","budget":{"usd":"0.01"}}`, 201)["key"].(string)
	if _, err := b.gw.Keys().Refresh(); err != nil { // what its watch of the store does
		t.Fatal(err)
	}
	if !b.gw.spend.ledger.Applies("rt-x") {
		t.Fatal("the other node does not apply the key's budget after reading its change")
	}
	// Calls alternate between the nodes until each has refused one in a row: the shared
	// counters are spent by both.
	admitted, refusals := [2]int{}, 0
	for i := 0; i < 1000 && refusals < 2; i++ {
		status, _, body := gws[i%2].do("POST", chatPath, bearer(secret), runtimeBudgetBody)
		switch {
		case status == 200:
			admitted[i%2]++
			refusals = 0
		case status == 429 && strings.Contains(string(body), `"code":"insufficient_quota"`):
			refusals++
		default:
			t.Fatalf("call %d: %d %s", i, status, body)
		}
	}
	if refusals < 2 || admitted[0] == 0 || admitted[1] == 0 {
		t.Fatalf("admitted %v, then %d refusals in a row: want both nodes to spend, then refuse", admitted, refusals)
	}
	t.Logf("admitted by node: %v", admitted)
	a.adminJSON("PATCH", "/admin/v1/keys/rt-x", `{"budget":{"usd":"5"}}`, 200)
	if _, err := b.gw.Keys().Refresh(); err != nil {
		t.Fatal(err)
	}
	for i, g := range gws {
		if status, _, body := g.do("POST", chatPath, bearer(secret), runtimeBudgetBody); status != 200 {
			t.Fatalf("node %d after the raise: %d %s", i, status, body)
		}
	}
	found := false
	for _, ln := range b.gw.spend.ledger.Report() {
		if ln.Own && ln.Name == "rt-x" {
			found = true
			if ln.Limit != 5e12 || ln.Spent == 0 {
				t.Fatalf("after the raise: %+v: want the new cap and the spend kept", ln)
			}
		}
	}
	if !found {
		t.Fatal("the other node has no line of the key's budget")
	}
}
