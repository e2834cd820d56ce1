package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/affinity"
	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy/accesslog"
	"github.com/modelgate/gateway/proxy/promtext"
	"github.com/modelgate/gateway/proxy/upstream"
	"github.com/modelgate/gateway/store"
)

const chatPath = "/v1/router/beta/v1/chat/completions"

// newOpsEnv is newEnv with the gateway restarted on opts, with an access log in
// JSON to the returned buffer unless opts has one.
func newOpsEnv(t *testing.T, edit func(string) string, opts Options) (*testEnv, *syncBuffer) {
	t.Helper()
	e := newEnv(t, edit)
	access := &syncBuffer{}
	if opts.AccessLog == nil {
		opts.AccessLog = accesslog.New(access, accesslog.JSON)
	}
	e.stop()
	st, err := store.OpenPebble(e.dir, store.PebbleOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.store = st
	opts.Store = st
	opts.Logger = slog.New(slog.NewJSONHandler(e.logBuf, nil))
	if e.gw, err = New(e.cfg, opts); err != nil {
		t.Fatal(err)
	}
	if e.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	e.base = "http://" + e.ln.Addr().String()
	e.srv = e.gw.NewServer()
	go e.srv.Serve(e.ln)
	return e, access
}

// longCooldown keeps excluded deployments excluded for the whole test.
func longCooldown(y string) string { return strings.Replace(y, "cooldown: 300ms", "cooldown: 1h", 1) }

// scrape reads the gateway's /metrics, as the admin listener serves it, into
// series → value.
func (e *testEnv) scrape() map[string]float64 {
	e.t.Helper()
	status, ct, body := adminGet(e.gw, "/metrics")
	if status != 200 || !strings.HasPrefix(ct, "text/plain") {
		e.t.Fatalf("/metrics: %d %q", status, ct)
	}
	return parseMetrics(e.t, body)
}

// adminGet serves GET path with the gateway's admin handler.
func adminGet(g *Gateway, path string) (status int, contentType string, body []byte) {
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI(path)
	g.AdminHandler()(&ctx)
	return ctx.Response.StatusCode(), string(ctx.Response.Header.ContentType()), ctx.Response.Body()
}

// parseMetrics reads a Prometheus text exposition into series → value, and
// checks that every series is written once and every metric family in one
// group of lines.
func parseMetrics(t testing.TB, body []byte) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	done := map[string]bool{} // families whose group of lines has ended
	family := ""
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		f, _, _ := strings.Cut(line, "{")
		f, _, _ = strings.Cut(f, " ")
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			f = strings.TrimSuffix(f, suffix)
		}
		if f != family {
			if done[f] {
				t.Fatalf("the lines of %s are not together", f)
			}
			done[family], family = true, f
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("bad metrics line %q", line)
		}
		if _, dup := m[line[:i]]; dup {
			t.Fatalf("series %s written twice", line[:i])
		}
		m[line[:i]] = v
	}
	return m
}

// eventually waits for cond, which the gateway makes true after the client has
// its answer (a stream's call finishes when fasthttp closes it). It fails the
// test only when cond stays false for 10 s: it asserts an outcome, not a speed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
	}
}

