package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestPrometheusScrape has a real Prometheus (Debian's prometheus, installed
// by .ci/apt-install when missing) scrape the offline demo's admin listener
// while it serves a short, bounded load, then asks Prometheus' HTTP API for
// the request counters and histogram_quantile over the latency histograms:
// what a Grafana dashboard of the gateway runs. It skips only when the
// package cannot be installed.
func TestPrometheusScrape(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a Prometheus server")
	}
	prom := needTool(t, "prometheus", "prometheus")
	g := launch(t, t.TempDir(), []string{"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-log-format", "json", "-access-log", "off"}, nil)
	api := startPrometheus(t, prom, g.admin)

	const half = 60
	load := func() {
		for range half {
			if status := chatCall(t, g.base, demoKey); status != 200 {
				t.Fatalf("chat: %d", status)
			}
		}
		chatCall(t, g.base, "wrong-key")
	}
	ok := `sum(gateway_requests_total{endpoint="chat_completions",status="2xx"})`
	load()
	api.waitFor(t, ok, half)
	load() // a second scrape with more samples, so rate() has an increase
	api.waitFor(t, ok, 2*half)
	api.waitFor(t, `sum(gateway_requests_total{family="beta",status="4xx"})`, 2)
	api.waitFor(t, `sum(gateway_rejections_total{reason="auth_invalid"})`, 2)
	api.waitFor(t, `sum(gateway_upstream_duration_seconds_count)`, 2*half)

	for _, q := range []string{
		`histogram_quantile(0.99, sum by (le) (gateway_upstream_duration_seconds_bucket))`,
		`histogram_quantile(0.99, sum by (le) (rate(gateway_upstream_first_byte_seconds_bucket[5m])))`,
		`histogram_quantile(0.5, sum by (le) (rate(gateway_upstream_duration_seconds_bucket[5m])))`,
	} {
		v := api.value(t, q)
		// The demo's simulator answers on loopback: well under the 10 s bound,
		// and above 0 (the first bucket's upper bound is 25 µs).
		if math.IsNaN(v) || v <= 0 || v > 10 {
			t.Errorf("%s = %v", q, v)
		}
		t.Logf("%s = %.6f s", q, v)
	}
	perDep := api.vector(t, `histogram_quantile(0.99, sum by (deployment, le) (rate(gateway_upstream_duration_seconds_bucket[5m])))`)
	if len(perDep) == 0 {
		t.Error("no per-deployment quantile")
	}
	checkDashboard(t, api, g.admin)
	if v := api.vector(t, `sum by (kind) (gateway_tokens_total)`); len(v) > 0 {
		if in := api.value(t, `sum(gateway_tokens_total{kind="input"})`); !(in > 0) {
			t.Errorf("input tokens counted: %v", in)
		}
		t.Logf("tokens by kind: %v", v)
	} else {
		t.Log("gateway_tokens_total is not exported by this build: tokens not checked")
	}
}

// chatCall sends one chat completion and returns its status.
func chatCall(t *testing.T, base, key string) int {
	t.Helper()
	status, _, _ := do(t, "POST", base+chatPath, key, nil, `{"model":"demo-chat","messages":[{"role":"user","content":"hi"}]}`)
	return status
}

// promAPI is a Prometheus server's HTTP API.
type promAPI struct{ base string }

// startPrometheus runs prom scraping target every second and waits until it is ready.
func startPrometheus(t *testing.T, prom, target string) promAPI {
	t.Helper()
	dir := t.TempDir()
	u, _ := url.Parse(target)
	cfg := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n  - job_name: gateway\n    static_configs: [{targets: [%q]}]\n", u.Host)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	log := &lineLog{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	api := promAPI{base: "http://" + addr}
	eventually(t, func() string { return "Prometheus to be ready:\n" + log.String() }, func() bool {
		resp, err := http.Get(api.base + "/-/ready")
		if err != nil {
			return false // not listening yet
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return api
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// eventually polls cond until it holds; it fails after 90 s, a guard against
// a hang rather than a measure of speed (Prometheus scrapes every second).
func eventually(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// vector runs an instant query and returns its samples.
func (p promAPI) vector(t *testing.T, q string) []promSample {
	t.Helper()
	status, _, body := do(t, "GET", p.base+"/api/v1/query?query="+url.QueryEscape(q), "", nil, "")
	var r struct {
		Status string `json:"status"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || status != 200 || r.Status != "success" || r.Data.ResultType != "vector" {
		t.Fatalf("query %s: %d %s %v", q, status, body, err)
	}
	return r.Data.Result
}

// value runs a query whose answer is one sample and returns its value (NaN
// when there is no sample).
func (p promAPI) value(t *testing.T, q string) float64 {
	t.Helper()
	v := p.vector(t, q)
	if len(v) != 1 {
		return math.NaN()
	}
	s, _ := v[0].Value[1].(string)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("query %s: value %v", q, v[0].Value)
	}
	return f
}

// waitFor waits until q's value is want.
func (p promAPI) waitFor(t *testing.T, q string, want float64) {
	t.Helper()
	last := math.NaN()
	eventually(t, func() string { return fmt.Sprintf("%s = %v (last %v)", q, want, last) }, func() bool {
		last = p.value(t, q)
		return last == want
	})
}

// dashboardPath is the Grafana dashboard built on the gateway's metrics.
const dashboardPath = "../../docs/grafana/gateway-dashboard.json"

// checkDashboard runs every query of the Grafana dashboard through
// Prometheus (Grafana's variables replaced by what they stand for), and
// checks that every metric it names is exported by the gateway (with its
// # TYPE line at least: a key's limits have samples only once configured),
// but the token counters, which come from another part of the gateway, and
// the round trips to Redis, written with Redis only; and that a panel shows
// each metric of the rate limits.
func checkDashboard(t *testing.T, api promAPI, admin string) {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	_, _, exported := do(t, "GET", admin+"/metrics", "", nil, "")
	exported = "\n" + exported
	vars := strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$deployment", ".*")
	names := regexp.MustCompile(`gateway_[a-z_]+`)
	queries := 0
	queried := map[string]bool{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			queries++
			api.vector(t, vars.Replace(tg.Expr)) // fails the test on a query Prometheus refuses
			for _, n := range names.FindAllString(tg.Expr, -1) {
				queried[n] = true
				if n == "gateway_tokens_total" || n == "gateway_ratelimit_backend_calls_total" {
					continue
				}
				if !strings.Contains(exported, "\n"+n+" ") && !strings.Contains(exported, "\n"+n+"{") && !strings.Contains(exported, "\n# TYPE "+n+" ") {
					t.Errorf("panel %q queries %s, which the gateway does not export", p.Title, n)
				}
			}
		}
	}
	for _, m := range regexp.MustCompile(`\n# TYPE (gateway_ratelimit_[a-z_]+) `).FindAllStringSubmatch(exported, -1) {
		if !queried[m[1]] {
			t.Errorf("no panel of the dashboard shows %s", m[1])
		}
	}
	if queries < 20 {
		t.Fatalf("%d queries in the dashboard", queries)
	}
	t.Logf("%d dashboard queries accepted by Prometheus", queries)
}
