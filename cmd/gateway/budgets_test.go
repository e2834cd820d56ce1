package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/sim"
)

// The guarantee of budgets across nodes: three gateway processes on the real
// Redis Cluster, 30 concurrent clients of one team budget, plain and
// streamed calls of every family. The settled spend never passes the budget
// by more than the largest overshoot of one call (its cost less what it
// reserved).

const upGamma = "up-cmd-gamma-secret"

// budgetConfig writes the config of the budget test: chat-model on beta and
// alpha, image-model on gamma, both priced; team-a and team-b share the
// budget "team" of usd dollars.
func budgetConfig(t *testing.T, addrs []string, s *sim.Server, usd string) string {
	t.Helper()
	redisPrefixSeq++
	quoted := make([]string, len(addrs))
	for i, a := range addrs {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	const pricing = `{input: 3, output: 15, cached_input: 0.3, reasoning: 20}`
	cfg := fmt.Sprintf(`store:
  engine: redis
  addrs: [%s]
  key_prefix: "gwb%d:%d:"
rate_limit: {timeout: 10s}
budgets:
  - {name: team, usd: %s, period: month}
keys:
  - {id: team-a, key: %s, budgets: [team]}
  - {id: team-b, key: %s, budgets: [team]}
upstreams:
  - {name: s1-beta, family: beta, base_url: "http://%s/v1", api_key: %s}
  - {name: s1-alpha, family: alpha, base_url: "http://%s", api_key: %s}
  - {name: s1-gamma, family: gamma, base_url: "http://%s", api_key: %s}
models:
  - {id: chat-model, upstreams: [s1-beta, s1-alpha], pricing: %s}
  - {id: image-model, image: true, upstreams: [s1-gamma], pricing: %s}
`, strings.Join(quoted, ", "), os.Getpid(), redisPrefixSeq, usd, keyA, keyB,
		s.Addr(), upBeta, s.Addr(), upAlpha, s.Addr(), upGamma, pricing, pricing)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// budgetCall is one kind of call of the test: every family, plain and
// streamed, each with an output maximum, as clients under a budget send. The
// simulator does not cut its answers at the maximum, as providers do: the
// maxima are above what it answers (gamma's image is 1290 tokens), so that
// each reservation bounds its call's cost, as it does with a provider.
type budgetCall struct {
	path, body string
	gamma      bool
}

var budgetCalls = []budgetCall{
	{path: "/v1/router/beta/v1/chat/completions", body: `{"model":"chat-model","max_tokens":400,"messages":[{"role":"user","content":"hi"}]}`},
	{path: "/v1/router/beta/v1/chat/completions", body: `{"model":"chat-model","max_tokens":400,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	{path: "/v1/router/beta/v1/chat/completions", body: `{"model":"chat-model","max_tokens":400,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`},
	{path: "/v1/router/beta/v1/responses", body: `{"model":"chat-model","max_output_tokens":400,"input":"hi"}`},
	{path: "/v1/router/beta/v1/responses", body: `{"model":"chat-model","max_output_tokens":400,"stream":true,"input":"hi"}`},
	{path: "/v1/router/alpha/v1/messages", body: `{"model":"chat-model","max_tokens":400,"messages":[{"role":"user","content":"hi"}]}`},
	{path: "/v1/router/alpha/v1/messages", body: `{"model":"chat-model","max_tokens":400,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	{path: "/v1/router/gamma/v1beta/models/image-model:generateContent", gamma: true,
		body: `{"contents":[{"role":"user","parts":[{"text":"a cat"}]}],"generationConfig":{"responseModalities":["IMAGE"],"maxOutputTokens":2000}}`},
}

// send makes one call and reads its answer whole; it returns the status.
func (bc budgetCall) send(base, key string) (int, error) {
	req, err := http.NewRequest("POST", base+bc.path, strings.NewReader(bc.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if bc.gamma {
		req.Header.Set("x-gamma-api-key", key)
	} else {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if strings.Contains(bc.path, "/alpha/") {
		req.Header.Set("anthropic-version", "2023-06-01")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != 200 && (resp.StatusCode != 429 && resp.StatusCode != 400 || resp.Header.Get("x-should-retry") != "false") {
		return resp.StatusCode, fmt.Errorf("%s: %d %s", bc.path, resp.StatusCode, b)
	}
	return resp.StatusCode, nil
}

// pico reads a decimal amount of dollars as pico-USD, exactly.
func pico(t *testing.T, s string) int64 {
	t.Helper()
	whole, frac, _ := strings.Cut(s, ".")
	v, err := strconv.ParseInt(whole+frac+strings.Repeat("0", 12-len(frac)), 10, 64)
	if err != nil {
		t.Fatalf("amount %q: %v", s, err)
	}
	return v
}

// spendLines returns the cost and reservation of every call of the access
// logs of nodes.
func spendLines(t *testing.T, nodes []*gateway) (cost, reserved []int64) {
	t.Helper()
	for _, g := range nodes {
		sc := bufio.NewScanner(strings.NewReader(g.stdout.String()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil || m["msg"] != "request" || m["cost_usd"] == nil {
				continue
			}
			cost = append(cost, pico(t, m["cost_usd"].(string)))
			reserved = append(reserved, pico(t, m["reserved_usd"].(string)))
		}
	}
	return cost, reserved
}

func TestBudgetThreeNodes(t *testing.T) {
	addrs := e2eCluster.Addrs(t)
	s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: "s1", AlphaKey: upAlpha, BetaKey: upBeta, GammaKey: upGamma, NoRecord: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const budget = "0.5"
	path := budgetConfig(t, addrs, s, budget)
	nodes := make([]*gateway, 3)
	for i := range nodes {
		nodes[i] = launch(t, "", []string{"-config", path, "-listen", "127.0.0.1:0", "-log-format", "json",
			"-access-log", "json", "-admin-listen", "127.0.0.1:0"}, nil)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	calls, admitted, refused := 0, 0, 0
	var errs []error
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := []string{keyA, keyB}[i%2]
			for j := range 40 {
				g := nodes[(i+j)%3]
				status, err := budgetCalls[(i+j)%len(budgetCalls)].send(g.base, key)
				mu.Lock()
				calls++
				switch {
				case err != nil:
					errs = append(errs, err)
				case status == 200:
					admitted++
				default:
					refused++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d calls failed, the first: %v", len(errs), errs[0])
	}
	// Streams settle when the gateway closes them, after the client's last byte.
	var cost, reserved []int64
	deadline := time.Now().Add(20 * time.Second)
	for cost, reserved = spendLines(t, nodes); len(cost) < calls; cost, reserved = spendLines(t, nodes) {
		if time.Now().After(deadline) {
			t.Fatalf("%d access lines with a cost for %d calls", len(cost), calls)
		}
		time.Sleep(50 * time.Millisecond)
	}
	settled, overshoot := int64(0), int64(math.MinInt64)
	for i := range cost {
		settled += cost[i]
		if reserved[i] > 0 || cost[i] > 0 { // admitted: refused calls reserve and cost nothing
			overshoot = max(overshoot, cost[i]-reserved[i])
		}
	}
	// A call that cannot fit reads the shared ledger: node A's metrics then
	// hold what every node settled, once the nodes sent their settlements
	// (each within 20 ms of its last call).
	huge := budgetCall{path: budgetCalls[0].path, body: `{"model":"chat-model","max_tokens":100000000,"messages":[{"role":"user","content":"hi"}]}`}
	var ledger int64 = -1
	for deadline := time.Now().Add(10 * time.Second); ledger != settled && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if status, err := huge.send(nodes[0].base, keyA); err != nil || status != 429 {
			t.Fatalf("a call past any budget: %d %v", status, err)
		}
		_, _, metrics := do(t, "GET", nodes[0].admin+"/metrics", "", nil, "")
		for _, line := range strings.Split(metrics, "\n") {
			if v, ok := strings.CutPrefix(line, `gateway_budget_spent_usd{budget="team"} `); ok {
				ledger = pico(t, v)
			}
		}
	}
	limit := pico(t, budget)
	t.Logf("budget $%s, settled $%.6f over %d calls (%d admitted, %d refused), largest overshoot of one call (cost - reserved) $%.6f",
		budget, float64(settled)/1e12, calls, admitted, refused, float64(overshoot)/1e12)
	if ledger != settled {
		t.Errorf("the shared ledger holds %d pico-USD, the access lines add up to %d", ledger, settled)
	}
	if settled > limit+max(overshoot, 0) {
		t.Fatalf("settled %d pico-USD: over the budget %d by more than the largest overshoot %d", settled, limit, overshoot)
	}
	if refused == 0 || admitted == 0 || limit-settled > limit/5 {
		t.Fatalf("the test did not spend the budget: %d admitted, %d refused, %d of %d left", admitted, refused, limit-settled, limit)
	}
}

// check warns when a budget applies to a model that some deployment serves
// without a price: its calls would cost nothing.
func TestCheckWarnsUnpricedModel(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "budget.yaml")
	writeConfig(t, path, dir, "127.0.0.1:1", "127.0.0.1:2", "")
	b, _ := os.ReadFile(path)
	y := strings.Replace(string(b), "{id: team-a, key: "+keyA+"}", "{id: team-a, key: "+keyA+", budget: {usd: 10}}", 1)
	if y == string(b) {
		t.Fatal("the fixture's key was not found")
	}
	os.WriteFile(path, []byte(y), 0o600)
	code, out, errOut := runBin(t, "", "check", path)
	if code != 0 || !strings.HasPrefix(out, "config ok") || !strings.Contains(errOut, `warning: model "old-model" has no pricing`) {
		t.Fatalf("exit %d, %q %q", code, out, errOut)
	}
	good := filepath.Join(dir, "good.yaml")
	writeConfig(t, good, dir, "127.0.0.1:1", "127.0.0.1:2", "")
	if _, _, errOut := runBin(t, "", "check", good); strings.Contains(errOut, "pricing") {
		t.Fatalf("a config without budgets: %q", errOut)
	}
}