// accessLines returns the access log's JSON lines.
func accessLines(t *testing.T, buf *syncBuffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("access log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

// accessLine returns the one access log line of request id.
func accessLine(t *testing.T, buf *syncBuffer, id string) map[string]any {
	t.Helper()
	var found map[string]any
	for _, l := range accessLines(t, buf) {
		if l["request_id"] == id {
			if found != nil {
				t.Fatalf("two access log lines for %s", id)
			}
			found = l
		}
	}
	if found == nil {
		t.Fatalf("no access log line for %s in\n%s", id, buf.String())
	}
	return found
}

func withHeaders(key string, kv ...string) map[string]string {
	h := bearer(key)
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = kv[i+1]
	}
	return h
}

func TestMetricsMoveWithRequests(t *testing.T) {
	e, _ := newOpsEnv(t, nil, Options{})
	before := e.scrape()
	var betaIn, betaOut int
	do := func(method, path string, h map[string]string, body string, want int) *fasthttp.ResponseHeader {
		t.Helper()
		status, hdr, b := e.do(method, path, h, body)
		if status != want {
			t.Fatalf("%s %s: %d %s", method, path, status, b)
		}
		betaIn += len(body)
		betaOut += len(b)
		return hdr
	}
	chat := `{"model":"chat-model","session_id":"metrics-1","messages":[{"role":"user","content":"hi"}]}`
	hdr := do("POST", chatPath, bearer(keyA), chat, 200)
	dep := string(hdr.Peek("x-sim-deployment")) + "-beta"
	do("POST", chatPath, bearer("sk-not-a-key"), chat, 401)
	do("POST", "/v1/router/beta/v1/responses", withHeaders(keyA, "Idempotency-Key", "k1"), `{"model":"chat-model","input":"x"}`, 400)
	do("POST", "/v1/router/beta/v1/responses", bearer(keyA), `{"model":"chat-model","input":"x"}`, 200)
	do("GET", "/v1/router/beta/v1/responses/resp_unknown", bearer(keyA), "", 404)
	img := testImage(pngHead, 3000)
	e.mustUpload(keyA, img)
	after := e.scrape()

	f := func(series string, want float64) {
		t.Helper()
		if got := after[series] - before[series]; got != want {
			t.Errorf("%s moved by %v, want %v", series, got, want)
		}
	}
	f(`gateway_requests_total{family="beta",endpoint="chat_completions",model="chat-model",status="2xx"}`, 1)
	f(`gateway_requests_total{family="beta",endpoint="chat_completions",model="",status="4xx"}`, 1)
	f(`gateway_requests_total{family="beta",endpoint="responses_create",model="",status="4xx"}`, 1)
	f(`gateway_requests_total{family="beta",endpoint="responses_create",model="chat-model",status="2xx"}`, 1)
	f(`gateway_requests_total{family="beta",endpoint="responses_get",model="",status="4xx"}`, 1)
	f(`gateway_requests_total{family="alpha",endpoint="files_upload",model="",status="2xx"}`, 1)
	f(`gateway_rejections_total{family="beta",reason="auth_invalid"}`, 1)
	f(`gateway_rejections_total{family="beta",reason="idempotency_key"}`, 1)
	f(`gateway_rejections_total{family="beta",reason="response_not_found"}`, 1)
	f(`gateway_request_bytes_total{family="beta"}`, float64(betaIn))
	f(`gateway_response_bytes_total{family="beta"}`, float64(betaOut))
	f(`gateway_store_operations_total{op="put_response",result="ok"}`, 1)
	f(`gateway_store_operations_total{op="get_response",result="not_found"}`, 1)
	f(`gateway_store_operations_total{op="put_file",result="ok"}`, 1)
	f(`gateway_store_operation_duration_seconds_count{op="put_response"}`, 1)
	f(`gateway_files_stored`, 1)
	f(`gateway_files_stored_bytes`, float64(len(img)))
	f(`gateway_active_streams`, 0)
	// Two calls reached a beta deployment: the chat and the responses create.
	sum := func(series string) float64 {
		n := 0.0
		for _, d := range []string{"d1-beta", "d2-beta"} {
			k := fmt.Sprintf(series, d)
			n += after[k] - before[k]
		}
		return n
	}
	for _, series := range []string{
		`gateway_affinity_picks_total{deployment="%s"}`,
		`gateway_upstream_duration_seconds_count{deployment="%s"}`,
		`gateway_upstream_first_byte_seconds_count{deployment="%s"}`,
		`gateway_upstream_duration_seconds_bucket{deployment="%s",le="+Inf"}`,
		`gateway_upstream_duration_seconds_bucket{deployment="%s",le="600"}`,
		`gateway_upstream_responses_total{deployment="%s",status="2xx"}`,
	} {
		if got := sum(series); got != 2 {
			t.Errorf("%s summed over the beta deployments moved by %v, want 2", series, got)
		}
	}
	if after[`gateway_upstream_duration_seconds_count{deployment="`+dep+`"}`] < 1 {
		t.Errorf("the chat's deployment %s has no duration sample", dep)
	}
	// Prometheus' kind: cumulative le buckets that histogram_quantile reads.
	for k := range after {
		if strings.Contains(k, "vmrange") {
			t.Errorf("a VictoriaMetrics-only histogram series: %s", k)
		}
	}
	if after[`gateway_store_operation_duration_seconds_bucket{op="put_response",le="+Inf"}`] < 1 {
		t.Error("the store's histogram has no le buckets")
	}
	if after["go_goroutines"] == 0 || after["process_resident_memory_bytes"] == 0 {
		t.Error("the Go runtime and process metrics are missing")
	}
}

// A session whose first choice is excluded moves: the pick is counted as a
// session move on the deployment it went to, and the exclusion shows.
func TestMetricsSessionMovesAndHealth(t *testing.T) {
	// failover off: the 503s reach the client and count towards health
	e, _ := newOpsEnv(t, func(y string) string { return noFailover(longCooldown(y)) }, Options{})
	var onD1 string
	for i := 0; onD1 == ""; i++ {
		if i == 100 {
			t.Fatal("no session of 100 lands on d1")
		}
		s := fmt.Sprintf("move-%d", i)
		if e.deploymentOf(withSession(keyA, s), chatBody("")) == "d1" {
			onD1 = s
		}
	}
	m := e.scrape()
	if m[`gateway_deployment_excluded{deployment="d1-beta",family="beta"}`] != 0 {
		t.Fatal("d1-beta excluded before any failure")
	}
	e.sim("d1").SetFault(sim.Fault{Status: 503})
	for range 2 { // health.failures is 2
		if status, _, _ := e.do("POST", chatPath, withSession(keyA, onD1), chatBody("")); status != 503 {
			t.Fatalf("want the upstream's 503, got %d", status)
		}
	}
	before := e.scrape()
	if before[`gateway_deployment_excluded{deployment="d1-beta",family="beta"}`] != 1 ||
		before[`gateway_deployment_excluded{deployment="d2-beta",family="beta"}`] != 0 {
		t.Fatalf("exclusion not shown: d1 %v d2 %v", before[`gateway_deployment_excluded{deployment="d1-beta",family="beta"}`],
			before[`gateway_deployment_excluded{deployment="d2-beta",family="beta"}`])
	}
	if before[`gateway_upstream_responses_total{deployment="d1-beta",status="5xx"}`] != 2 {
		t.Fatalf("d1-beta 5xx answers: %v", before[`gateway_upstream_responses_total{deployment="d1-beta",status="5xx"}`])
	}
	if got := e.deploymentOf(withSession(keyA, onD1), chatBody("")); got != "d2" {
		t.Fatalf("session on %s while d1 is excluded", got)
	}
	e.deploymentOf(bearer(keyA), chatBody("")) // no session: a pick, never a move
	after := e.scrape()
	for series, want := range map[string]float64{
		`gateway_affinity_picks_total{deployment="d2-beta"}`:         2,
		`gateway_affinity_session_moves_total{deployment="d2-beta"}`: 1,
		`gateway_affinity_picks_total{deployment="d1-beta"}`:         0,
		`gateway_affinity_session_moves_total{deployment="d1-beta"}`: 0,
	} {
		if got := after[series] - before[series]; got != want {
			t.Errorf("%s moved by %v, want %v", series, got, want)
		}
	}
}

// gammaDraw asks the gamma deployments of group for an image.
func (e *testEnv) gammaDraw(group string) int {
	e.t.Helper()
	status, _, _ := e.do("POST", "/gamma/"+group+"/v1beta/models/image-model:generateContent",
		map[string]string{"x-gamma-api-key": keyA}, `{"contents":[{"role":"user","parts":[{"text":"draw"}]}]}`)
	return status
}

func (e *testEnv) readyz() (int, string) {
	e.t.Helper()
	status, _, body := e.do("GET", "/readyz", nil, "")
	return status, string(body)
}

// readyzReport reads /readyz's JSON.
func (e *testEnv) readyzReport() (int, readinessReport) {
	e.t.Helper()
	status, body := e.readyz()
	var r readinessReport
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		e.t.Fatalf("/readyz: %d %q: %v", status, body, err)
	}
	return status, r
}

