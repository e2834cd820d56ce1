package proxy

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/modelgate/gateway/proxy/family"
	"github.com/modelgate/gateway/store"
)

// TestStoreUnavailable runs the gateway on the Redis engine pointed at a port where no
// server listens: the calls that need state answer 503 in their family's shape with
// Retry-After, the calls that need none serve, /readyz says why it is not ready, and the
// failures are counted as unavailable.
func TestStoreUnavailable(t *testing.T) {
	e := newEnv(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	st, err := store.OpenRedisLazy(store.RedisOptions{Addrs: []string{dead}, Password: "topsecret-redis"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	gw, err := New(e.cfg, Options{Store: st, Keys: st, Limits: redisLimits(st), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	down := *e
	down.gw = gw

	resp := serveInProcess(&down, "POST", "/v1/router/beta/v1/chat/completions", "", "application/json", []byte(chatBody("")))
	if resp.StatusCode() != 200 {
		t.Fatalf("chat without a store: %d %s", resp.StatusCode(), resp.Body())
	}
	resp = serveInProcess(&down, "POST", "/v1/router/alpha/v1/messages", "", "application/json",
		[]byte(`{"model":"chat-model","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`))
	if resp.StatusCode() != 200 {
		t.Fatalf("messages without file references: %d %s", resp.StatusCode(), resp.Body())
	}
	f := func(fam family.Family, method, path, body string) {
		t.Helper()
		resp := serveInProcess(&down, method, path, "", "application/json", []byte(body))
		if resp.StatusCode() != 503 || string(resp.Header.Peek("Retry-After")) != "1" {
			t.Fatalf("%s %s: %d retry-after %q: %s", method, path, resp.StatusCode(), resp.Header.Peek("Retry-After"), resp.Body())
		}
		if fam == family.Beta {
			assertBetaError(t, resp.StatusCode(), resp.Body(), 503)
		} else {
			assertAlphaError(t, resp.StatusCode(), resp.Body(), 503, "api_error")
		}
		if bytes.Contains(resp.Body(), []byte(dead)) || bytes.Contains(resp.Body(), []byte("topsecret")) {
			t.Fatalf("the answer names the store's address or password: %s", resp.Body())
		}
	}
	f(family.Beta, "GET", "/v1/router/beta/v1/responses/resp_abc", "")
	f(family.Beta, "DELETE", "/v1/router/beta/v1/responses/resp_abc", "")
	f(family.Beta, "POST", "/v1/router/beta/v1/responses", `{"model":"chat-model","input":"hi"}`)
	f(family.Beta, "POST", "/v1/router/beta/v1/responses", `{"model":"chat-model","input":"hi","previous_response_id":"resp_abc"}`)
	f(family.Alpha, "GET", "/v1/router/alpha/v1/files", "")
	f(family.Alpha, "GET", "/v1/router/alpha/v1/files/file_svc_01J00000000000000000000000", "")
	f(family.Alpha, "POST", "/v1/router/alpha/v1/messages",
		`{"model":"chat-model","max_tokens":16,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"file_svc_01J00000000000000000000000"}}]}]}`)

	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("GET")
	ctx.Request.SetRequestURI("/readyz")
	gw.AdminHandler()(&ctx)
	body := string(ctx.Response.Body())
	if ctx.Response.StatusCode() != 503 || !strings.Contains(body, `"store":"unavailable"`) || !strings.Contains(body, "refused the connection") {
		t.Fatalf("/readyz: %d %s", ctx.Response.StatusCode(), body)
	}
	if strings.Contains(body, dead) || strings.Contains(body, "topsecret") {
		t.Fatalf("/readyz names the store's address or password: %s", body)
	}
	var m bytes.Buffer
	gw.WritePrometheus(&m)
	if !strings.Contains(m.String(), `gateway_store_operations_total{op="get_response",result="unavailable"} 3`) {
		t.Fatalf("unavailable get_response not counted:\n%s", linesWith(m.String(), "unavailable"))
	}
}

// linesWith returns the lines of s that hold sub.
func linesWith(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
