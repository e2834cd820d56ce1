package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/config"
	"github.com/modelgate/gateway/proxy/ratelimit"
	"github.com/modelgate/gateway/store"
	"github.com/modelgate/gateway/store/redistest"
)

// The rate limits of several gateways that share the store's real Redis
// Cluster (6 nodes on loopback, first port 7141).
var limitCluster = redistest.Cluster{Port: 7141}

func TestMain(m *testing.M) {
	code := m.Run()
	limitCluster.Stop()
	blobServer.Stop()
	os.Exit(code)
}

// sharedLimits gives team-a the limits, with a Redis round trip bounded by
// 10 s rather than 250 ms: on a loaded machine (or under -race) a slow round
// trip would be decided by the fail mode, and the counts would depend on
// the machine's speed.
func sharedLimits(limits string) func(string) string {
	return func(y string) string {
		return withKeyLimits(limits)(y) + "rate_limit: {timeout: 10s}\n"
	}
}

// nodes starts two simulators and n gateways with the config of the fixture
// edited by edit, each with its own store.OpenRedis client on addrs under one
// fresh key prefix, all on clock clk.
func nodes(t *testing.T, addrs []string, n int, edit func(string) string, clk *manualClock) ([]*testEnv, string) {
	t.Helper()
	cfg, sims := limitFixture(t, edit)
	prefix := "rltest-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	var envs []*testEnv
	for range n {
		rs, err := store.OpenRedis(store.RedisOptions{Addrs: addrs, KeyPrefix: prefix,
			// The status metrics read the store's file counters: a stopped
			// Redis should not hold a scrape for the default 5 s.
			CommandTimeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rs.Close() })
		envs = append(envs, serveNode(t, cfg, Options{Store: rs, Limits: redisLimits(rs), Now: clk.now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, sims))
	}
	return envs, prefix
}

// limitFixture starts two simulators and returns the config of the fixture
// on them, edited by edit.
func limitFixture(t *testing.T, edit func(string) string) (*config.Config, []*sim.Server) {
	t.Helper()
	var sims []*sim.Server
	for _, name := range []string{"d1", "d2"} {
		s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: name, AlphaKey: "up-alpha", BetaKey: "up-beta", GammaKey: "up-gamma"})
		if err != nil {
			t.Fatal(err)
		}
		sims = append(sims, s)
		t.Cleanup(func() { s.Close() })
	}
	y := edit(fmt.Sprintf(testConfigYAML, sims[0].Addr(), sims[1].Addr(), HashKey(keyB)))
	cfg, err := config.Parse([]byte(y), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return cfg, sims
}

