package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// The callers' keys made through the admin API, on one gateway with its Pebble store: the
// API's answers, what a key may call, and that no secret is ever shown but once.

const adminToken = "adm-0123456789abcdef"

func withAdmin(extra string) func(string) string {
	return func(y string) string {
		return y + "admin:\n  tokens: [{id: ops, key: " + adminToken + "}]\n" + extra
	}
}

// keysEnv is a gateway with an admin listener.
type keysEnv struct {
	*testEnv
	admin string // http://host:port of the admin listener
}

func newKeysEnv(t *testing.T, edit func(string) string) *keysEnv {
	t.Helper()
	e := &keysEnv{testEnv: newEnv(t, edit)}
	e.serveAdmin()
	return e
}

// serveAdmin serves the gateway's admin listener until the test ends.
func (e *keysEnv) serveAdmin() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	srv := e.gw.NewAdminServer()
	go srv.Serve(ln)
	e.t.Cleanup(func() { srv.Shutdown() })
	e.admin = "http://" + ln.Addr().String()
}

// call sends a request to the admin listener with token (none when empty).
func (e *keysEnv) call(method, path, token, body string) (int, []byte) {
	e.t.Helper()
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(method)
	req.SetRequestURI(e.admin + path)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.SetBodyString(body)
	if err := fasthttp.Do(req, resp); err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...)
}

// adminJSON calls the admin API with the admin token and wants status; it decodes the answer.
func (e *keysEnv) adminJSON(method, path, body string, want int) map[string]any {
	e.t.Helper()
	status, b := e.call(method, path, adminToken, body)
	if status != want {
		e.t.Fatalf("%s %s %s: %d %s, want %d", method, path, body, status, b, want)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		e.t.Fatalf("%s %s: %v: %s", method, path, err, b)
	}
	return v
}

func (e *keysEnv) chatStatus(key, model string) (int, []byte) {
	status, _, body := e.do("POST", "/v1/router/beta/v1/chat/completions", bearer(key), chatBodyFor(model))
	return status, body
}

func chatBodyFor(model string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
}