// excludeFamily makes every deployment of fam fail until it is excluded.
func (e *testEnv) excludeFamily(fam string) {
	for _, d := range e.gw.state.Load().deps {
		if d.Family().String() == fam {
			for range e.cfg.Health.Failures {
				d.Failed(upstream.StatusError(500))
			}
		}
	}
}

// TestReadyzFollowsDeploymentHealth: the node is ready while one family can
// serve; a family with no healthy deployment shows as failing in the body.
func TestReadyzFollowsDeploymentHealth(t *testing.T) {
	e, _ := newOpsEnv(t, longCooldown, Options{})
	if status, _, body := e.do("GET", "/healthz", nil, ""); status != 200 || string(body) != "ok\n" {
		t.Fatalf("/healthz: %d %q", status, body)
	}
	status, r := e.readyzReport()
	ok2 := familyHealth{Status: "ok", Healthy: 2, Deployments: 2}
	if status != 200 || !r.Ready || r.Store != "open" || r.Config == nil || *r.Config != (configReport{Models: 4, Deployments: 6}) ||
		r.Families["alpha"] != ok2 || r.Families["beta"] != ok2 || r.Families["gamma"] != ok2 {
		t.Fatalf("/readyz: %d %+v", status, r)
	}
	e.sim("d1").SetFault(sim.Fault{Status: 500})
	for range 2 {
		if s := e.gammaDraw("one"); s != 500 {
			t.Fatalf("want the upstream's 500, got %d", s)
		}
	}
	status, r = e.readyzReport()
	if status != 200 || r.Families["gamma"] != (familyHealth{Status: "ok", Healthy: 1, Deployments: 2}) {
		t.Fatalf("one gamma deployment left: %d %+v", status, r)
	}
	e.excludeFamily("gamma")
	status, r = e.readyzReport()
	if status != 200 || !r.Ready || r.Families["gamma"] != (familyHealth{Status: "failing", Deployments: 2}) || r.Families["beta"] != ok2 {
		t.Fatalf("gamma failing, alpha and beta serving: %d %+v", status, r)
	}
	e.excludeFamily("alpha")
	e.excludeFamily("beta")
	status, r = e.readyzReport()
	if status != 503 || r.Ready || len(r.Reasons) != 1 || r.Reasons[0] != "no family has a healthy deployment" {
		t.Fatalf("every family failing: %d %+v", status, r)
	}
	if status, _, _ := e.do("GET", "/healthz", nil, ""); status != 200 {
		t.Fatalf("/healthz while not ready: %d", status)
	}
}

