package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelgate/gateway/bench/sim"
	"github.com/modelgate/gateway/proxy"
)

// The binary's tests: the gateway is built once, run as a child process
// against in-process simulators, and driven over HTTP and signals.

const testVersion = "v9.9.9-test"

// gatewayBin is the gateway binary, built once by TestMain with its version set.
var gatewayBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gateway-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gatewayBin = filepath.Join(dir, "gateway")
	out, err := exec.Command("go", "build", "-ldflags", "-X main.version="+testVersion, "-o", gatewayBin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	e2eCluster.Stop()
	gatewayS3.Stop()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binary returns the gateway binary built by TestMain.
func binary(t *testing.T) string {
	t.Helper()
	return gatewayBin
}

// Secrets of the test config: none may appear in any log line.
const (
	keyA     = "sk-cmd-team-a-secret"
	keyB     = "sk-cmd-team-b-secret"
	keyC     = "sk-cmd-team-c-secret" // added by a reload
	wrongKey = "sk-cmd-wrong-key-attempt"
	upBeta   = "up-cmd-beta-secret"
	upAlpha  = "up-cmd-alpha-secret"
	upHold   = "up-cmd-hold-secret"
	chatPath = "/v1/router/beta/v1/chat/completions"
)

var secrets = []string{keyA, keyB, keyC, wrongKey, upBeta, upAlpha, upHold}

// runBin runs the binary to its end and returns its exit code and output.
func runBin(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, out.String(), errOut.String()
}

func TestVersion(t *testing.T) {
	code, out, _ := runBin(t, "", "-version")
	if code != 0 || out != "gateway "+testVersion+"\n" {
		t.Fatalf("exit %d, %q", code, out)
	}
}

func TestHelp(t *testing.T) {
	code, help, errOut := runBin(t, "", "-help")
	if code != 0 || errOut != "" {
		t.Fatalf("-help exits %d, stderr %q", code, errOut)
	}
	for _, want := range []string{
		"-config file", "-listen address", "-log-format format", "-access-log format", "-admin-listen address",
		"-grace duration", "-version", "gateway check -config FILE", "gateway hash-key [KEY]",
		"SIGHUP", "SIGTERM", "store.engine", "store.addrs", "/healthz", "/readyz", "/metrics", "/status", "(default 30s)", `(default "127.0.0.1:9091")`, "-data directory",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("-help does not mention %q:\n%s", want, help)
		}
	}
	if code, _, errOut := runBin(t, "", "-no-such-flag"); code != 2 || !strings.Contains(errOut, "Usage:") {
		t.Errorf("an unknown flag exits %d: %s", code, errOut)
	}
	if code, _, errOut := runBin(t, "", "-access-log", "xml", "-config", "x.yaml"); code != 1 || !strings.Contains(errOut, "-access-log must be text, json or off") {
		t.Errorf("-access-log xml: exit %d, %s", code, errOut)
	}
}

// TestStrayWords: a word the gateway does not understand is an error with the
// usage, never a silent start of the demo.
func TestStrayWords(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	f := func(wantCode int, wantOut, wantErr string, args ...string) {
		t.Helper()
		code, out, errOut := runBin(t, "", args...)
		if code != wantCode || !strings.Contains(out, wantOut) || !strings.Contains(errOut, wantErr) {
			t.Errorf("%q: exit %d (want %d)\nstdout %q\nstderr %q", args, code, wantCode, out, errOut)
		}
		if strings.Contains(errOut, "no provider configured") {
			t.Errorf("%q started the demo", args)
		}
	}
	f(1, "", missing, "serve", "-config", missing)
	f(0, "Usage:", "", "help")
	f(0, "gateway "+testVersion, "", "version")
	f(2, "", `unknown command "bogus"`, "bogus", "-listen", "127.0.0.1:1")
	f(2, "", `unexpected argument "stray"`, "-listen", "127.0.0.1:1", "stray")
	f(2, "", `unexpected argument "b.yaml"`, "check", "a.yaml", "b.yaml")
	f(2, "", "hash-key takes one key", "hash-key", "a", "b")
}

