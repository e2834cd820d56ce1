package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/store/redistest"
)

// Callers' keys made through the admin API of one gateway process, in force on every
// other process on the same Redis Cluster within a second.

const adminTok = "adm-cmd-0123456789abcdef"

// keysCluster starts n gateways on one Redis Cluster, with the admin token.
func keysCluster(t *testing.T, n int) ([]*gateway, *sim.Server) {
	t.Helper()
	addrs := e2eCluster.Addrs(t)
	s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: "s1", AlphaKey: upAlpha, BetaKey: upBeta, NoRecord: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	path := redisConfig(t, addrs, s, "")
	appendFile(t, path, fmt.Sprintf("admin:\n  tokens: [{id: ops, key: %s}]\n", adminTok))
	nodes := make([]*gateway, n)
	for i := range nodes {
		nodes[i] = launchRedis(t, path)
	}
	return nodes, s
}

// adminCall calls g's admin API with the admin token and wants status.
func adminCall(t *testing.T, g *gateway, method, path, body string, want int) map[string]any {
	t.Helper()
	status, _, b := do(t, method, g.admin+path, adminTok, nil, body)
	if status != want {
		t.Fatalf("%s %s on %s: %d %s, want %d", method, path, g.admin, status, b, want)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(b), &v); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, b)
	}
	return v
}

// modelsStatus is the status of an authenticated call that needs no upstream.
func modelsStatus(t *testing.T, g *gateway, key string) int {
	status, _, _ := do(t, "GET", g.base+"/v1/models", key, nil, "")
	return status
}

// untilStatus calls g with key until it answers want and returns how long that took
// from since; it fails after 30 s.
func untilStatus(t *testing.T, g *gateway, key string, want int, since time.Time) time.Duration {
	t.Helper()
	for {
		if modelsStatus(t, g, key) == want {
			return time.Since(since)
		}
		if time.Since(since) > 30*time.Second {
			t.Fatalf("%s still does not answer %d after 30s", g.base, want)
		}
	}
}

// TestKeysThreeNodes: a key made through A works on B and C with the official SDK and is
// refused once revoked through C; then the delay from the API's answer to the change in
// force on the other nodes, over 200 changes made through every node.
func TestKeysThreeNodes(t *testing.T) {
	nodes, _ := keysCluster(t, 3)
	a, b, c := nodes[0], nodes[1], nodes[2]
	ctx := context.Background()
	var secrets []string

	created := adminCall(t, a, "POST", "/admin/v1/keys", `{"name":"sdk","models":["chat-model"]}`, 201)
	id, secret := created["id"].(string), created["key"].(string)
	secrets = append(secrets, secret)
	for _, g := range []*gateway{b, c} {
		untilStatus(t, g, secret, 200, time.Now())
		if _, err := ptr(g.openai(secret)).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "chat-model",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}); err != nil {
			t.Fatalf("the key made on A, on %s: %v", g.base, err)
		}
	}
	adminCall(t, c, "DELETE", "/admin/v1/keys/"+id, "", 200)
	if status := modelsStatus(t, c, secret); status != 401 {
		t.Fatalf("the node that revoked still accepts the key: %d", status)
	}
	for _, g := range []*gateway{a, b} {
		untilStatus(t, g, secret, 401, time.Now())
		_, err := ptr(g.openai(secret)).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "chat-model",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		if sdkStatus(err) != 401 {
			t.Fatalf("the key revoked on C, on %s: %v", g.base, err)
		}
	}

	// 100 keys, each made through one node and revoked (deleted or blocked) through the
	// next: 200 changes, each watched on the two other nodes.
	var made, revoked []time.Duration
	for i := range 100 {
		w, r := nodes[i%3], nodes[(i+1)%3]
		k := adminCall(t, w, "POST", "/admin/v1/keys", fmt.Sprintf(`{"name":"load-%d"}`, i), 201)
		kid, ks := k["id"].(string), k["key"].(string)
		secrets = append(secrets, ks)
		at := time.Now()
		for _, g := range nodes {
			if g != w {
				made = append(made, untilStatus(t, g, ks, 200, at))
			}
		}
		if i%2 == 0 {
			adminCall(t, r, "DELETE", "/admin/v1/keys/"+kid, "", 200)
		} else {
			adminCall(t, r, "POST", "/admin/v1/keys/"+kid+"/block", "", 200)
		}
		at = time.Now()
		if status := modelsStatus(t, r, ks); status != 401 {
			t.Fatalf("the node that revoked %s accepts it: %d", kid, status)
		}
		for _, g := range nodes {
			if g != r {
				revoked = append(revoked, untilStatus(t, g, ks, 401, at))
			}
		}
	}
	pMade, pRevoked := percentiles(made), percentiles(revoked)
	t.Logf("from the API's answer to a new key accepted on another node (%d): %s", len(made), pMade)
	t.Logf("from the API's answer to a revoked key refused on another node (%d): %s", len(revoked), pRevoked)
	if p99 := quantile(revoked, 0.99); p99 > time.Second {
		t.Fatalf("p99 of a revocation's delay is %v, over 1s", p99)
	}

	// No secret in any log line, metric, status page or listing of the run.
	var texts []string
	for _, g := range nodes {
		_, _, m := do(t, "GET", g.admin+"/metrics", "", nil, "")
		_, _, s := do(t, "GET", g.admin+"/status", "", nil, "")
		_, _, l := do(t, "GET", g.admin+"/admin/v1/keys?limit=1000", adminTok, nil, "")
		texts = append(texts, m, s, l, g.stderr.String(), g.stdout.String())
	}
	for _, text := range texts {
		for _, s := range append(secrets, adminTok) {
			if strings.Contains(text, s) {
				t.Fatalf("a secret is shown: %.300s", text)
			}
		}
	}
	if !strings.Contains(texts[0], "gateway_keys_snapshot_age_seconds") {
		t.Fatal("no snapshot age in the metrics")
	}
}

