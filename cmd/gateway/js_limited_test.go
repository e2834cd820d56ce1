package main

import (
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
	node := installJS(t)
	e := newEnv(t)
	e.writeConfig("", "  - {id: team-c, key: "+keyC+", limits: {tokens_per_minute: 1000000}}\n")
	g := e.start("-admin-listen", "off")
	runScript(t, node, g, "limited-stream.mjs", "GATEWAY_URL="+g.base, "GATEWAY_LIMITED_KEY="+keyC, "GATEWAY_FREE_KEY="+keyA,
		"GATEWAY_CHAT_MODEL=old-model")
	// The first stream, the limited key's, asked the provider for its usage.
	reqs := e.sim.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[0].Body), `"stream_options":{"include_usage":true}`) ||
		strings.Contains(string(reqs[1].Body), "stream_options") {
		t.Fatalf("the provider got %d requests: %q", len(reqs), reqs)
	}
}