// TestSecondGatewayOnOneStore: a second gateway on the same store says that
// another process holds it, once.
func TestSecondGatewayOnOneStore(t *testing.T) {
	e := newEnv(t)
	e.start()
	code, _, errOut := runBin(t, "", "-config", e.cfgPath, "-listen", "127.0.0.1:0")
	if code != 1 || strings.Count(errOut, "cannot open store") != 1 || strings.Count(errOut, "held by another process") != 1 ||
		strings.Contains(errOut, "temporarily unavailable") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

// TestDemoBesideAnother: a second demo started where a first holds ./data
// serves from a temporary store, says so, and removes it at exit; -data names
// the store; a store or port error comes before any line that says the
// gateway serves.
func TestDemoBesideAnother(t *testing.T) {
	dir := t.TempDir()
	demo := func(extra ...string) []string {
		return append([]string{"-listen", "127.0.0.1:0", "-admin-listen", "127.0.0.1:0", "-log-format", "json", "-access-log", "off"}, extra...)
	}
	first := launch(t, dir, demo(), nil)
	second := launch(t, dir, demo(), nil)
	tmp := logField(t, second.stderr.waitFor(t, "another process holds the demo's store"), "store")
	if tmp == "" || strings.HasPrefix(tmp, dir) {
		t.Fatalf("the second demo's store: %q", tmp)
	}
	for _, g := range []*gateway{first, second} {
		if status := chatCall(t, g.base, demoKey); status != 200 {
			t.Fatalf("chat on %s: %d\n%s", g.base, status, g.stderr.String())
		}
	}
	second.signal(syscall.SIGTERM)
	if code := second.exitCode(); code != 0 {
		t.Fatalf("the second demo exits %d:\n%s", code, second.stderr.String())
	}
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the temporary store is left behind: %v", err)
	}
	if strings.Contains(first.stderr.String(), "another process holds") {
		t.Fatalf("the first demo did not take ./data:\n%s", first.stderr.String())
	}

	serves := []string{"offline demo", "listening"}
	f := func(wantErr string, args ...string) {
		t.Helper()
		code, _, errOut := runBin(t, "", args...)
		if code != 1 || !strings.Contains(errOut, wantErr) {
			t.Fatalf("%q: exit %d, want 1 and %q:\n%s", args, code, wantErr, errOut)
		}
		for _, s := range serves {
			if strings.Contains(errOut, s) {
				t.Errorf("%q failed after a line with %q:\n%s", args, s, errOut)
			}
		}
	}
	f("held by another process", demo("-data", filepath.Join(dir, "data"))...)
	f("cannot listen on", "-listen", strings.TrimPrefix(first.base, "http://"), "-admin-listen", "127.0.0.1:0", "-data", t.TempDir(), "-log-format", "json")
	f("(-admin-listen)", "-listen", "127.0.0.1:0", "-admin-listen", strings.TrimPrefix(first.admin, "http://"), "-data", t.TempDir(), "-log-format", "json")
	own := filepath.Join(t.TempDir(), "own")
	third := launch(t, "", demo("-data", own), nil)
	if status := chatCall(t, third.base, demoKey); status != 200 {
		t.Fatalf("chat with -data: %d", status)
	}
	if _, err := os.Stat(own); err != nil {
		t.Fatalf("-data %s: %v", own, err)
	}
	if code, _, errOut := runBin(t, "", "-config", "x.yaml", "-data", own); code != 2 || !strings.Contains(errOut, "-data is the offline demo's store") {
		t.Fatalf("-data with -config: exit %d: %s", code, errOut)
	}
}

