package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/ratelimit"
	"github.com/modelgate/gateway/store"
	"github.com/modelgate/gateway/store/redistest"
)

// The scope of a failure of the shared counters, the bound of a call's
// usage and the reload of a key's limits, on limiters of the real test
// cluster (limitCluster).

// sentClient is a Redis client that reports each command it is given on
// sent (when sent has room) before running it.
type sentClient struct {
	rueidis.Client
	sent chan string
}

func (c sentClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	select {
	case c.sent <- strings.Join(cmd.Commands(), " "):
	default:
	}
	return c.Client.Do(ctx, cmd)
}

// sharedLimiter returns a limiter of the cluster through c under prefix.
func sharedLimiter(c rueidis.Client, prefix string, clk *manualClock) *ratelimit.Limiter {
	return ratelimit.New(ratelimit.Options{Redis: func() rueidis.Client { return c }, KeyPrefix: prefix, Now: clk.now})
}

func freshPrefix() string { return "rlscope-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" }

// setLimits puts keys (id → limits) in force on l, with the fail mode open
// or closed and a round trip bounded by 10 s.
func setLimits(l *ratelimit.Limiter, keys map[string]config.KeyLimits, open bool) {
	setLimitsTimeout(l, keys, open, 10*time.Second)
}

func setLimitsTimeout(l *ratelimit.Limiter, keys map[string]config.KeyLimits, open bool, timeout time.Duration) {
	var ks []config.Key
	for id, lim := range keys {
		ks = append(ks, config.Key{ID: id, Key: id, Limits: &lim})
	}
	slices.SortFunc(ks, func(a, b config.Key) int { return strings.Compare(a.ID, b.ID) })
	l.Update(ks, config.RateLimit{FailOpen: &open, Timeout: config.Duration(timeout)})
}

// admitN makes n calls of key on l, each ended at once with tokens, and
// returns the verdicts' kinds.
func admitN(l *ratelimit.Limiter, key string, n int, tokens int64) []ratelimit.Kind {
	var ks []ratelimit.Kind
	for range n {
		var tk ratelimit.Ticket
		v := l.Admit(key, "", &tk)
		ks = append(ks, v.Kind)
		if v.Admitted() {
			l.Done(&tk, tokens)
		}
	}
	return ks
}

// kinds returns n1 times k1, then n2 times k2.
func kinds(k1 ratelimit.Kind, n1 int, k2 ratelimit.Kind, n2 int) []ratelimit.Kind {
	return append(slices.Repeat([]ratelimit.Kind{k1}, n1), slices.Repeat([]ratelimit.Kind{k2}, n2)...)
}

func wantKinds(t *testing.T, what string, got, want []ratelimit.Kind) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