func TestKeysLifecycle(t *testing.T) {
	e := newKeysEnv(t, withAdmin(""))
	var secrets []string
	created := e.adminJSON("POST", "/admin/v1/keys", `{"name":"team-x","models":["chat-*"],"metadata":{"team":"x"},"limits":{"requests_per_minute":1000}}`, 201)
	id, secret := created["id"].(string), created["key"].(string)
	secrets = append(secrets, secret)
	if !strings.HasPrefix(id, "key_") || !strings.HasPrefix(secret, "sk-mg-") || created["source"] != "api" {
		t.Fatalf("create: %v", created)
	}
	// The official SDK with the new key; a model it may not use is 403 before routing.
	if _, err := e.openai(secret).Chat.Completions.New(context.Background(), chatParams("chat-model")); err != nil {
		t.Fatalf("a key made through the API: %v", err)
	}
	e.resetSims()
	status, body := e.chatStatus(secret, "plain-model")
	assertBetaError(t, status, body, 403)
	if len(e.received()) != 0 {
		t.Fatal("a refused model reached an upstream")
	}
	status, _, body = e.do("POST", "/v1/router/alpha/v1/messages", bearer(secret), `{"model":"image-model","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
	assertAlphaError(t, status, body, 403, "permission_error")
	// The model lists show the key its models alone.
	page, err := e.openai(secret).Models.List(context.Background())
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "chat-model" {
		t.Fatalf("models of the key: %+v %v", page, err)
	}
	if status, _, _ := e.do("GET", "/v1/models/plain-model", bearer(secret), ""); status != 404 {
		t.Fatalf("a model the key may not use, retrieved: %d", status)
	}
	status, _, body = e.do("GET", "/v1/router/alpha/v1/models", bearer(secret), "")
	if status != 200 || !strings.Contains(string(body), `"first_id":"chat-model"`) || strings.Contains(string(body), "image-model") {
		t.Fatalf("alpha models of the key: %d %s", status, body)
	}

	// Block, unblock.
	if got := e.adminJSON("POST", "/admin/v1/keys/"+id+"/block", "", 200); got["blocked"] != true {
		t.Fatalf("block: %v", got)
	}
	if status, body := e.chatStatus(secret, "chat-model"); status != 401 || !strings.Contains(string(body), "blocked") {
		t.Fatalf("a blocked key: %d %s", status, body)
	}
	e.adminJSON("POST", "/admin/v1/keys/"+id+"/unblock", "{}", 200)
	if status, _ := e.chatStatus(secret, "chat-model"); status != 200 {
		t.Fatalf("an unblocked key: %d", status)
	}

	// Rotate with an overlap: both secrets work; again without one: the last one stops.
	rotated := e.adminJSON("POST", "/admin/v1/keys/"+id+"/rotate", `{"overlap":"1h"}`, 200)
	second := rotated["key"].(string)
	secrets = append(secrets, second)
	for _, k := range []string{secret, second} {
		if status, _ := e.chatStatus(k, "chat-model"); status != 200 {
			t.Fatalf("within the overlap: %d", status)
		}
	}
	third := e.adminJSON("POST", "/admin/v1/keys/"+id+"/rotate", "", 200)["key"].(string)
	secrets = append(secrets, third)
	if status, _ := e.chatStatus(second, "chat-model"); status != 401 {
		t.Fatalf("a secret rotated without overlap: %d", status)
	}
	if status, _ := e.chatStatus(secret, "chat-model"); status != 200 {
		t.Fatalf("the first secret within its overlap: %d", status)
	}

	// Update: the models change at once.
	e.adminJSON("PATCH", "/admin/v1/keys/"+id, `{"models":["plain-model"],"name":"renamed"}`, 200)
	if status, _ := e.chatStatus(third, "plain-model"); status != 200 {
		t.Fatalf("after an update of models: %d", status)
	}
	got := e.adminJSON("GET", "/admin/v1/keys/"+id, "", 200)
	if got["name"] != "renamed" || got["metadata"].(map[string]any)["team"] != "x" {
		t.Fatalf("get after update: %v", got)
	}

	// The list pages, and shows the config's keys as such.
	list := e.adminJSON("GET", "/admin/v1/keys?limit=2", "", 200)
	data := list["data"].([]any)
	if len(data) != 2 || list["has_more"] != true {
		t.Fatalf("first page: %v", list)
	}
	list = e.adminJSON("GET", "/admin/v1/keys?after="+list["last_id"].(string), "", 200)
	if n := len(list["data"].([]any)); n != 1 || list["has_more"] != false {
		t.Fatalf("second page: %v", list)
	}
	if got := e.adminJSON("GET", "/admin/v1/keys/team-a", "", 200); got["source"] != "config" {
		t.Fatalf("a config key: %v", got)
	}
	if list := e.adminJSON("GET", "/admin/v1/keys?name=ren", "", 200); len(list["data"].([]any)) != 1 {
		t.Fatalf("by name prefix: %v", list)
	}

	// The keys survive a restart.
	_, metricsBefore := e.call("GET", "/metrics", "", "")
	e.restart()
	e.serveAdmin()
	if status, _ := e.chatStatus(third, "plain-model"); status != 200 {
		t.Fatalf("a stored key after a restart: %d", status)
	}
	// Delete revokes.
	e.adminJSON("DELETE", "/admin/v1/keys/"+id, "", 200)
	if _, err := e.openai(third).Chat.Completions.New(context.Background(), chatParams("plain-model")); sdkStatus(err) != 401 {
		t.Fatalf("a deleted key: %v", err)
	}
	e.adminJSON("GET", "/admin/v1/keys/"+id, "", 404)

	// No secret anywhere but in the answers of create and rotate.
	_, _, page2 := e.do("GET", "/readyz", nil, "")
	_, metrics := e.call("GET", "/metrics", "", "")
	_, status2 := e.call("GET", "/status", "", "")
	_, listed := e.call("GET", "/admin/v1/keys", adminToken, "")
	for _, text := range []string{e.logBuf.String(), string(metrics), string(status2), string(listed), string(page2)} {
		for _, s := range append(secrets, adminToken) {
			if strings.Contains(text, s) {
				t.Fatalf("a secret is shown: %s", text)
			}
		}
	}
	for _, action := range []string{"create", "block", "unblock", "rotate", "update", "delete"} {
		if !strings.Contains(e.logBuf.String(), `"action":"`+action+`","key_id":"`+id+`"`) {
			t.Fatalf("no audit line of %s:\n%s", action, e.logBuf.String())
		}
		if !strings.Contains(string(metricsBefore)+string(metrics), `gateway_admin_key_changes_total{action="`+action+`"}`) {
			t.Fatalf("no metric of %s", action)
		}
	}
	if !strings.Contains(string(metrics), "gateway_keys_snapshot_age_seconds ") {
		t.Fatal("no snapshot age in the metrics")
	}
}

func TestKeysAdminAuth(t *testing.T) {
	e := newKeysEnv(t, withAdmin(""))
	f := func(token string, want int) {
		t.Helper()
		if status, body := e.call("GET", "/admin/v1/keys", token, ""); status != want {
			t.Fatalf("token %q: %d %s, want %d", token, status, body, want)
		}
	}
	f("", 401)
	f(keyA, 401) // a caller's key
	f("wrong", 401)
	f(adminToken, 200)
	// An admin token is no caller's key.
	if status, _ := e.chatStatus(adminToken, "chat-model"); status != 401 {
		t.Fatalf("an admin token on a model call: %d", status)
	}
	// The config's keys are read-only.
	for _, c := range []struct{ method, path, body string }{
		{"PATCH", "/admin/v1/keys/team-a", `{"name":"x"}`},
		{"POST", "/admin/v1/keys/team-a/block", ""},
		{"DELETE", "/admin/v1/keys/team-a", ""},
		{"POST", "/admin/v1/keys", `{"id":"team-a"}`},
	} {
		status, body := e.call(c.method, c.path, adminToken, c.body)
		if status != 409 || !strings.Contains(string(body), "config file") {
			t.Fatalf("%s %s: %d %s, want 409", c.method, c.path, status, body)
		}
	}
	e.adminJSON("POST", "/admin/v1/keys", `{"id":"mine"}`, 201)
	e.adminJSON("POST", "/admin/v1/keys", `{"id":"mine"}`, 409)
}

func TestKeysAdminOffWithoutTokens(t *testing.T) {
	e := newKeysEnv(t, nil)
	if status, _ := e.call("GET", "/admin/v1/keys", adminToken, ""); status != 404 {
		t.Fatalf("the admin API without tokens: %d, want 404", status)
	}
	if status, _ := e.call("GET", "/metrics", "", ""); status != 200 {
		t.Fatalf("/metrics without require_token: %d", status)
	}
}

func TestStatusAndMetricsRequireToken(t *testing.T) {
	e := newKeysEnv(t, withAdmin("  require_token: true\n"))
	for _, p := range []string{"/metrics", "/status"} {
		if status, _ := e.call("GET", p, "", ""); status != 401 {
			t.Fatalf("%s without a token: %d", p, status)
		}
		if status, _ := e.call("GET", p, keyA, ""); status != 401 {
			t.Fatalf("%s with a caller's key: %d", p, status)
		}
		if status, _ := e.call("GET", p, adminToken, ""); status != 200 {
			t.Fatalf("%s with the admin token: %d", p, status)
		}
	}
	if status, _ := e.call("GET", "/readyz", "", ""); status != 200 {
		t.Fatalf("/readyz needs no token: %d", status)
	}
}

func TestKeysAdminBadInput(t *testing.T) {
	e := newKeysEnv(t, withAdmin(""))
	id := e.adminJSON("POST", "/admin/v1/keys", `{"id":"k1","name":"one"}`, 201)["id"].(string)
	before := e.adminJSON("GET", "/admin/v1/keys/"+id, "", 200)
	many := make([]string, 10000)
	for i := range many {
		many[i] = fmt.Sprintf(`"m%d":"v"`, i)
	}
	f := func(method, path, body, field string) {
		t.Helper()
		status, b := e.call(method, path, adminToken, body)
		var v struct {
			Error struct{ Field, Message string }
		}
		json.Unmarshal(b, &v)
		if status != 400 || v.Error.Field != field {
			t.Fatalf("%s %s %.80s: %d %s, want 400 on %s", method, path, body, status, b, field)
		}
	}
	f("POST", "/admin/v1/keys", `{"nme":"x"}`, "nme")
	f("POST", "/admin/v1/keys", `{"name":5}`, "name")
	f("POST", "/admin/v1/keys", `{"limits":{"requests_per_minute":"many"}}`, "limits.requests_per_minute")
	f("POST", "/admin/v1/keys", `{"limits":{"requests_per_minute":-1}}`, "limits.requests_per_minute")
	f("POST", "/admin/v1/keys", `{"limits":{"concurrent":100000000000}}`, "limits.concurrent")
	f("POST", "/admin/v1/keys", `{"limits":{"models":{"nope":{"concurrent":1}}}}`, "limits.models.nope")
	f("POST", "/admin/v1/keys", `{"limits":{"extra":1}}`, "limits.extra")
	f("POST", "/admin/v1/keys", `{"metadata":{`+strings.Join(many, ",")+`}}`, "metadata")
	f("POST", "/admin/v1/keys", `{"id":"a{b}"}`, "id")
	f("POST", "/admin/v1/keys", `{"id":"a b"}`, "id")
	f("POST", "/admin/v1/keys", "{\"id\":\"a\xffb\"}", "id")
	f("POST", "/admin/v1/keys", `{"models":["gpt-*"]}`, "models[0]")
	f("POST", "/admin/v1/keys", `{"models":"chat-model"}`, "models")
	f("POST", "/admin/v1/keys", `{"expires_at":"2001-01-01T00:00:00Z"}`, "expires_at")
	f("POST", "/admin/v1/keys", `{"expires_at":"tomorrow"}`, "expires_at")
	f("POST", "/admin/v1/keys", `{"name":"x"} trailing`, "body")
	f("POST", "/admin/v1/keys/"+id+"/rotate", `{"overlap":"87600h"}`, "overlap")
	f("POST", "/admin/v1/keys/"+id+"/rotate", `{"overlap":"-1s"}`, "overlap")
	f("POST", "/admin/v1/keys/"+id+"/block", `{"why":"x"}`, "why")
	f("GET", "/admin/v1/keys/a%20b", "", "id")
	f("GET", "/admin/v1/keys/%7Bx%7D", "", "id")
	f("GET", "/admin/v1/keys?limit=0", "", "limit")
	// A change with one bad field applies none of its fields.
	f("PATCH", "/admin/v1/keys/"+id, `{"name":"two","models":["nothing-*"]}`, "models[0]")
	f("PATCH", "/admin/v1/keys/"+id, `{"id":"other"}`, "id")
	if status, _ := e.call("POST", "/admin/v1/keys", adminToken, `{"name":"`+strings.Repeat("x", 1<<20)+`"}`); status != 413 {
		t.Fatalf("a body over 1 MiB: %d, want 413", status)
	}
	after := e.adminJSON("GET", "/admin/v1/keys/"+id, "", 200)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("refused changes were applied: %v, was %v", after, before)
	}
	list := e.adminJSON("GET", "/admin/v1/keys", "", 200)
	if n := len(list["data"].([]any)); n != 3 { // team-a, team-b, k1
		t.Fatalf("refused creates were applied: %v", list)
	}
}