func TestHashKey(t *testing.T) {
	want := proxy.HashKey(keyA) + "\n"
	if code, out, _ := runBin(t, "", "hash-key", keyA); code != 0 || out != want {
		t.Fatalf("argument: exit %d, %q", code, out)
	}
	if code, out, _ := runBin(t, keyA+"\n", "hash-key"); code != 0 || out != want {
		t.Fatalf("stdin: exit %d, %q", code, out)
	}
	if code, _, _ := runBin(t, "", "hash-key"); code != 1 {
		t.Fatalf("empty key: exit %d", code)
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	writeConfig(t, good, dir, "127.0.0.1:1", "127.0.0.1:2", "")
	code, out, errOut := runBin(t, "", "check", "-config", good)
	if code != 0 || out != "config ok: 2 keys, 3 upstreams, 2 models\n" {
		t.Fatalf("good config: exit %d, %q %q", code, out, errOut)
	}
	bad := filepath.Join(dir, "bad.yaml")
	writeConfig(t, bad, dir, "127.0.0.1:1", "127.0.0.1:2", "  - {id: broken, upstreams: [no-such-upstream]}\n")
	code, _, errOut = runBin(t, "", "check", "-config", bad)
	if code != 1 || !strings.Contains(errOut, `models[2].upstreams[0]: unknown upstream "no-such-upstream"`) {
		t.Fatalf("bad config: exit %d, %q", code, errOut)
	}
	blocker := filepath.Join(dir, "a-file")
	os.WriteFile(blocker, nil, 0o600)
	unwritable := filepath.Join(dir, "unwritable.yaml")
	writeConfig(t, unwritable, filepath.Join(blocker, "sub"), "127.0.0.1:1", "127.0.0.1:2", "")
	if code, _, errOut := runBin(t, "", "check", unwritable); code != 1 || !strings.Contains(errOut, "store.path: "+blocker+" is not a directory") {
		t.Fatalf("a store path under a file: exit %d, %q", code, errOut)
	}
	if code, out, _ := runBin(t, "", "check", good); code != 0 || out != "config ok: 2 keys, 3 upstreams, 2 models\n" {
		t.Fatalf("check FILE: exit %d, %q", code, out)
	}
	// A beta base_url on the provider's host without /v1 is valid, and would
	// get the provider's 404 on every call: check says so, and passes.
	hinted := filepath.Join(dir, "hinted.yaml")
	writeConfig(t, hinted, dir, "127.0.0.1:1", "127.0.0.1:2", "")
	b, _ := os.ReadFile(hinted)
	os.WriteFile(hinted, []byte(strings.Replace(string(b), `base_url: "http://127.0.0.1:1/v1"`, `base_url: "https://api.openai.com"`, 1)), 0o600)
	code, out, errOut = runBin(t, "", "check", hinted)
	if code != 0 || out != "config ok: 2 keys, 3 upstreams, 2 models\n" ||
		!strings.Contains(errOut, "warning: upstreams[0].base_url: https://api.openai.com is not the base URL") ||
		!strings.Contains(errOut, "use https://api.openai.com/v1\n") {
		t.Fatalf("a beta base_url without /v1: exit %d, %q %q", code, out, errOut)
	}
	if code, _, errOut := runBin(t, "", "check"); code != 2 || !strings.Contains(errOut, "gateway check -config FILE") {
		t.Fatalf("no -config: exit %d, %q", code, errOut)
	}
	assertNoSecrets(t, out+errOut)
}

// writeConfig writes a config routing old-model to the simulator at simAddr
// and hold-model to the hold upstream at holdAddr, plus extraModels lines.
func writeConfig(t *testing.T, path, dir, simAddr, holdAddr, extraModels string, extraKeys ...string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "store: {path: %q}\nkeys:\n  - {id: team-a, key: %s}\n  - {id: team-b, sha256: %s}\n",
		filepath.Join(dir, "data"), keyA, proxy.HashKey(keyB))
	for _, k := range extraKeys {
		b.WriteString(k)
	}
	fmt.Fprintf(&b, `upstreams:
  - {name: s1-beta, family: beta, base_url: "http://%[1]s/v1", api_key: %[3]s}
  - {name: s1-alpha, family: alpha, base_url: "http://%[1]s", api_key: %[4]s}
  - {name: hold-beta, family: beta, base_url: "http://%[2]s/v1", api_key: %[5]s}
models:
  - {id: old-model, upstreams: [s1-beta, s1-alpha]}
  - {id: hold-model, upstreams: [hold-beta]}
`, simAddr, holdAddr, upBeta, upAlpha, upHold)
	b.WriteString(extraModels)
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func assertNoSecrets(t *testing.T, logs string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(logs, s) {
			t.Errorf("a log line holds the secret %q", s)
		}
	}
}