// TestRateLimitFailureOfOneKey: while the script fails for one key (its
// Redis key holds a string: WRONGTYPE), that key alone decides by the fail
// mode, closed then open, and another key stays limited exactly; repaired,
// the key is limited again by what Redis holds.
func TestRateLimitFailureOfOneKey(t *testing.T) {
	addrs := limitCluster.Addrs(t)
	c := redistest.Client(t, addrs)
	clk := newManualClock()
	prefix := freshPrefix()
	l := sharedLimiter(c, prefix, clk)
	keys := map[string]config.KeyLimits{"a": {RequestsPerMinute: 4}, "b": {RequestsPerMinute: 4}}
	setLimits(l, keys, false)
	wantKinds(t, "first call of a", admitN(l, "a", 1, 0), kinds(ratelimit.KindNone, 1, 0, 0))
	rk := scanPrefix(t, addrs, prefix+"rl:")
	if len(rk) != 1 {
		t.Fatalf("keys under %s: %v, want a's", prefix, rk)
	}
	if err := c.Do(context.Background(), c.B().Set().Key(rk[0]).Value("not a hash").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	wantKinds(t, "a, its script failing, fail closed", admitN(l, "a", 3, 0), kinds(ratelimit.KindUnavailable, 3, 0, 0))
	wantKinds(t, "b while a fails", admitN(l, "b", 6, 0), kinds(ratelimit.KindNone, 4, ratelimit.KindRequests, 2))
	setLimits(l, keys, true)
	wantKinds(t, "a, its script failing, fail open", admitN(l, "a", 3, 0), kinds(ratelimit.KindNone, 3, 0, 0))
	wantKinds(t, "b, spent, while a fails open", admitN(l, "b", 2, 0), kinds(ratelimit.KindRequests, 2, 0, 0))
	if open, closed := l.BackendFailures(); open != 3 || closed != 3 {
		t.Fatalf("decisions without Redis: %d open, %d closed; want a's 3 and 3", open, closed)
	}
	if err := c.Do(context.Background(), c.B().Del().Key(rk[0]).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Second) // a is left alone for a second after its failure
	wantKinds(t, "a repaired", admitN(l, "a", 5, 0), kinds(ratelimit.KindNone, 4, ratelimit.KindRequests, 1))
	if open, closed := l.BackendFailures(); open != 3 || closed != 3 {
		t.Fatalf("decisions without Redis after the repair: %d open, %d closed", open, closed)
	}
}

// TestRateLimitHugeUsageOnRedis: an answer that reports 999999999999999999
// tokens neither breaks the script nor touches another key: it is charged
// as ratelimit.MaxCallTokens, and the key is exhausted on every node (a
// debt, repaid at the key's rate). The debt of many such calls saturates at
// 2^52, which the script's doubles hold exactly.
func TestRateLimitHugeUsageOnRedis(t *testing.T) {
	addrs := limitCluster.Addrs(t)
	c := redistest.Client(t, addrs)
	clk := newManualClock()
	prefix := freshPrefix()
	keys := map[string]config.KeyLimits{"a": {TokensPerMinute: 1000}, "b": {RequestsPerMinute: 3}, "c": {TokensPerMinute: 1e9}}
	l1, l2 := sharedLimiter(c, prefix, clk), sharedLimiter(c, prefix, clk)
	setLimits(l1, keys, true)
	setLimits(l2, keys, true)
	wantKinds(t, "a's call", admitN(l1, "a", 1, 999_999_999_999_999_999), kinds(ratelimit.KindNone, 1, 0, 0))
	// MaxCallTokens at 1,000 per minute: a million minutes to repay.
	repay := time.Duration(ratelimit.MaxCallTokens/1000) * time.Minute
	for i, l := range []*ratelimit.Limiter{l1, l2} {
		var tk ratelimit.Ticket
		if v := l.Admit("a", "", &tk); v.Kind != ratelimit.KindTokens || v.RetryAfter < repay-2*time.Minute || v.RetryAfter > repay {
			t.Fatalf("a on node %d after a usage of 999999999999999999: %+v, want refused for about %v", i+1, v, repay)
		}
	}
	wantKinds(t, "b on node 1", admitN(l1, "b", 2, 0), kinds(ratelimit.KindNone, 2, 0, 0))
	wantKinds(t, "b on node 2", admitN(l2, "b", 2, 0), kinds(ratelimit.KindNone, 1, ratelimit.KindRequests, 1))
	// 100 calls of c in flight that all report the most tokens.
	held := make([]ratelimit.Ticket, 100)
	for i := range held {
		if v := l1.Admit("c", "", &held[i]); !v.Admitted() {
			t.Fatalf("c's call %d: %+v", i, v)
		}
	}
	for i := range held {
		l1.Done(&held[i], math.MaxInt64)
	}
	if v := admitN(l2, "c", 1, 0); v[0] != ratelimit.KindTokens {
		t.Fatalf("c on node 2 after 100 calls of the most tokens: %v", v)
	}
	var debts []string
	for _, k := range scanPrefix(t, addrs, prefix+"rl:") {
		d, err := c.Do(context.Background(), c.B().Hget().Key(k).Field("t").Build()).ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
		ttl, err := c.Do(context.Background(), c.B().Pttl().Key(k).Build()).AsInt64()
		if err != nil || ttl <= 0 {
			t.Fatalf("PTTL %s = %d (%v)", k, ttl, err)
		}
		debts = append(debts, d)
	}
	slices.Sort(debts)
	// b's debt is of requests; a's is 10^9 tokens × 60,000; c's saturates.
	if want := []string{"0", "4503599627370496", "60000000000000"}; !slices.Equal(debts, want) {
		t.Fatalf("tokens debts in Redis: %v, want %v", debts, want)
	}
	for i, l := range []*ratelimit.Limiter{l1, l2} {
		if open, closed := l.BackendFailures(); open+closed != 0 {
			t.Fatalf("node %d decided %d calls without Redis", i+1, open+closed)
		}
	}
}

// masterOf returns the port of the master that holds Redis key k.
func masterOf(t *testing.T, c rueidis.Client, k string) int {
	t.Helper()
	ctx := context.Background()
	slot, err := c.Do(ctx, c.B().ClusterKeyslot().Key(k).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := c.Do(ctx, c.B().ClusterNodes().Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	return redistest.MasterPort(nodes, slot)
}

// TestRateLimitBlockedSlot: while the master of one key's slot holds its
// round trip (CLIENT PAUSE WRITE), the limiter holds no lock of that key:
// another key, on another master, is limited exactly, and /metrics and a
// reload answer at once; the key's call is decided once the master answers.
func TestRateLimitBlockedSlot(t *testing.T) {
	addrs := limitCluster.Addrs(t)
	c := redistest.Client(t, addrs)
	ctl := redistest.Client(t, addrs) // other connections, not held by the pause
	clk := newManualClock()
	prefix := freshPrefix()
	sent := make(chan string, 1)
	l := sharedLimiter(sentClient{c, sent}, prefix, clk)
	keys := map[string]config.KeyLimits{}
	for i := range 16 {
		keys["k"+strconv.Itoa(i)] = config.KeyLimits{RequestsPerMinute: 5}
	}
	// The round trip held by the pause does not time out during the test.
	reload := func() { setLimitsTimeout(l, keys, false, time.Minute) }
	reload()
	// Two keys whose buckets are on different masters.
	var a, b string
	var portA int
	seen := map[string]bool{}
	for i := 0; b == "" && i < 16; i++ {
		id := "k" + strconv.Itoa(i)
		wantKinds(t, id, admitN(l, id, 1, 0), kinds(ratelimit.KindNone, 1, 0, 0))
		for _, k := range scanPrefix(t, addrs, prefix+"rl:") {
			if seen[k] {
				continue
			}
			seen[k] = true
			switch port := masterOf(t, ctl, k); {
			case a == "":
				a, portA = id, port
			case port != portA:
				b = id
			}
		}
	}
	if b == "" {
		t.Fatal("16 keys on one master")
	}
	master := ctl.Nodes()["127.0.0.1:"+strconv.Itoa(portA)]
	if master == nil {
		t.Fatalf("no client of the master on port %d: %v", portA, ctl.Nodes())
	}
	unpause := func() { master.Do(context.Background(), master.B().ClientUnpause().Build()) }
	if err := master.Do(context.Background(), master.B().ClientPause().Timeout(90_000).Write().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unpause)
	for len(sent) > 0 {
		<-sent
	}
	done := make(chan ratelimit.Verdict, 1)
	go func() {
		var tk ratelimit.Ticket
		done <- l.Admit(a, "", &tk)
	}()
	select {
	case <-sent: // a's round trip is on its way to the paused master
	case <-time.After(30 * time.Second):
		t.Fatal("a's call sent nothing to Redis")
	}
	wantKinds(t, "b while a's master is paused", admitN(l, b, 6, 0), kinds(ratelimit.KindNone, 4, ratelimit.KindRequests, 2))
	within(t, "/metrics while a's round trip is held", func() { l.WritePrometheus(io.Discard) })
	within(t, "a reload while a's round trip is held", reload)
	select {
	case v := <-done:
		t.Fatalf("a's call was decided while its master is paused: %+v", v)
	default:
	}
	unpause()
	select {
	case v := <-done:
		if !v.Admitted() {
			t.Fatalf("a's call, its master back: %+v", v)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a's call undecided after its master came back")
	}
	if open, closed := l.BackendFailures(); open+closed != 0 {
		t.Fatalf("%d decisions without Redis", open+closed)
	}
	// Paused again, with a round trip bounded by 1 s: a's round trip times
	// out, and a alone is refused by the fail mode (closed); b, its minute
	// repaid, gets exactly its limit.
	setLimitsTimeout(l, keys, false, time.Second)
	if err := master.Do(context.Background(), master.B().ClientPause().Timeout(90_000).Write().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Minute)
	wantKinds(t, "a, its master paused, fail closed", admitN(l, a, 3, 0), kinds(ratelimit.KindUnavailable, 3, 0, 0))
	wantKinds(t, "b while a times out", admitN(l, b, 6, 0), kinds(ratelimit.KindNone, 5, ratelimit.KindRequests, 1))
	if open, closed := l.BackendFailures(); open != 0 || closed != 3 {
		t.Fatalf("decisions without Redis: %d open, %d closed; want a's 3 closed", open, closed)
	}
}

// within fails t when f does not return within 20 s.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	ok := make(chan struct{})
	go func() {
		f()
		close(ok)
	}()
	select {
	case <-ok:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: still waiting after 20s", what)
	}
}

// TestRateLimitReloadLowersAtOnce: a node holds an allowance reserved under
// a key's old limit; once a reload lowers the limit, the allowance goes
// back, and Redis decides the next calls under the new limit: of 1,000 per
// minute, 1 was spent, so of the new 2 per minute exactly 1 more passes.
func TestRateLimitReloadLowersAtOnce(t *testing.T) {
	addrs := limitCluster.Addrs(t)
	c := redistest.Client(t, addrs)
	clk := newManualClock()
	l := sharedLimiter(c, freshPrefix(), clk)
	setLimits(l, map[string]config.KeyLimits{"a": {RequestsPerMinute: 1000}}, true)
	wantKinds(t, "under 1000 per minute", admitN(l, "a", 1, 0), kinds(ratelimit.KindNone, 1, 0, 0))
	setLimits(l, map[string]config.KeyLimits{"a": {RequestsPerMinute: 2}}, true)
	wantKinds(t, "lowered to 2 per minute", admitN(l, "a", 3, 0), kinds(ratelimit.KindNone, 1, ratelimit.KindRequests, 2))
	// Raised again: a refusal under the old limit does not stand.
	setLimits(l, map[string]config.KeyLimits{"a": {RequestsPerMinute: 4}}, true)
	wantKinds(t, "raised to 4 per minute", admitN(l, "a", 3, 0), kinds(ratelimit.KindNone, 2, ratelimit.KindRequests, 1))
}

// TestRateLimitReloadThroughGateway: the same through a gateway's Reload
// (what SIGHUP calls).
func TestRateLimitReloadThroughGateway(t *testing.T) {
	addrs := limitCluster.Addrs(t)
	clk := newManualClock()
	gws, _ := nodes(t, addrs, 1, sharedLimits("{requests_per_minute: 1000}"), clk)
	g := gws[0]
	if status, body := g.chat(keyA); status != 200 {
		t.Fatalf("under 1000 per minute: %d %s", status, body)
	}
	lowered := *g.cfg
	lowered.Keys = slices.Clone(lowered.Keys)
	for i, k := range lowered.Keys {
		if k.Limits != nil {
			lowered.Keys[i].Limits = &config.KeyLimits{RequestsPerMinute: 2}
		}
	}
	if err := g.gw.Reload(&lowered); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{200, 429, 429} {
		if status, body := g.chat(keyA); status != want {
			t.Fatalf("call %d after lowering to 2 per minute: %d %s, want %d", i+1, status, body, want)
		}
	}
	noFailOpen(t, gws)
}

// TestRateLimitHugeUsageThroughGateways: the way in. An upstream
// reports 999999999999999999 input tokens for team-a's call on one
// gateway; team-a is then refused by its tokens limit on the other gateway
// (not admitted by a fail mode), and team-b stays limited exactly.
func TestRateLimitHugeUsageThroughGateways(t *testing.T) {
	addrs := limitCluster.Addrs(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"chat-model",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":999999999999999999,"completion_tokens":1,"total_tokens":1000000000000000000}}`)
	}))
	t.Cleanup(up.Close)
	host := strings.TrimPrefix(up.URL, "http://")
	teamB := "{id: team-b, sha256: " + HashKey(keyB) + "}"
	y := withKeyLimits("{tokens_per_minute: 1000}")(fmt.Sprintf(testConfigYAML, host, host, HashKey(keyB)))
	y = strings.Replace(y, teamB, strings.TrimSuffix(teamB, "}")+", limits: {requests_per_minute: 2}}", 1) + "rate_limit: {timeout: 10s}\n"
	cfg, err := config.Parse([]byte(y), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	clk := newManualClock()
	prefix := freshPrefix()
	var gws []*testEnv
	for range 2 {
		rs, err := store.OpenRedis(store.RedisOptions{Addrs: addrs, KeyPrefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		gws = append(gws, serveNode(t, cfg, Options{Store: rs, Limits: redisLimits(rs), Now: clk.now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, nil))
	}
	if status, body := gws[0].chat(keyA); status != 200 {
		t.Fatalf("team-a's call: %d %s", status, body)
	}
	for i, g := range gws {
		status, _, body := g.do("POST", chatPath, bearer(keyA), limitChatBody)
		if status != 429 || !strings.Contains(string(body), `"type":"tokens"`) {
			t.Fatalf("team-a on node %d after a usage of 999999999999999999: %d %s", i+1, status, body)
		}
	}
	for i, want := range []int{200, 200, 429, 429} {
		if status, body := gws[i%2].chat(keyB); status != want {
			t.Fatalf("team-b's call %d: %d %s, want %d", i+1, status, body, want)
		}
	}
	noFailOpen(t, gws)
}