// TestHealthChangesLogged: an exclusion is logged with its cause, once per
// deployment however often it repeats within upstream.LogEvery, and names no
// key or address.
func TestHealthChangesLogged(t *testing.T) {
	e, access := newOpsEnv(t, longCooldown, Options{})
	e.sim("d1").SetFault(sim.Fault{Status: 503})
	for range 6 {
		e.gammaDraw("one")
	}
	var excluded []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(e.logBuf.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "deployment excluded after failures in a row" {
			excluded = append(excluded, m)
		}
	}
	if len(excluded) != 1 || excluded[0]["deployment"] != "d1-gamma" || excluded[0]["cause"] != "upstream answered 503" {
		t.Fatalf("exclusion lines: %v\n%s", excluded, e.logBuf.String())
	}
	if logs := e.logBuf.String(); strings.Contains(logs, "up-gamma") || strings.Contains(logs, e.sims[0].Addr()) {
		t.Fatalf("the log names a key or an address:\n%s", logs)
	}
	_ = access
}

func TestAdminHandlerAndDrain(t *testing.T) {
	e, _ := newOpsEnv(t, nil, Options{})
	for _, p := range []string{"/metrics", "/status"} {
		if status, _, _ := e.do("GET", p, nil, ""); status != 404 {
			t.Fatalf("%s on the client listener: %d", p, status)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin := e.gw.NewAdminServer()
	go admin.Serve(ln)
	t.Cleanup(func() { admin.Shutdown() })
	get := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+ln.Addr().String()+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	e.deploymentOf(bearer(keyA), chatBody(""))
	status, body := get("GET", "/metrics")
	m := parseMetrics(t, []byte(body))
	if status != 200 || m[`gateway_requests_total{family="beta",endpoint="chat_completions",model="chat-model",status="2xx"}`] != 1 {
		t.Fatalf("admin /metrics: %d\n%s", status, body)
	}
	if status, body := get("GET", "/readyz"); status != 200 || !strings.HasPrefix(body, `{"ready":true,`) {
		t.Fatalf("admin /readyz: %d %s", status, body)
	}
	if status, _ := get("GET", "/v1/models"); status != 404 {
		t.Fatalf("admin serves client paths: %d", status)
	}
	if status, _ := get("POST", "/metrics"); status != 405 {
		t.Fatalf("POST /metrics on admin: %d", status)
	}
	e.gw.Drain()
	if status, body := get("GET", "/readyz"); status != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("admin /readyz while draining: %d %s", status, body)
	}
	if status, body := e.readyz(); status != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("/readyz while draining: %d %s", status, body)
	}
	if status, _ := get("GET", "/healthz"); status != 200 {
		t.Fatalf("/healthz while draining: %d", status)
	}
}

