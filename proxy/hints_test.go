package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelgate/gateway/proxy/config"
)

// TestNotFoundNamesBaseURL: an SDK pointed at the wrong base URL gets a 404 in
// its own family's shape that names the base URL to use.
func TestNotFoundNamesBaseURL(t *testing.T) {
	e := newEnv(t, nil)
	host := strings.TrimPrefix(e.base, "http://")
	f := func(method, path string, headers map[string]string, wantShape, wantBase string) {
		t.Helper()
		status, _, body := e.do(method, path, headers, `{}`)
		if status != 404 {
			t.Fatalf("%s %s: %d %s", method, path, status, body)
		}
		var shape struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
				Code    any    `json:"code"`
				Status  string `json:"status"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &shape); err != nil {
			t.Fatalf("%s: %s: %v", path, body, err)
		}
		var got string
		switch {
		case shape.Type == "error" && shape.Error.Type == "not_found_error":
			got = "alpha"
		case shape.Error.Status == "NOT_FOUND":
			got = "gamma"
		case shape.Error.Type != "":
			got = "beta"
		}
		if got != wantShape {
			t.Errorf("%s: shape %s, want %s: %s", path, got, wantShape, body)
		}
		msg := shape.Error.Message
		if wantBase == "" {
			if strings.Contains(msg, "base URL") {
				t.Errorf("%s: a hint where none fits: %s", path, msg)
			}
			return
		}
		if !strings.Contains(msg, "to http://"+host+wantBase) {
			t.Errorf("%s: the message does not name %s: %s", path, wantBase, msg)
		}
	}
	alphaSDK := map[string]string{"anthropic-version": "2023-06-01"}
	f("POST", "/v1/messages", alphaSDK, "alpha", "/v1/router/alpha")
	f("POST", "/v1/messages/count_tokens", alphaSDK, "alpha", "/v1/router/alpha")
	f("POST", "/v1/router/alpha/v1/v1/messages", alphaSDK, "alpha", "/v1/router/alpha")
	f("GET", "/v1/files", alphaSDK, "alpha", "/v1/router/alpha")
	f("POST", "/v1/chat/completions", nil, "beta", "/v1/router/beta/v1")
	f("POST", "/chat/completions", nil, "beta", "/v1/router/beta/v1")
	f("POST", "/v1/router/beta/chat/completions", nil, "beta", "/v1/router/beta/v1")
	f("POST", "/v1/responses", nil, "beta", "/v1/router/beta/v1")
	f("POST", "/v1/images/generations", nil, "beta", "/v1/router/beta/v1")
	f("GET", "/v1/files", nil, "beta", "/v1/router/beta/v1")
	f("POST", "/v1beta/models/image-model:generateContent", nil, "gamma", "/v1/router/gamma")
	f("POST", "/v1/router/gamma/v1beta/v1beta/models/m:generateContent", nil, "gamma", "/v1/router/gamma")
	// no SDK's path, or the right base with an endpoint it lacks: no hint
	f("GET", "/nothing/here", nil, "beta", "")
	f("POST", "/v1/router/beta/v1/responses/x/y/z", nil, "beta", "")
}

// TestBaseURLHints: a deployment on a known provider's host without the path
// of that provider's SDK base URL is named, with the base URL to use; the
// right base URLs and unknown hosts are not.
func TestBaseURLHints(t *testing.T) {
	f := func(fam, baseURL, want string) {
		t.Helper()
		yaml := fmt.Sprintf("keys: [{id: a, key: k}]\nupstreams:\n  - {name: u, family: %s, base_url: %q, api_key: k}\nmodels: [{id: m, upstreams: [u]}]\n", fam, baseURL)
		cfg, err := config.Parse([]byte(yaml), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		hints := BaseURLHints(cfg)
		switch {
		case want == "" && len(hints) > 0:
			t.Errorf("%s %s: %q", fam, baseURL, hints)
		case want != "" && (len(hints) != 1 || !strings.HasPrefix(hints[0], "upstreams[0].base_url: "+baseURL+" ") || !strings.HasSuffix(hints[0], "use "+want)):
			t.Errorf("%s %s: %q, want one hint ending in use %s", fam, baseURL, hints, want)
		}
	}
	f("beta", "https://api.openai.com", "https://api.openai.com/v1")
	f("beta", "https://api.openai.com/", "https://api.openai.com/v1")
	f("beta", "https://API.OpenAI.com:443/v2", "https://API.OpenAI.com:443/v1")
	f("beta", "https://api.groq.com/v1", "https://api.groq.com/openai/v1")
	f("alpha", "https://api.anthropic.com/v1", "https://api.anthropic.com")
	f("gamma", "https://generativelanguage.googleapis.com/v1beta", "https://generativelanguage.googleapis.com")
	f("beta", "https://api.openai.com/v1", "")
	f("beta", "https://api.openai.com/v1/", "")
	f("beta", "https://api.groq.com/openai/v1", "")
	f("alpha", "https://api.anthropic.com", "")
	f("alpha", "https://api.anthropic.com/", "")
	f("gamma", "https://generativelanguage.googleapis.com", "")
	f("beta", "http://127.0.0.1:1", "")
	f("beta", "https://api.openai.com.example.net", "")
}
