package proxy

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/config"
)

// withProbe gives d1-beta an active health check every 50ms.
func withProbe(y string) string {
	return strings.Replace(y, "api_key: up-beta}", "api_key: up-beta, health_check: {path: /models, interval: 50ms, timeout: 40ms}}", 1)
}

// modelsProbes counts the GET /v1/models that reached the simulator s.
func modelsProbes(s *sim.Server) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Method == "GET" && r.Path == "/v1/models" {
			n++
		}
	}
	return n
}

// TestHealthProbeStatusMetricsReload: a deployment's probes show on /status,
// in /metrics and in the exclusion's log line; failing probes exclude it, a
// probe that succeeds brings it back; a reload that replaces the deployment
// stops its probes.
func TestHealthProbeStatusMetricsReload(t *testing.T) {
	e := newEnv(t, func(y string) string { return longCooldown(withProbe(y)) })
	t.Cleanup(e.gw.Close)
	d := e.gw.state.Load().deps["d1-beta"]
	eventually(t, "a first probe", func() bool { p := d.LastProbe(); return p != nil && p.OK })
	_, _, body := adminGet(e.gw, "/status")
	if !strings.Contains(string(body), `<td class="probe">ok at `) {
		t.Fatalf("/status does not show the probe:\n%s", body)
	}

	e.sim("d1").SetFault(sim.Fault{Status: 503})
	eventually(t, "exclusion by probes", func() bool { return d.Excluded(time.Now().UnixNano()) })
	_, _, body = adminGet(e.gw, "/status")
	if !strings.Contains(string(body), `failed (upstream answered 503) at `) {
		t.Fatalf("/status does not show the failed probe:\n%s", body)
	}
	if !strings.Contains(e.logBuf.String(), `"msg":"deployment excluded after failed health probes","deployment":"d1-beta"`) {
		t.Fatalf("no exclusion line:\n%s", e.logBuf.String())
	}
	e.sim("d1").SetFault(sim.Fault{})
	eventually(t, "back by a probe", func() bool { return !d.Excluded(time.Now().UnixNano()) })

	var m bytes.Buffer
	e.gw.WritePrometheus(&m)
	for _, want := range []string{
		"# HELP gateway_upstream_probes_total active health probes",
		`gateway_upstream_probes_total{deployment="d1-beta",result="ok"} `,
		`gateway_upstream_probes_total{deployment="d1-beta",result="failed"} `,
		"# HELP gateway_upstream_first_byte_ewma_seconds ",
		`gateway_upstream_first_byte_ewma_seconds{deployment="d2-beta"} `,
	} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("/metrics has no %q", want)
		}
	}
	if strings.Contains(m.String(), `gateway_upstream_probes_total{deployment="d2-beta"`) {
		t.Error("probes counted for a deployment without a health check")
	}

	// Reloaded without the check, d1-beta is a new deployment: the old one's
	// probes end.
	yaml := longCooldown(fmt.Sprintf(testConfigYAML, e.sims[0].Addr(), e.sims[1].Addr(), HashKey(keyB)))
	cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if err := e.gw.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	if e.gw.state.Load().deps["d1-beta"] == d {
		t.Fatal("the deployment was kept though its health check changed")
	}
	before := modelsProbes(e.sim("d1"))
	time.Sleep(200 * time.Millisecond) // four intervals: no probe may come
	if n := modelsProbes(e.sim("d1")); n != before {
		t.Fatalf("%d probes after the reload that removed the check", n-before)
	}
}
