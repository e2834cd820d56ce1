package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelgate/gateway/bench/sim"
)

// TestJSSDKFallback runs jsDir's fallback.mjs: the openai npm package calls busy-model,
// whose only deployment answers every call 429 with retry-after, plain and streamed. On a
// gateway with retries left both calls succeed from spare-model's deployment (under its
// provider's name) and .withResponse() shows x-gateway-model: spare-model; on a gateway
// whose retry.attempts is 1 the SDK gets the deployment's 429 body and retry-after as the
// simulator produced them, without x-gateway-model, and spare-model is never called.
func TestJSSDKFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the JS SDK tests install packages and start node")
	}
	node := installJS(t)
	busy, err := sim.Listen("127.0.0.1:0", sim.Options{Name: "busy", BetaKey: upBeta})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	spare, err := sim.Listen("127.0.0.1:0", sim.Options{Name: "spare", BetaKey: upBeta})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { spare.Close() })
	const retryAfter = "7"
	busy.SetFault(sim.Fault{Status: 429, RetryAfter: retryAfter})
	// What the busy deployment answers, asked directly: the spent case must get it as it was.
	status, h, busyAnswer := do(t, "POST", busy.URL()+"/v1/chat/completions", upBeta, nil, chatBody("busy-model"))
	if status != 429 || h.Get("Retry-After") != retryAfter {
		t.Fatalf("the busy simulator answers %d retry-after %q: %s", status, h.Get("Retry-After"), busyAnswer)
	}
	busy.Reset()

	dir := t.TempDir()
	config := func(name, extra string) string {
		y := fmt.Sprintf(`store: {path: %q}
keys:
  - {id: team-a, key: %s}
upstreams:
  - {name: busy-beta, family: beta, base_url: "http://%[3]s/v1", api_key: %[5]s}
  - {name: busy2-beta, family: beta, base_url: "http://%[3]s/v1", api_key: %[5]s}
  - {name: spare-beta, family: beta, base_url: "http://%[4]s/v1", api_key: %[5]s}
models:
  - {id: busy-model, upstreams: [busy-beta], fallbacks: [spare-model]}
  - {id: busy2-model, upstreams: [busy2-beta], fallbacks: [spare-model]}
  - {id: spare-model, upstreams: [{name: spare-beta, model: spare-provider}]}
%s`, filepath.Join(dir, name), keyA, busy.Addr(), spare.Addr(), upBeta, extra)
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	args := func(path string) []string {
		return []string{"-config", path, "-listen", "127.0.0.1:0", "-admin-listen", "off", "-log-format", "json"}
	}
	g := launch(t, dir, args(config("fallback", "")), nil)
	spent := launch(t, dir, args(config("spent", "retry: {attempts: 1}\n")), nil)

	run := exec.Command(node, "fallback.mjs")
	run.Dir = jsDir
	run.Env = append(os.Environ(), "GATEWAY_URL="+g.base, "GATEWAY_SPENT_URL="+spent.base, "GATEWAY_KEY="+keyA,
		"GATEWAY_BUSY_ANSWER="+busyAnswer, "GATEWAY_BUSY_RETRY_AFTER="+retryAfter, "NO_COLOR=1")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("node fallback.mjs: %v\n%s\ngateway logs:\n%s\n%s", err, out, g.stderr.String(), spent.stderr.String())
	}
	t.Logf("%s", out)
	// The fallback gateway's two calls reached spare under its provider's name; the spent
	// gateway's two reached only the busy deployments, once each.
	reqs := spare.Requests()
	if len(reqs) != 2 {
		t.Fatalf("spare-model's deployment saw %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		body := string(r.Body)
		if !strings.Contains(body, `"model":"spare-provider"`) || strings.Contains(body, "busy-model") ||
			strings.Contains(body, `"stream":true`) != (i == 1) {
			t.Fatalf("spare's request %d: %s", i, body)
		}
	}
	var spentModels []string
	for _, r := range busy.Requests()[len(busy.Requests())-2:] {
		for _, m := range []string{"busy-model", "busy2-model"} {
			if strings.Contains(string(r.Body), `"model":"`+m+`"`) {
				spentModels = append(spentModels, m)
			}
		}
	}
	if strings.Join(spentModels, ",") != "busy-model,busy2-model" {
		t.Fatalf("the spent gateway's last calls to the busy deployment were for %v", spentModels)
	}
}