// quantile returns the q quantile of ds (nearest rank).
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func percentiles(ds []time.Duration) string {
	var b strings.Builder
	for _, q := range []float64{0.5, 0.9, 0.99, 1} {
		fmt.Fprintf(&b, "p%g %v  ", q*100, quantile(ds, q).Round(10*time.Microsecond))
	}
	return b.String()
}

// TestKeysRotationUnderLoad: while calls with a key's secret run on B and C without
// pause, the key is rotated through A with an overlap: not one call with the old secret
// fails, and the new one works everywhere.
func TestKeysRotationUnderLoad(t *testing.T) {
	nodes, _ := keysCluster(t, 3)
	a := nodes[0]
	k := adminCall(t, a, "POST", "/admin/v1/keys", `{"name":"rotated"}`, 201)
	id, old := k["id"].(string), k["key"].(string)
	for _, g := range nodes[1:] {
		untilStatus(t, g, old, 200, time.Now())
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var calls, failed atomic.Int64
	for _, g := range nodes[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("GET", g.base+"/v1/models", nil)
				req.Header.Set("Authorization", "Bearer "+old)
				resp, err := http.DefaultClient.Do(req)
				calls.Add(1)
				if err != nil || resp.StatusCode != 200 {
					failed.Add(1)
				}
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	for calls.Load() < 50 { // the load runs before the rotation
		time.Sleep(time.Millisecond)
	}
	fresh := adminCall(t, a, "POST", "/admin/v1/keys/"+id+"/rotate", `{"overlap":"10m"}`, 200)["key"].(string)
	for _, g := range nodes {
		untilStatus(t, g, fresh, 200, time.Now())
	}
	for n := calls.Load(); calls.Load() < n+50; { // and after it is everywhere
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d calls with the old secret failed within the overlap", failed.Load(), calls.Load())
	}
	t.Logf("%d calls with the old secret during the rotation, none failed", calls.Load())
}

// TestKeysRedisOutage: with its Redis Cluster down, a gateway keeps serving the keys it
// last read, and its admin API answers 503; once Redis is back, changes apply again.
func TestKeysRedisOutage(t *testing.T) {
	e2eCluster.Addrs(t) // skips (or fails in CI) when redis cannot be had
	if _, err := redistest.Run("start", downPort); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { redistest.StopPort(downPort) })
	s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: "s1", AlphaKey: upAlpha, BetaKey: upBeta, NoRecord: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	path := redisConfig(t, downAddrs(), s, "  dial_timeout: 1s\n  command_timeout: 1s\n")
	appendFile(t, path, fmt.Sprintf("admin:\n  tokens: [{id: ops, key: %s}]\n", adminTok))
	g := launchRedis(t, path)
	var k map[string]any
	eventually(t, func() string { return "a key made once redis is ready" }, func() bool {
		status, _, b := do(t, "POST", g.admin+"/admin/v1/keys", adminTok, nil, `{"name":"kept"}`)
		return status == 201 && json.Unmarshal([]byte(b), &k) == nil
	})
	secret := k["key"].(string)
	if err := redistest.StopPort(downPort); err != nil {
		t.Fatal(err)
	}
	if status := modelsStatus(t, g, secret); status != 200 {
		t.Fatalf("the last snapshot is not served with redis down: %d", status)
	}
	status, h, body := do(t, "POST", g.admin+"/admin/v1/keys", adminTok, nil, `{"name":"refused"}`)
	if status != 503 || h.Get("Retry-After") == "" {
		t.Fatalf("a change with redis down: %d %s", status, body)
	}
	eventually(t, func() string { return "reads refused once the snapshot is stale" }, func() bool {
		status, _, _ := do(t, "GET", g.admin+"/admin/v1/keys", adminTok, nil, "")
		return status == 503
	})
	_, _, page := do(t, "GET", g.admin+"/status", "", nil, "")
	if !strings.Contains(page, "store version") {
		t.Fatalf("the status page does not show the keys' snapshot:\n%s", page)
	}
	if status := modelsStatus(t, g, secret); status != 200 {
		t.Fatalf("the last snapshot is not served with redis down: %d", status)
	}
}

// TestKeysCLI drives the admin API of a gateway on Pebble with the keys command.
func TestKeysCLI(t *testing.T) {
	e := newEnv(t)
	e.writeConfig("admin:\n  tokens: [{id: ops, key: " + adminTok + "}]\n")
	g := e.start()
	keys := func(want int, args ...string) map[string]any {
		t.Helper()
		code, out, errOut := runBin(t, "", append([]string{"keys"}, append(args, "-admin", g.admin)...)...)
		if code != want {
			t.Fatalf("keys %v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
		}
		var v map[string]any
		if want == 0 {
			if err := json.Unmarshal([]byte(out), &v); err != nil {
				t.Fatalf("keys %v: %v: %s", args, err, out)
			}
		} else {
			v = map[string]any{"stderr": errOut}
		}
		return v
	}
	if v := keys(1, "list"); !strings.Contains(v["stderr"].(string), adminTokenEnv) {
		t.Fatalf("without a token: %v", v)
	}
	t.Setenv(adminTokenEnv, adminTok)
	k := keys(0, "create", "-name", "cli", "-models", "old-model", "-metadata", "team=x", "-expires", "720h")
	id, secret := k["id"].(string), k["key"].(string)
	if g.chat(secret, "old-model") != 200 || g.chat(secret, "hold-model") != 403 {
		t.Fatal("a key made by the CLI does not call as it should")
	}
	if l := keys(0, "list", "-name", "cl"); len(l["data"].([]any)) != 1 {
		t.Fatalf("list: %v", l)
	}
	if v := keys(0, "update", id, "-name", "renamed", "-models", ""); v["name"] != "renamed" || v["models"] != nil {
		t.Fatalf("update: %v", v)
	}
	keys(0, "block", id)
	if g.chat(secret, "old-model") != 401 {
		t.Fatal("a key blocked by the CLI still calls")
	}
	keys(0, "unblock", id)
	fresh := keys(0, "rotate", id, "-overlap", "1m")["key"].(string)
	if g.chat(secret, "old-model") != 200 || modelsStatus(t, g, fresh) != 200 {
		t.Fatal("after a rotation with an overlap both secrets work")
	}
	if v := keys(1, "update", id, "-limits", `{"concurrent":-1}`); !strings.Contains(v["stderr"].(string), "limits.concurrent") {
		t.Fatalf("a bad limit: %v", v)
	}
	if v := keys(0, "update", id, "-budget", "2.5/day"); fmt.Sprint(v["budget"]) != "map[period:day usd:2.5]" {
		t.Fatalf("update -budget: %v", v)
	}
	if v := keys(1, "update", id, "-budget", "2.5/year"); !strings.Contains(v["stderr"].(string), "budget.period") {
		t.Fatalf("a bad budget period: %v", v)
	}
	if v := keys(1, "update", id, "-budgets", "no-such-team"); !strings.Contains(v["stderr"].(string), "budgets[0]") {
		t.Fatalf("an unknown named budget: %v", v)
	}
	if v := keys(0, "update", id, "-budget", ""); v["budget"] != nil {
		t.Fatalf("update -budget '' does not clear it: %v", v)
	}
	if v := keys(0, "get", id); v["name"] != "renamed" || v["key"] != nil {
		t.Fatalf("get: %v", v)
	}
	keys(0, "delete", id)
	if g.chat(fresh, "old-model") != 401 || g.chat(secret, "old-model") != 401 {
		t.Fatal("a key deleted by the CLI still calls")
	}
	if v := keys(1, "get", id); !strings.Contains(v["stderr"].(string), "404") {
		t.Fatalf("get of a deleted key: %v", v)
	}
	if v := keys(2, "frobnicate"); !strings.Contains(v["stderr"].(string), "unknown keys command") {
		t.Fatalf("an unknown command: %v", v)
	}
	for _, text := range []string{g.stderr.String(), g.stdout.String()} {
		for _, s := range []string{secret, fresh, adminTok} {
			if strings.Contains(text, s) {
				t.Fatalf("a secret in the gateway's output: %s", s)
			}
		}
	}
}