// lineLog collects a child's output, line by line, for tests that wait on it.
type lineLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// waitFor returns the first complete line holding s. It fails when none comes
// in 15 s: a guard against a hang, not a measure of speed.
func (l *lineLog) waitFor(t *testing.T, s string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, line := range strings.SplitAfter(l.String(), "\n") {
			if strings.HasSuffix(line, "\n") && strings.Contains(line, s) {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line with %q in:\n%s", s, l.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gateway is a running gateway process.
type gateway struct {
	t              *testing.T
	cmd            *exec.Cmd
	stdout, stderr *lineLog
	base, admin    string
	exited         chan struct{}
	waitErr        error
	cfgPath        string
}

// env is what a serving test runs against: a simulator, a hold upstream and a
// config file in a temporary directory.
type env struct {
	t       *testing.T
	dir     string
	cfgPath string
	sim     *sim.Server
	hold    *sim.Hold
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s, err := sim.Listen("127.0.0.1:0", sim.Options{Name: "s1", AlphaKey: upAlpha, BetaKey: upBeta})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e := &env{t: t, dir: t.TempDir(), sim: s, hold: startHoldUpstream(t)}
	e.cfgPath = filepath.Join(e.dir, "gateway.yaml")
	e.writeConfig("")
	return e
}

func (e *env) writeConfig(extraModels string, extraKeys ...string) {
	writeConfig(e.t, e.cfgPath, e.dir, e.sim.Addr(), e.hold.Addr(), extraModels, extraKeys...)
}

// start runs the gateway on e's config with JSON logs and waits until it listens.
func (e *env) start(args ...string) *gateway {
	e.t.Helper()
	args = append([]string{"-config", e.cfgPath, "-listen", "127.0.0.1:0", "-log-format", "json", "-access-log", "json"}, args...)
	if !slices.Contains(args, "-admin-listen") {
		args = append(args, "-admin-listen", "127.0.0.1:0")
	}
	g := launch(e.t, "", args, e.hold.Release) // let a held stream end, or the gateway would wait on it
	g.cfgPath = e.cfgPath
	return g
}

// launch runs the gateway binary with args in dir ("" for the test's own) and
// waits until it listens, on the admin listener too when args name one. At the
// test's end it calls beforeKill (when not nil), kills the process if it still
// runs and checks that no secret reached its output.
func launch(t *testing.T, dir string, args []string, beforeKill func()) *gateway {
	t.Helper()
	g := &gateway{t: t, stdout: &lineLog{}, stderr: &lineLog{}, exited: make(chan struct{})}
	g.cmd = exec.Command(binary(t), args...)
	g.cmd.Dir = dir
	g.cmd.Stdout, g.cmd.Stderr = g.stdout, g.stderr
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.waitErr = g.cmd.Wait(); close(g.exited) }()
	t.Cleanup(func() {
		if beforeKill != nil {
			beforeKill()
		}
		select {
		case <-g.exited:
		default:
			g.cmd.Process.Kill()
			<-g.exited
		}
		assertNoSecrets(t, g.stdout.String()+g.stderr.String())
	})
	g.base = "http://" + logField(t, g.stderr.waitFor(t, `"gateway listening"`), "addr")
	for i, a := range args {
		if a == "-admin-listen" && args[i+1] != "off" {
			g.admin = "http://" + logField(t, g.stderr.waitFor(t, `"admin listening"`), "addr")
		}
	}
	return g
}

func logField(t *testing.T, line, field string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("log line %q: %v", line, err)
	}
	s, _ := m[field].(string)
	return s
}

func (g *gateway) signal(sig syscall.Signal) {
	if err := g.cmd.Process.Signal(sig); err != nil {
		g.t.Fatal(err)
	}
}

// exitCode waits for the process to end and returns its exit code.
func (g *gateway) exitCode() int {
	g.t.Helper()
	select {
	case <-g.exited:
	case <-time.After(30 * time.Second):
		g.t.Fatal("the gateway did not exit")
	}
	var exit *exec.ExitError
	if errors.As(g.waitErr, &exit) {
		return exit.ExitCode()
	}
	if g.waitErr != nil {
		g.t.Fatal(g.waitErr)
	}
	return 0
}

// do sends one request and returns status, headers and body.
func do(t *testing.T, method, url, key string, headers map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

func chatBody(model string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
}

func (g *gateway) chat(key, model string) int {
	g.t.Helper()
	status, _, _ := do(g.t, "POST", g.base+chatPath, key, nil, chatBody(model))
	return status
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

// openHoldStream starts a streamed chat on hold-model and returns its reader
// once the first chunk has arrived: the stream stays open until hold.Release.
func (g *gateway) openHoldStream(h *sim.Hold, id string) *bufio.Reader {
	t := g.t
	t.Helper()
	req, _ := http.NewRequest("POST", g.base+chatPath, strings.NewReader(`{"model":"hold-model","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	req.Header.Set("Authorization", "Bearer "+keyA)
	req.Header.Set("x-request-id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("stream: status %d", resp.StatusCode)
	}
	<-h.Started
	r := bufio.NewReader(resp.Body)
	first := make([]byte, len(sim.HoldFirst))
	if _, err := io.ReadFull(r, first); err != nil || string(first) != sim.HoldFirst {
		t.Fatalf("first chunk %q: %v", first, err)
	}
	return r
}

func readRest(t *testing.T, r *bufio.Reader) {
	t.Helper()
	rest, err := io.ReadAll(r)
	if err != nil || string(rest) != sim.HoldRest {
		t.Fatalf("the stream's end: %q, %v", rest, err)
	}
}

// accessLine returns the access log line of request id.
func (g *gateway) accessLine(id string) map[string]any {
	g.t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(g.stdout.waitFor(g.t, `"request_id":"`+id+`"`)), &m); err != nil {
		g.t.Fatal(err)
	}
	return m
}

func TestServeRequestIDsMetricsAndAccessLog(t *testing.T) {
	e := newEnv(t)
	g := e.start("-admin-listen", "127.0.0.1:0")

	status, h, _ := do(t, "POST", g.base+chatPath, keyA, map[string]string{"x-request-id": "bin-trace-1"}, chatBody("old-model"))
	if status != 200 || h.Get("x-request-id") != "bin-trace-1" {
		t.Fatalf("chat: %d, x-request-id %q", status, h.Get("x-request-id"))
	}
	reqs := e.sim.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("X-Request-Id") != "bin-trace-1" {
		t.Fatalf("upstream requests %d, x-request-id %q", len(reqs), reqs[0].Header.Get("X-Request-Id"))
	}
	if l := g.accessLine("bin-trace-1"); l["key_id"] != "team-a" || l["deployment"] != "s1-beta" || l["status"] != 200.0 {
		t.Fatalf("access line %v", l)
	}
	status, h, _ = do(t, "POST", g.base+"/v1/router/alpha/v1/messages", wrongKey, nil,
		`{"model":"old-model","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`)
	id := h.Get("request-id")
	if status != 401 || id == "" || h.Get("x-request-id") != id {
		t.Fatalf("alpha rejection: %d request-id %q x-request-id %q", status, id, h.Get("x-request-id"))
	}
	if l := g.accessLine(id); l["reason"] != "auth_invalid" || l["family"] != "alpha" {
		t.Fatalf("rejection access line %v", l)
	}

	for _, p := range []string{"/metrics", "/status"} {
		if status, _, _ := do(t, "GET", g.base+p, "", nil, ""); status != 404 {
			t.Fatalf("%s on the client listener: %d", p, status)
		}
	}
	if status, h, page := do(t, "GET", g.admin+"/status", "", nil, ""); status != 200 ||
		!strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(page, `data-name="s1-beta"`) {
		t.Fatalf("admin /status: %d %q\n%s", status, h.Get("Content-Type"), page)
	}
	status, _, metrics := do(t, "GET", g.admin+"/metrics", "", nil, "")
	for _, want := range []string{
		`gateway_requests_total{family="beta",endpoint="chat_completions",model="old-model",status="2xx"} 1`,
		`gateway_rejections_total{family="alpha",reason="auth_invalid"} 1`,
		`gateway_upstream_duration_seconds_count{deployment="s1-beta"} 1`,
		`gateway_deployment_excluded{deployment="s1-beta",family="beta"} 0`,
		"gateway_files_stored 0",
	} {
		if status != 200 || !strings.Contains(metrics, want) {
			t.Fatalf("admin /metrics: %d, no %q in\n%s", status, want, metrics)
		}
	}
	for _, base := range []string{g.base, g.admin} {
		if status, _, body := do(t, "GET", base+"/healthz", "", nil, ""); status != 200 || body != "ok\n" {
			t.Fatalf("%s/healthz: %d %q", base, status, body)
		}
		if status, _, body := do(t, "GET", base+"/readyz", "", nil, ""); status != 200 || !strings.HasPrefix(body, `{"ready":true,`) {
			t.Fatalf("%s/readyz: %d %q", base, status, body)
		}
	}
	g.signal(syscall.SIGINT)
	if code := g.exitCode(); code != 0 {
		t.Fatalf("exit %d after SIGINT:\n%s", code, g.stderr.String())
	}
	g.stderr.waitFor(t, `"msg":"stopped"`)
}

// With -admin-listen off there is no admin listener, and the client listener
// still does not serve /metrics or /status.
func TestAdminListenOff(t *testing.T) {
	e := newEnv(t)
	g := e.start("-admin-listen", "off")
	for _, p := range []string{"/metrics", "/status"} {
		if status, _, _ := do(t, "GET", g.base+p, "", nil, ""); status != 404 {
			t.Fatalf("%s on the client listener: %d", p, status)
		}
	}
	if status, _, _ := do(t, "GET", g.base+"/readyz", "", nil, ""); status != 200 {
		t.Fatalf("/readyz on the client listener: %d", status)
	}
	if strings.Contains(g.stderr.String(), "admin listening") {
		t.Fatalf("an admin listener with -admin-listen off:\n%s", g.stderr.String())
	}
}

func TestReloadAddsModelAndKeyWithoutDroppingStream(t *testing.T) {
	e := newEnv(t)
	g := e.start()
	if s := g.chat(keyA, "new-model"); s != 404 {
		t.Fatalf("new-model before the reload: %d", s)
	}
	if s := g.chat(keyC, "old-model"); s != 401 {
		t.Fatalf("key C before the reload: %d", s)
	}
	stream := g.openHoldStream(e.hold, "held-over-reload")

	e.writeConfig("  - {id: new-model, upstreams: [s1-beta]}\n", "  - {id: team-c, key: "+keyC+"}\n")
	g.signal(syscall.SIGHUP)
	g.stderr.waitFor(t, `"msg":"config reloaded"`)
	if s := g.chat(keyA, "new-model"); s != 200 {
		t.Fatalf("new-model after the reload: %d", s)
	}
	if s := g.chat(keyC, "old-model"); s != 200 {
		t.Fatalf("key C after the reload: %d", s)
	}
	// The stream that started on the old config ends whole.
	e.hold.Release()
	readRest(t, stream)
	if l := g.accessLine("held-over-reload"); l["status"] != 200.0 || l["stream"] != true {
		t.Fatalf("stream access line %v", l)
	}
	g.signal(syscall.SIGTERM)
	if code := g.exitCode(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestReloadRefusesBrokenConfig(t *testing.T) {
	e := newEnv(t)
	g := e.start()
	e.writeConfig("  - {id: new-model, upstreams: [no-such-upstream]}\n", "  - {id: team-c, key: "+keyC+"}\n")
	g.signal(syscall.SIGHUP)
	line := g.stderr.waitFor(t, `"msg":"reload refused: the old config stays in force"`)
	if !strings.Contains(line, `models[2].upstreams[0]: unknown upstream \"no-such-upstream\"`) {
		t.Fatalf("the refusal does not name the field: %s", line)
	}
	if s := g.chat(keyA, "old-model"); s != 200 {
		t.Fatalf("old-model after a refused reload: %d", s)
	}
	if s := g.chat(keyC, "old-model"); s != 401 {
		t.Fatalf("a key of the refused config works: %d", s)
	}
	// A good config afterwards is taken.
	e.writeConfig("  - {id: new-model, upstreams: [s1-beta]}\n")
	g.signal(syscall.SIGHUP)
	g.stderr.waitFor(t, `"msg":"config reloaded"`)
	if s := g.chat(keyA, "new-model"); s != 200 {
		t.Fatalf("new-model after the good reload: %d", s)
	}
}

func TestSIGTERMLetsStreamFinish(t *testing.T) {
	e := newEnv(t)
	g := e.start("-grace", "1m", "-admin-listen", "127.0.0.1:0")
	stream := g.openHoldStream(e.hold, "held-over-shutdown")
	g.signal(syscall.SIGTERM)
	g.stderr.waitFor(t, `"msg":"shutting down"`)
	// The stream holds the process: it has not exited, and says it is not ready.
	if status, _, body := do(t, "GET", g.admin+"/readyz", "", nil, ""); status != 503 || !strings.Contains(body, "draining") {
		t.Fatalf("admin /readyz while shutting down: %d %q", status, body)
	}
	select {
	case <-g.exited:
		t.Fatalf("the gateway exited with a stream in flight:\n%s", g.stderr.String())
	default:
	}
	e.hold.Release()
	readRest(t, stream)
	if code := g.exitCode(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, g.stderr.String())
	}
	if l := g.accessLine("held-over-shutdown"); l["status"] != 200.0 {
		t.Fatalf("stream access line %v", l)
	}
	if strings.Contains(g.stderr.String(), "grace period over") {
		t.Fatal("the stream ended within the grace period, yet it was cut")
	}
	g.stderr.waitFor(t, `"msg":"stopped"`)
}

func TestSIGTERMGracePeriodOver(t *testing.T) {
	e := newEnv(t)
	g := e.start("-grace", "200ms")
	stream := g.openHoldStream(e.hold, "held-past-grace")
	g.signal(syscall.SIGTERM)
	if code := g.exitCode(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, g.stderr.String())
	}
	g.stderr.waitFor(t, "grace period over")
	if rest, _ := io.ReadAll(stream); strings.Contains(string(rest), "[DONE]") {
		t.Fatalf("the stream was not cut: %q", rest)
	}
}