var generatedID = regexp.MustCompile(`^req_[0-9a-f]{32}$`)

func TestRequestIDRoundTrip(t *testing.T) {
	e, access := newOpsEnv(t, nil, Options{})
	lastUpstreamID := func() string {
		t.Helper()
		reqs := e.received()
		if len(reqs) != 1 {
			t.Fatalf("%d upstream requests, want 1", len(reqs))
		}
		return reqs[0].Header.Get("X-Request-Id")
	}

	// Kept when valid, on both the answer and the upstream request.
	e.resetSims()
	_, h, _ := e.do("POST", chatPath, withHeaders(keyA, "x-request-id", "trace-abc-123"), chatBody(""))
	if got := string(h.Peek("x-request-id")); got != "trace-abc-123" {
		t.Fatalf("answer x-request-id %q", got)
	}
	if got := lastUpstreamID(); got != "trace-abc-123" {
		t.Fatalf("upstream x-request-id %q", got)
	}
	if l := accessLine(t, access, "trace-abc-123"); l["endpoint"] != "chat_completions" {
		t.Fatalf("access line %v", l)
	}

	// Alpha answers it also as request-id.
	e.resetSims()
	msg := `{"model":"chat-model","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`
	status, h, _ := e.do("POST", "/v1/router/alpha/v1/messages", withHeaders(keyA, "X-Request-Id", "alpha-trace-7"), msg)
	if status != 200 || string(h.Peek("x-request-id")) != "alpha-trace-7" || string(h.Peek("request-id")) != "alpha-trace-7" {
		t.Fatalf("alpha: %d x-request-id %q request-id %q", status, h.Peek("x-request-id"), h.Peek("request-id"))
	}
	if got := lastUpstreamID(); got != "alpha-trace-7" {
		t.Fatalf("alpha upstream x-request-id %q", got)
	}

	// Generated when absent or invalid; each one new.
	seen := map[string]bool{}
	for _, in := range []string{"", "has space", strings.Repeat("x", 129), "tab\there"} {
		e.resetSims()
		hdrs := bearer(keyA)
		if in != "" {
			hdrs["x-request-id"] = in
		}
		_, h, _ := e.do("POST", chatPath, hdrs, chatBody(""))
		id := string(h.Peek("x-request-id"))
		if !generatedID.MatchString(id) || seen[id] {
			t.Fatalf("incoming %q: answer id %q (seen before: %v)", in, id, seen[id])
		}
		seen[id] = true
		if got := lastUpstreamID(); got != id {
			t.Fatalf("incoming %q: upstream got %q, client %q", in, got, id)
		}
		accessLine(t, access, id)
	}

	// A rejection carries it too, in the alpha body's request_id as well.
	status, h, body := e.do("POST", "/v1/router/alpha/v1/messages", withHeaders("sk-wrong", "x-request-id", "rejected-1"), msg)
	var ab struct {
		RequestID string `json:"request_id"`
	}
	json.Unmarshal(body, &ab)
	if status != 401 || string(h.Peek("request-id")) != "rejected-1" || ab.RequestID != "rejected-1" {
		t.Fatalf("alpha rejection: %d %q %s", status, h.Peek("request-id"), body)
	}
	if l := accessLine(t, access, "rejected-1"); l["status"] != 401.0 || l["reason"] != "auth_invalid" {
		t.Fatalf("rejection access line %v", l)
	}
}