// TestRateLimitRedisNeverConnected: a gateway whose Redis store has not
// connected yet (store.LazyRedis) keeps the limits as shared ones, and decides
// them as with Redis stopped: admitted when failing open, 503 when closed,
// each decision counted.
func TestRateLimitRedisNeverConnected(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there
	cfg, sims := limitFixture(t, withKeyLimits("{requests_per_minute: 60}"))
	rs, err := store.OpenRedisLazy(store.RedisOptions{Addrs: []string{addr}, KeyPrefix: "never-"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	g := serveNode(t, cfg, Options{Store: rs, Limits: redisLimits(rs), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, sims)
	if !g.gw.limits.Shared() {
		t.Fatal("the limits of a gateway on a Redis store that is not connected yet are not shared")
	}
	if status, body := g.chat(keyA); status != 200 {
		t.Fatalf("fail open (the default), Redis never connected: %d %s", status, body)
	}
	if m := g.metricsText(); !strings.Contains(m, `gateway_ratelimit_backend_failures_total{outcome="open"} 1`+"\n") {
		t.Fatalf("/metrics does not count the decision made open:\n%s", m)
	}
	g.reloadFailClosed()
	if status, _, body := g.do("POST", chatPath, bearer(keyA), limitChatBody); status != 503 {
		t.Fatalf("fail closed, Redis never connected: %d %s", status, body)
	}
}

// redisLimits keeps the keys' rate limits in the cluster of the Redis store
// r, as cmd/gateway wires them.
func redisLimits(r interface {
	Client() rueidis.Client
	KeyPrefix() string
}) ratelimit.Options {
	return ratelimit.Options{Redis: r.Client, KeyPrefix: r.KeyPrefix()}
}

// serveNode serves a gateway for cfg and opts on a loopback socket.
// reloadFailClosed reloads e's gateway with its config, rate_limit.fail_open
// turned off.
func (e *testEnv) reloadFailClosed() {
	e.t.Helper()
	closed := *e.cfg
	no := false
	closed.RateLimit.FailOpen = &no
	if err := e.gw.Reload(&closed); err != nil {
		e.t.Fatal(err)
	}
}

func serveNode(t *testing.T, cfg *config.Config, opts Options, sims []*sim.Server) *testEnv {
	t.Helper()
	gw, srv, ln := listenGateway(t, cfg, opts)
	return &testEnv{t: t, gw: gw, srv: srv, ln: ln, base: "http://" + ln.Addr().String(), sims: sims, cfg: cfg}
}

// TestRateLimitAcrossThreeNodes: 60 requests per minute for a key is 60
// successes across three gateways together, then 429s; another key is not
// touched; the shared buckets are under the store's prefix and expire.
func TestRateLimitAcrossThreeNodes(t *testing.T) {
	addrs := limitCluster.Addrs(t)
	clk := newManualClock()
	gws, prefix := nodes(t, addrs, 3, sharedLimits("{requests_per_minute: 60}"), clk)
	for i := range 90 {
		status, body := gws[i%3].chat(keyA)
		if want := map[bool]int{true: 200, false: 429}[i < 60]; status != want {
			t.Fatalf("call %d on node %d: %d %s, want %d; the nodes' backend failures (a call admitted open is not counted in Redis):\n%s",
				i+1, i%3, status, body, want, backendFailures(gws))
		}
	}
	for i, g := range gws {
		if status, _ := g.chat(keyB); status != 200 {
			t.Fatalf("another key on node %d: %d", i, status)
		}
	}
	if n := len(gws[0].received()); n != 63 {
		t.Fatalf("the providers saw %d calls, want 60 + 3", n)
	}
	clk.advance(time.Second)
	if status, _ := gws[1].chat(keyA); status != 200 {
		t.Fatalf("a second later one call is due: %d", status)
	}
	noFailOpen(t, gws)
	keys := scanPrefix(t, addrs, prefix+"rl:")
	if len(keys) != 1 {
		t.Fatalf("rate-limit keys under %q: %v, want the one of team-a", prefix, keys)
	}
	c := redistest.Client(t, addrs)
	ttl, err := c.Do(context.Background(), c.B().Pttl().Key(keys[0]).Build()).AsInt64()
	if err != nil || ttl <= 0 || ttl > 62_000 {
		t.Fatalf("PTTL %s = %d (%v): it must expire by itself, once repaid (60 s)", keys[0], ttl, err)
	}
}

// noFailOpen fails t when a node decided without Redis: every count above
// must come from the shared buckets.
func noFailOpen(t *testing.T, gws []*testEnv) {
	t.Helper()
	for i, g := range gws {
		if open, closed := g.gw.limits.BackendFailures(); open+closed != 0 {
			t.Fatalf("node %d decided %d calls without Redis (%d open, %d closed)", i, open+closed, open, closed)
		}
	}
}

// scanPrefix returns the keys under prefix on every master of the cluster.
func scanPrefix(t *testing.T, addrs []string, prefix string) []string {
	t.Helper()
	c := redistest.Client(t, addrs)
	var keys []string
	for _, node := range c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(context.Background(), node.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, e.Elements...)
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	// Replicas hold the same keys: count each once.
	seen := map[string]bool{}
	var out []string
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// TestRateLimitBurstAcrossNodes measures how far a burst from many clients
// on three nodes goes over a limit large enough for local allowances: by
// requests (reserved before they are spent: never over) and by tokens
// (charged after the answer: over by the calls in flight when the budget ran
// out, at most).
func TestRateLimitBurstAcrossNodes(t *testing.T) {
	addrs := limitCluster.Addrs(t)
	probe := newEnv(t, nil)
	_, per := probe.chat(keyA)
	tokens := chatTokens(t, per)
	const limit, clients, each = 1200, 24, 75 // 1800 calls for 1200
	clk := newManualClock()
	gws, _ := nodes(t, addrs, 3, sharedLimits(fmt.Sprintf("{requests_per_minute: %d}", limit)), clk)
	ok := burst(t, gws, clients, each)
	calls := backendCalls(gws)
	t.Logf("requests: %d calls, limit %d: %d admitted (%+d), %d Redis round trips", clients*each, limit, ok, ok-limit, calls)
	noFailOpen(t, gws)
	if ok != limit {
		t.Fatalf("admitted %d of a limit of %d", ok, limit)
	}
	const tpmCalls = 300
	tpm := tokens * tpmCalls
	clk2 := newManualClock()
	tg, _ := nodes(t, addrs, 3, sharedLimits(fmt.Sprintf("{tokens_per_minute: %d}", tpm)), clk2)
	ok = burst(t, tg, clients, each)
	noFailOpen(t, tg)
	over := int64(ok)*tokens - tpm
	t.Logf("tokens: %d calls of %d tokens, limit %d: %d admitted, %d tokens over (%.1f%%, %d calls' worth; %d clients)",
		clients*each, tokens, tpm, ok, over, 100*float64(over)/float64(tpm), over/tokens, clients)
	if ok < tpmCalls || over > int64(clients)*tokens {
		t.Fatalf("admitted %d calls of %d tokens for a budget of %d calls: over by more than the %d calls in flight", ok, tokens, tpmCalls, clients)
	}
}

// burst sends clients × each chat calls of team-a spread over gws, and
// returns how many were admitted.
func burst(t *testing.T, gws []*testEnv, clients, each int) int {
	var ok, bad atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range each {
				switch status, _ := gws[(c+i)%len(gws)].chat(keyA); status {
				case 200:
					ok.Add(1)
				case 429:
				default:
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if bad.Load() > 0 {
		t.Fatalf("%d calls answered neither 200 nor 429", bad.Load())
	}
	return int(ok.Load())
}

func backendCalls(gws []*testEnv) int {
	n := 0
	for _, g := range gws {
		m := g.metricsText()
		if i := strings.Index(m, "\ngateway_ratelimit_backend_calls_total "); i >= 0 {
			v, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(m[i+39:], "\n", 2)[0]))
			n += v
		}
	}
	return n
}

// standaloneRedis starts a redis-server on a free loopback port, and returns
// its address and a function that kills it.
func standaloneRedis(t *testing.T) (string, func()) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		limitCluster.Addrs(t) // installs redis, or skips (fails in CI)
		if bin, err = exec.LookPath("redis-server"); err != nil {
			t.Skip("no redis-server")
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ln.Close()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--logfile", filepath.Join(t.TempDir(), "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	t.Cleanup(stop)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	for i := 0; err != nil && i < 200; i++ { // the server is starting
		time.Sleep(25 * time.Millisecond)
		c, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	}
	if err != nil {
		t.Fatalf("redis-server on %s: %v", addr, err)
	}
	c.Close()
	return addr, stop
}

// TestRateLimitRedisStopped: with Redis gone, calls are admitted (fail open)
// or refused with 503 (fail closed) as configured, each decision counted.
func TestRateLimitRedisStopped(t *testing.T) {
	addr, stop := standaloneRedis(t)
	clk := newManualClock()
	gws, _ := nodes(t, []string{addr}, 1, withKeyLimits("{requests_per_minute: 60}"), clk)
	g := gws[0]
	if status, body := g.chat(keyA); status != 200 {
		t.Fatalf("with Redis: %d %s", status, body)
	}
	stop()
	for range 3 {
		if status, body := g.chat(keyA); status != 200 {
			t.Fatalf("fail open (the default), Redis stopped: %d %s", status, body)
		}
	}
	if m := g.metricsText(); !strings.Contains(m, `gateway_ratelimit_backend_failures_total{outcome="open"} 3`+"\n") {
		t.Fatalf("/metrics does not count the 3 decisions made open:\n%s", m)
	}
	g.reloadFailClosed()
	status, h, body := g.do("POST", chatPath, bearer(keyA), limitChatBody)
	if status != 503 || string(h.Peek("Retry-After")) != "1" ||
		string(body) != `{"error":{"message":"the gateway cannot check this key's rate limits now; retry shortly","type":"server_error","param":null,"code":null}}` {
		t.Fatalf("fail closed: %d %s", status, body)
	}
	m := g.metricsText()
	for _, want := range []string{
		`gateway_ratelimit_backend_failures_total{outcome="closed"} 1`,
		`gateway_rejections_total{family="beta",reason="rate_limit_unavailable"} 1`,
	} {
		if !strings.Contains(m, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if status, _ := g.chat(keyB); status != 200 {
		t.Fatalf("a key without limits needs no Redis: %d", status)
	}
}

// TestRateLimitTokensAndModelsAcrossNodes: a small token budget and a
// per-model limit hold across three gateways exactly: a call's tokens beyond
// its node's reservation reach Redis before its answer does.
func TestRateLimitTokensAndModelsAcrossNodes(t *testing.T) {
	addrs := limitCluster.Addrs(t)
	probe := newEnv(t, nil)
	_, per := probe.chat(keyA)
	n := chatTokens(t, per)
	clk := newManualClock()
	gws, _ := nodes(t, addrs, 3, sharedLimits(fmt.Sprintf(
		"{tokens_per_minute: %d, models: {plain-model: {requests_per_minute: 2}}}", 2*n-1)), clk)
	for i := range 2 {
		if status, body := gws[i].chat(keyA); status != 200 {
			t.Fatalf("call %d on node %d: %d %s", i+1, i, status, body)
		}
	}
	status, _, body := gws[2].do("POST", chatPath, bearer(keyA), limitChatBody)
	if status != 429 || !strings.Contains(string(body), `"type":"tokens"`) {
		t.Fatalf("third call, on the third node, with 2n of 2n-1 tokens spent on the others: %d %s", status, body)
	}
	noFailOpen(t, gws)
	// Two minutes on, the token debt is repaid; a plain-model call (a shorter
	// body) uses fewer than n tokens, so two of them stay within the budget.
	clk.advance(2 * time.Minute)
	plain := `{"model":"plain-model","messages":[{"role":"user","content":"x"}]}`
	for i, want := range []int{200, 200, 429, 429} {
		status, _, body := gws[i%3].do("POST", chatPath, bearer(keyA), plain)
		if status != want {
			t.Fatalf("plain-model call %d on node %d: %d %s, want %d", i+1, i%3, status, body, want)
		}
		if want == 429 && !strings.Contains(string(body), "on model 'plain-model'") {
			t.Fatalf("the refusal does not name the model: %s", body)
		}
	}
}

// backendFailures returns the rate limiter's backend failure lines of each
// node's metrics.
func backendFailures(gws []*testEnv) string {
	var b strings.Builder
	for i, g := range gws {
		for _, line := range strings.Split(g.metricsText(), "\n") {
			if strings.HasPrefix(line, "gateway_ratelimit_backend_failures_total") {
				fmt.Fprintf(&b, "node %d: %s\n", i, line)
			}
		}
	}
	return b.String()
}
