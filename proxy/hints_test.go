package proxy

import (
	"encoding/json"
	"strings"
	"testing"
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