func TestAccessLogLinesAndNoSecrets(t *testing.T) {
	e, access := newOpsEnv(t, nil, Options{})
	const marker = "prompt-marker-5d1c"
	body := `{"model":"chat-model","session_id":"sess-log-1","messages":[{"role":"user","content":"` + marker + `"}]}`
	status, h, answer := e.do("POST", chatPath, withHeaders(keyA, "x-request-id", "log-ok"), body)
	if status != 200 {
		t.Fatalf("chat: %d", status)
	}
	e.do("POST", chatPath, withHeaders("sk-wrong-attempt-xyz", "x-request-id", "log-401"), body)
	e.do("POST", chatPath, withHeaders(keyB, "x-request-id", "log-502", "x-sim-fault", "reset"), body)
	e.do("POST", chatPath, withHeaders(keyA, "x-request-id", "log-unknown"), `{"model":"no-such-model","messages":[]}`)
	streamBody := `{"model":"chat-model","stream":true,"messages":[{"role":"user","content":"` + marker + `"}]}`
	_, _, streamed := e.do("POST", chatPath, withHeaders(keyA, "x-request-id", "log-stream"), streamBody)
	e.do("POST", "/v1/router/alpha/v1/messages", map[string]string{"x-api-key": keyA, "x-request-id": "log-alpha"},
		`{"model":"chat-model","max_tokens":5,"messages":[{"role":"user","content":"`+marker+`"}]}`)
	e.do("POST", "/gamma/v1beta/models/image-model:generateContent", map[string]string{"x-gamma-api-key": keyB, "x-request-id": "log-gamma"},
		`{"contents":[{"role":"user","parts":[{"text":"`+marker+`"}]}]}`)
	// Streamed answers (the SSE chat, and the gamma answer relayed with its
	// length) are logged when fasthttp closes them, after the client has them.
	eventually(t, "7 access log lines", func() bool { return strings.Count(access.String(), "\n") == 7 })

	ok := accessLine(t, access, "log-ok")
	want := map[string]any{
		"msg": "request", "level": "INFO", "key_id": "team-a", "family": "beta", "endpoint": "chat_completions",
		"model": "chat-model", "deployment": string(h.Peek("x-sim-deployment")) + "-beta", "status": 200.0,
		"bytes_in": float64(len(body)), "bytes_out": float64(len(answer)), "stream": false,
		"session": fmt.Sprintf("%016x", affinity.Hash([]byte("sess-log-1"))),
	}
	for k, v := range want {
		if ok[k] != v {
			t.Errorf("log-ok %s = %v, want %v", k, ok[k], v)
		}
	}
	for _, k := range []string{"time", "latency", "ttfb"} {
		if ok[k] == nil {
			t.Errorf("log-ok has no %s: %v", k, ok)
		}
	}
	if lat, ttfb := ok["latency"].(float64), ok["ttfb"].(float64); lat <= 0 || ttfb <= 0 || ttfb > lat {
		t.Errorf("latency %v ttfb %v", lat, ttfb)
	}
	if l := accessLine(t, access, "log-401"); l["key_id"] != "" || l["status"] != 401.0 || l["reason"] != "auth_invalid" {
		t.Errorf("log-401: %v", l)
	}
	if l := accessLine(t, access, "log-502"); l["key_id"] != "team-b" || l["status"] != 502.0 || l["reason"] != "upstream_error" || l["error"] == nil {
		t.Errorf("log-502: %v", l)
	}
	if l := accessLine(t, access, "log-unknown"); l["model"] != "no-such-model" || l["reason"] != "model_unknown" || l["deployment"] != "" {
		t.Errorf("log-unknown: %v", l)
	}
	if l := accessLine(t, access, "log-stream"); l["stream"] != true || l["bytes_out"] != float64(len(streamed)) || l["bytes_in"] != float64(len(streamBody)) || l["ttfb"] == nil {
		t.Errorf("log-stream: %v (client read %d bytes)", l, len(streamed))
	}
	if l := accessLine(t, access, "log-alpha"); l["family"] != "alpha" || l["status"] != 200.0 {
		t.Errorf("log-alpha: %v", l)
	}
	if l := accessLine(t, access, "log-gamma"); l["family"] != "gamma" || l["endpoint"] != "generate_content" || l["status"] != 200.0 {
		t.Errorf("log-gamma: %v", l)
	}
	all := access.String() + e.logBuf.String()
	secrets := []string{keyA, keyB, "sk-wrong-attempt-xyz", "up-alpha", "up-beta", "up-gamma", HashKey(keyA), marker, "sess-log-1", "Bearer"}
	for _, s := range secrets {
		if strings.Contains(all, s) {
			t.Errorf("the logs contain %q", s)
		}
	}
}

