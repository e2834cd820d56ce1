package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestJSSDKLimitedStream runs jsDir's limited-stream.mjs: openai streaming a
// chat completion on a key with a tokens limit (the gateway asks the provider
// for the usage and takes it out of the stream) sees the chunks it sees on a
// key without limits, none with usage.
func TestJSSDKLimitedStream(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the JS SDK tests install packages and start node")
	}
	npm := needTool(t, "npm", "npm")
	node := needTool(t, "node", "nodejs")
	ci := exec.Command(npm, "ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
	ci.Dir = jsDir
	if out, err := ci.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", jsDir, err, out)
	}
	e := newEnv(t)
	e.writeConfig("", "  - {id: team-c, key: "+keyC+", limits: {tokens_per_minute: 1000000}}\n")
	g := e.start("-admin-listen", "off")
	run := exec.Command(node, "limited-stream.mjs")
	run.Dir = jsDir
	run.Env = append(os.Environ(), "GATEWAY_URL="+g.base, "GATEWAY_LIMITED_KEY="+keyC, "GATEWAY_FREE_KEY="+keyA,
		"GATEWAY_CHAT_MODEL=old-model", "NO_COLOR=1")
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("node limited-stream.mjs: %v\n%s\ngateway log:\n%s", err, out, g.stderr.String())
	}
	t.Logf("%s", out)
	// The first stream, the limited key's, asked the provider for its usage.
	reqs := e.sim.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[0].Body), `"stream_options":{"include_usage":true}`) ||
		strings.Contains(string(reqs[1].Body), "stream_options") {
		t.Fatalf("the provider got %d requests: %q", len(reqs), reqs)
	}
}
