package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/edgetls/testca"
)

// TestJSSDKsOverTLS runs jsDir's node tests, every family with streams,
// over the TLS listener alone (listen: off), node trusting the test CA by
// NODE_EXTRA_CA_CERTS: the demo's deployments, models and groups, from a
// config file.
func TestJSSDKsOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the JS SDK tests install packages and start node")
	}
	node := installJS(t)
	dir := t.TempDir()
	ca := testca.New(t, "edge")
	leaf := ca.Server(t, 90*24*time.Hour)
	y := fmt.Sprintf("listen: off\nlisten_tls: 127.0.0.1:0\ntls: {cert_file: %q, key_file: %q}\nstore: {path: %q}\n",
		leaf.CertFile, leaf.KeyFile, filepath.Join(dir, "data"))
	y += "keys:\n  - {id: demo, key: " + demoKey + "}\nupstreams:\n"
	var names []string
	for _, n := range []string{"sim-a", "sim-b"} {
		s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: n, AlphaKey: "sim-alpha", BetaKey: "sim-beta", GammaKey: "sim-gamma", NoRecord: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		base := "http://" + s.Addr()
		y += fmt.Sprintf("  - {name: %s-alpha, family: alpha, base_url: %q, api_key: sim-alpha}\n", n, base)
		y += fmt.Sprintf("  - {name: %s-beta, family: beta, base_url: %q, api_key: sim-beta}\n", n, base+"/v1")
		y += fmt.Sprintf("  - {name: %s-gamma, family: gamma, base_url: %q, api_key: sim-gamma}\n", n, base)
		names = append(names, n+"-alpha", n+"-beta", n+"-gamma")
	}
	y += fmt.Sprintf("models:\n  - {id: demo-chat, upstreams: [%s, %s, %s, %s], reasoning: {supported_efforts: [low, medium, high, max], default_effort: medium, default_enabled: true}}\n",
		names[0], names[1], names[3], names[4])
	y += fmt.Sprintf("  - {id: demo-image, image: true, upstreams: [%s, %s, %s, %s]}\n", names[1], names[2], names[4], names[5])
	y += fmt.Sprintf("groups:\n  - {name: a, upstreams: [%s, %s, %s]}\n  - {name: b, upstreams: [%s, %s, %s]}\n",
		names[0], names[1], names[2], names[3], names[4], names[5])
	cfgPath := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	g := launch(t, dir, []string{"-config", cfgPath, "-admin-listen", "off", "-log-format", "json"}, nil)
	base := tlsBase(t, g)
	runJS(t, node, g, "GATEWAY_URL="+base, "GATEWAY_KEY="+demoKey, "NODE_EXTRA_CA_CERTS="+ca.CertFile)
}