// startHoldUpstream serves a sim.Hold for the test: a beta deployment whose
// chat streams stay open until it is released.
func startHoldUpstream(t *testing.T) *sim.Hold {
	t.Helper()
	h, err := sim.ListenHold("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// withHold adds the deployment hold-beta and the model hold-model on it.
func withHold(h *sim.Hold) func(string) string {
	return func(y string) string {
		return strings.Replace(y, "models:\n", `  - {name: hold-beta, family: beta, base_url: "http://`+h.Addr()+`/v1", api_key: up-hold}
models:
  - {id: hold-model, upstreams: [hold-beta]}
`, 1)
	}
}

// openHoldStream starts a streamed chat on hold-model and returns it once its
// first chunk has arrived.
func openHoldStream(t *testing.T, e *testEnv, h *sim.Hold, id string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.base+chatPath, strings.NewReader(`{"model":"hold-model","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	req.Header.Set("Authorization", "Bearer "+keyA)
	req.Header.Set("x-request-id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	<-h.Started
	r := bufio.NewReader(resp.Body)
	first := make([]byte, len(sim.HoldFirst))
	if _, err := io.ReadFull(r, first); err != nil || string(first) != sim.HoldFirst {
		t.Fatalf("first chunk %q: %v", first, err)
	}
	return resp, r
}

func TestActiveStreamsAndStreamAccessLine(t *testing.T) {
	h := startHoldUpstream(t)
	e, access := newOpsEnv(t, withHold(h), Options{})
	t.Cleanup(h.Release) // before the gateway shuts down, which waits for the stream
	_, r := openHoldStream(t, e, h, "held-1")
	m := e.scrape()
	if m["gateway_active_streams"] != 1 || m[`gateway_upstream_in_flight{deployment="hold-beta"}`] != 1 {
		t.Fatalf("during the stream: active %v, in flight %v", m["gateway_active_streams"], m[`gateway_upstream_in_flight{deployment="hold-beta"}`])
	}
	if strings.Contains(access.String(), "held-1") {
		t.Fatal("access line written before the stream ended")
	}
	h.Release()
	rest, err := io.ReadAll(r)
	if err != nil || string(rest) != sim.HoldRest {
		t.Fatalf("rest of the stream %q: %v", rest, err)
	}
	eventually(t, "the stream finishes", func() bool { return e.scrape()["gateway_active_streams"] == 0 })
	l := accessLine(t, access, "held-1")
	if l["stream"] != true || l["bytes_out"] != float64(len(sim.HoldFirst)+len(sim.HoldRest)) || l["deployment"] != "hold-beta" || l["status"] != 200.0 {
		t.Fatalf("stream access line %v", l)
	}
	m = e.scrape()
	if m[`gateway_upstream_duration_seconds_count{deployment="hold-beta"}`] != 1 || m[`gateway_upstream_in_flight{deployment="hold-beta"}`] != 0 {
		t.Fatalf("after the stream: %v", m)
	}
}

func TestLabelValuesEscaped(t *testing.T) {
	for in, want := range map[string]string{
		`plain`: `"plain"`, `a"b`: `"a\"b"`, `a\b`: `"a\\b"`, "a\nb": `"a\nb"`, ``: `""`,
	} {
		if got := string(promtext.AppendLabelValue(nil, in)); got != want {
			t.Errorf("%q: got %s, want %s", in, got, want)
		}
	}
	// A model id that needs escaping still makes a valid series.
	e, _ := newOpsEnv(t, func(y string) string {
		return strings.Replace(y, "  - id: plain-model", "  - id: 'odd \"model\\'", 1)
	}, Options{})
	body := `{"model":"odd \"model\\","messages":[{"role":"user","content":"x"}]}`
	if status, _, b := e.do("POST", chatPath, bearer(keyA), body); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	m := e.scrape()
	if m[`gateway_requests_total{family="beta",endpoint="chat_completions",model="odd \"model\\",status="2xx"}`] != 1 {
		var keys []string
		for k := range m {
			if strings.HasPrefix(k, "gateway_requests_total") {
				keys = append(keys, k)
			}
		}
		t.Fatalf("escaped series missing: %v", keys)
	}
}

func TestStatusClass(t *testing.T) {
	for status, want := range map[int]string{0: "other", 99: "other", 100: "1xx", 200: "2xx", 302: "3xx", 404: "4xx", 499: "4xx", 503: "5xx", 599: "5xx", 600: "other"} {
		if got := classNames[statusClass(status)]; got != want {
			t.Errorf("%d: %s, want %s", status, got, want)
		}
	}
}

// A streamed answer lets go of a large request body once the request is sent;
// the upstream still gets it whole and the access log still counts it.
func TestStreamWithLargeBody(t *testing.T) {
	e, access := newOpsEnv(t, nil, Options{})
	content := strings.Repeat("lighthouse ", 20<<10/11*10) // about 200 KiB, above maxHeldBody
	body := `{"model":"plain-model","stream":true,"session_id":"big-1","messages":[{"role":"user","content":"` + content + `"}]}`
	for i := range 3 { // the pooled call is reused with and without its buffer
		id := fmt.Sprintf("big-stream-%d", i)
		e.resetSims()
		status, _, answer := e.do("POST", chatPath, withHeaders(keyA, "x-request-id", id), body)
		if status != 200 || !bytes.HasSuffix(answer, []byte("data: [DONE]\n\n")) {
			t.Fatalf("stream %d: %d %.200s", i, status, answer)
		}
		got := e.received()
		if len(got) != 1 || !strings.Contains(string(got[0].Body), content) || strings.Contains(string(got[0].Body), "session_id") {
			t.Fatalf("upstream did not get the spliced body whole: %d requests", len(got))
		}
		eventually(t, "access line", func() bool { return strings.Contains(access.String(), id) })
		if l := accessLine(t, access, id); l["bytes_in"] != float64(len(body)) {
			t.Fatalf("bytes_in %v, want %d", l["bytes_in"], len(body))
		}
	}
}

// TestUnreachableCauseLogged: a call that no deployment could take says why in
// its access line.
func TestUnreachableCauseLogged(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close() // nothing listens there now: a dial is refused
	e, access := newOpsEnv(t, func(y string) string {
		y = strings.Replace(y, "models:\n", "  - {name: gone-beta, family: beta, base_url: \"http://"+addr+"/v1\", api_key: k}\nmodels:\n  - {id: gone-model, upstreams: [gone-beta]}\n", 1)
		return y
	}, Options{})
	status, _, body := e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(keyA), `{"model":"gone-model","messages":[]}`)
	if status != 502 {
		t.Fatalf("%d %s", status, body)
	}
	if strings.Contains(string(body), addr) {
		t.Fatalf("the client sees the upstream address: %s", body)
	}
	for _, l := range accessLines(t, access) {
		if l["model"] == "gone-model" {
			if l["reason"] != "upstream_unreachable" || !strings.Contains(fmt.Sprint(l["error"]), "gone-beta: ") {
				t.Fatalf("access line: %v", l)
			}
			return
		}
	}
	t.Fatalf("no access line for gone-model:\n%s", access.String())
}

// TestMetricsMetadata: every metric family in /metrics has one # TYPE line,
// before its samples, and a # HELP line with a text; promtool, when
// installed, finds no family without help.
func TestMetricsMetadata(t *testing.T) {
	e, _ := newOpsEnv(t, nil, Options{})
	e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(keyA), `{"model":"plain-model","messages":[]}`)
	e.do("POST", "/v1/router/beta/v1/chat/completions", bearer("sk-wrong"), `{"model":"plain-model","messages":[]}`)
	_, _, body := adminGet(e.gw, "/metrics")
	typed, helped := map[string]string{}, map[string]bool{}
	samples := 0
	for _, line := range strings.Split(string(body), "\n") {
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(f, " ")
			if _, dup := typed[name]; dup {
				t.Errorf("two # TYPE lines for %s", name)
			}
			typed[name] = typ
			continue
		}
		if f, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, _ := strings.Cut(f, " ")
			if strings.TrimSpace(help) == "" {
				t.Errorf("%s: # HELP with no text", name)
			}
			helped[name] = true
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		samples++
		name := line[:strings.IndexAny(line, "{ ")]
		fam := name
		if _, ok := typed[fam]; !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && typed[base] != "" {
					fam = base
				}
			}
		}
		if typed[fam] == "" || !helped[fam] {
			t.Errorf("%s: no # TYPE or # HELP before it", line)
		}
	}
	if samples == 0 || typed["gateway_deployment_excluded"] != "gauge" || typed["gateway_affinity_picks_total"] != "counter" ||
		typed["gateway_requests_total"] != "counter" || typed["gateway_rejections_total"] != "counter" {
		t.Fatalf("%d samples, types %v", samples, typed)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Logf("promtool not installed: the lint by promtool check metrics is left out")
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, _ := cmd.CombinedOutput() // it exits 1 for the runtime metrics' naming, which is the metrics package's
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "no help text") || strings.Contains(line, "error while linting") {
			t.Errorf("promtool check metrics: %s", line)
		}
	}
}
